"""A serving GPU worker builds cudalab's own kernels (flush, spin, empty) as it opens (worker/gpu.py's
``build_own_soon``, called by worker/serve.py's ``open_gpu``), so a cold campaign's first trial does not wait for
their nvcc."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


def test_the_own_kernels_are_in_an_empty_cache_once_the_threads_end(device, tmp_path, monkeypatch):
    from cudalab import build
    from cudalab.worker.own_kernels import source_file

    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    threads = device.build_own_soon()
    assert len(threads) == len(device.OWN) == 3
    for t in threads:
        t.join(timeout=120)
    for source, name in device.OWN:
        assert build.build(source_file(source, name), {}, device.info.arch).cached, name


def test_a_serving_worker_starts_them_as_it_opens(monkeypatch):
    from cudalab.worker import gpu, serve

    started = []
    monkeypatch.setattr(gpu.Device, "build_own_soon", lambda self: started.append(self.info.arch) or [])
    dev, tele, _ = serve.open_gpu(0)
    try:
        assert started == [dev.info.arch]
    finally:
        if tele is not None:
            tele.close()
        dev.close()
