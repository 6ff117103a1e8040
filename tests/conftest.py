"""Shared fixtures; tests marked gpu / ncu / sanitizer skip where their hardware or tool is missing."""

from __future__ import annotations

import functools
import os
import shutil

import pytest


@pytest.fixture(scope="session", autouse=True)
def _build_cache(tmp_path_factory):
    """Keep the tests' nvcc builds out of the user's cache folder (and the user's builds out of the tests)."""
    before = os.environ.get("CUDALAB_CACHE")
    os.environ["CUDALAB_CACHE"] = str(tmp_path_factory.mktemp("cudalab-cache"))
    yield
    if before is None:
        os.environ.pop("CUDALAB_CACHE", None)
    else:
        os.environ["CUDALAB_CACHE"] = before


@functools.lru_cache(maxsize=1)
def gpu_reason() -> str:
    """'' when a GPU is usable, else why not."""
    try:
        from cudalab import gpu

        if gpu.device_count() == 0:
            return "no CUDA GPU"
    except Exception as exc:  # GpuUnavailableError, or pycuda missing entirely
        return f"no GPU: {exc}"
    return ""


def pytest_collection_modifyitems(config, items):
    for item in items:
        needs = [m for m in ("gpu", "ncu", "sanitizer") if m in item.keywords]
        if not needs:
            continue
        reason = gpu_reason()
        if not reason and "ncu" in needs and not shutil.which("ncu"):
            reason = "ncu not on PATH"
        if not reason and "sanitizer" in needs and not shutil.which("compute-sanitizer"):
            reason = "compute-sanitizer not on PATH"
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def device():
    """The GPU (session-wide: one context for all GPU tests)."""
    from cudalab import gpu

    dev = gpu.Device(0)
    yield dev
    dev.close()
