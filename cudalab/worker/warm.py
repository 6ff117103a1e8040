"""Start the GPU while Python is still importing: the driver, the primary context and a pinned buffer.

A worker spends about 0.25 s importing NumPy, pycuda and cudalab before it asks for its GPU, and the
driver takes about 0.4 s more to come up (``cuInit`` 0.2 s, the primary context 0.15 s, 128 MiB of
pinned host memory 0.07 s, on an H100). Called through ctypes, which lets go of the GIL for the
length of each call, the driver does that in a thread while the imports go on; pycuda then finds
the driver started and the primary context made, and its own calls return at once.

Nothing here is required: where libcuda cannot be loaded or a call fails, the thread ends quietly
and pycuda's own calls do the work (and say what is wrong) as before. This module imports only the
standard library, so the worker can start it first.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable

#: Pinned host memory made at start (two chunks of :meth:`cudalab.worker.devarray.DeviceArray.chunks`): the
#: buffer row-chunk downloads and staged uploads go through.
STAGING_BYTES = 128 << 20
#: ``CU_MEMHOSTALLOC_PORTABLE``: pinned for every context, not only the one current at allocation.
_PORTABLE = 1

_lock = threading.Lock()
_thread: threading.Thread | None = None
_hook: threading.Thread | None = None
_staging: tuple[int, int] | None = None  # (address, bytes)
_before: list[Any] = []  # what ``before_context`` returned


def start(index: int, staging_bytes: int = STAGING_BYTES, before_context: Callable[[], Any] | None = None) -> None:
    """Start GPU ``index`` in a background thread (once per process; later calls do nothing).

    Args:
        index: the CUDA device.
        staging_bytes: pinned host memory to make (0: none).
        before_context: run in a thread of its own at once, while the driver starts; the context is made
            only after it returned (NVML's list of who computes where must be read before this process
            joins it). Its value is :func:`before_context`'s.
    """
    global _thread, _hook
    with _lock:
        if _thread is not None:
            return
        if before_context is not None:
            _hook = threading.Thread(target=_call, args=(before_context,), name="cudalab-warm-hook", daemon=True)
            _hook.start()
        _thread = threading.Thread(target=_open, args=(index, staging_bytes), name="cudalab-warm", daemon=True)
        _thread.start()


def before_context() -> Any | None:
    """What the ``before_context`` hook of :func:`start` returned (None: no hook, it failed, or no start).
    It does not wait for the pinned buffer: the context may be made now."""
    if _hook is not None:
        _hook.join()
    return _before[0] if _before else None


def _call(hook: Callable[[], Any]) -> None:
    try:
        _before.append(hook())
    except Exception:  # the hook's caller does without, as with no hook
        pass


def _open(index: int, staging_bytes: int) -> None:
    global _staging
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        if cuda.cuInit(0) != 0:
            return
        dev = ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(dev), index) != 0:
            return
        if _hook is not None:
            _hook.join()
        ctx = ctypes.c_void_p()
        # kept retained for the life of the process: pycuda's retain of the same context is then a count
        if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) != 0 or not staging_bytes:
            return
        if cuda.cuCtxPushCurrent_v2(ctx) != 0:
            return
        try:
            ptr = ctypes.c_void_p()
            if cuda.cuMemHostAlloc(ctypes.byref(ptr), ctypes.c_size_t(staging_bytes), _PORTABLE) == 0 and ptr.value:
                _staging = (int(ptr.value), staging_bytes)
        finally:
            cuda.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
    except Exception:  # no libcuda here, a symbol missing: pycuda does it all, as without this module
        return


def opening() -> bool:
    """Whether the start is still running (False when it ended, or never began)."""
    t = _thread
    return t is not None and t.is_alive()


def wait(timeout: float | None = None) -> None:
    """Wait for the start to finish (a no-op when it was never started)."""
    t = _thread
    if t is not None:
        t.join(timeout)


def take_staging(nbytes: int) -> Any | None:
    """The pinned buffer made at start as a uint8 NumPy array, if it holds ``nbytes``; None otherwise.
    It is handed out once (the caller keeps it for the life of the process)."""
    global _staging
    wait()
    with _lock:
        got, _staging = _staging, None
    if got is None:
        return None
    addr, size = got
    if size < nbytes:
        with _lock:
            _staging = got  # too small for this caller: left for a later one
        return None
    import numpy as np  # noqa: PLC0415  (this module stays standard library at import)

    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(addr))
