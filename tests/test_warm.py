"""cudalab.worker.warm on a fake libcuda: the driver starts in a thread, the NVML hook is read before the context
is made, the pinned buffer is handed out once; without libcuda nothing happens and nothing fails."""

from __future__ import annotations

import ctypes
import importlib
import threading
import time

import pytest

from cudalab.worker import warm as warm_module


class FakeCuda:
    """The five driver calls warm makes, recorded in order; cuMemHostAlloc hands out a real buffer."""

    def __init__(self, fail: str = ""):
        self.calls: list[str] = []
        self.fail = fail
        self.buffer = (ctypes.c_uint8 * 4096)()

    def __getattr__(self, name):
        def call(*args):
            self.calls.append(name)
            if name == self.fail:
                return 1
            if name == "cuMemHostAlloc":
                args[0]._obj.value = ctypes.addressof(self.buffer)
            return 0
        return call


@pytest.fixture
def warm(monkeypatch):
    mod = importlib.reload(warm_module)  # module state is once per process: a fresh copy per test
    yield mod
    mod.wait(5)


def test_hook_runs_before_the_context_and_the_buffer_is_handed_out_once(warm, monkeypatch):
    cuda = FakeCuda()
    monkeypatch.setattr(warm.ctypes, "CDLL", lambda name: cuda)
    order = []

    def hook():
        time.sleep(0.05)  # slower than the fake driver: the context must still wait for it
        order.append(list(cuda.calls))
        return {123}

    warm.start(0, staging_bytes=4096, before_context=hook)
    assert warm.before_context() == {123}
    assert "cuDevicePrimaryCtxRetain" not in order[0]
    arr = warm.take_staging(1000)
    assert arr is not None and arr.nbytes == 4096 and arr.ctypes.data == ctypes.addressof(cuda.buffer)
    assert warm.take_staging(10) is None  # once
    assert cuda.calls == ["cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxPushCurrent_v2",
                          "cuMemHostAlloc", "cuCtxPopCurrent_v2"]


def test_a_buffer_too_small_is_kept_for_a_later_caller(warm, monkeypatch):
    monkeypatch.setattr(warm.ctypes, "CDLL", lambda name: FakeCuda())
    warm.start(0, staging_bytes=4096)
    assert warm.take_staging(8192) is None
    assert warm.take_staging(4096) is not None


@pytest.mark.parametrize("fail", ["cuInit", "cuDevicePrimaryCtxRetain", "cuMemHostAlloc"])
def test_a_failing_driver_call_leaves_it_to_pycuda(warm, monkeypatch, fail):
    cuda = FakeCuda(fail)
    monkeypatch.setattr(warm.ctypes, "CDLL", lambda name: cuda)
    warm.start(0, staging_bytes=4096, before_context=lambda: {1})
    assert warm.before_context() == {1}
    assert warm.take_staging(1) is None
    assert cuda.calls[-1] in (fail, "cuCtxPopCurrent_v2")


def test_no_libcuda_and_no_start_do_nothing(warm, monkeypatch):
    assert warm.before_context() is None and warm.take_staging(1) is None  # never started
    def missing(name):
        raise OSError("libcuda.so.1: cannot open shared object file")
    monkeypatch.setattr(warm.ctypes, "CDLL", missing)
    warm.start(0, before_context=lambda: 1 / 0)  # a failing hook is None, not an error
    assert warm.before_context() is None and warm.take_staging(1) is None
    assert not [t for t in threading.enumerate() if t.name.startswith("cudalab-warm") and t.is_alive()]
