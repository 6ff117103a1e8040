"""The only module that imports pycuda, and only inside functions, when a GPU command runs.

It wraps what the rest of cudalab needs: the device and its properties, device arrays (pitched or
not), loading the cubin :mod:`cudalab.build` makes and launching its kernels, CUDA-event timing,
the L2 flush, and a CuPy view of device memory for the library reference rows.
"""

from __future__ import annotations

import atexit
import gc
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from cudalab import build
from cudalab.worker import heartbeat
from cudalab.worker import warm
from cudalab.errors import CompileError, GpuError, GpuUnavailableError
from cudalab.worker.devarray import DeviceArray
from cudalab.launch import DeviceLimits, Dim3, fmt_dims
from cudalab.records.device import DeviceInfo
from cudalab.worker.own_kernels import EMPTY_SRC, FLUSH_SRC, SPIN_SRC, source_file

INSTALL_HINT = "install it on a machine with an NVIDIA driver: pip install -e '.[gpu]'"


@dataclass(frozen=True)
class EventTime:
    """One event-timed sample.

    Attributes:
        ms: time between the two events.
        ahead: the launches were all queued before the GPU reached the start event, so no host
            latency can lie inside the window (False: it may; under ncu, whose launch interception
            is slow and uneven, such samples read up to 20% long on an H100).
    """

    ms: float
    ahead: bool


def _driver():
    """Import and initialise pycuda.driver, or say in one line what is missing."""
    try:
        import pycuda.driver as drv  # noqa: PLC0415  (lazy on purpose: CPU-only machines)
    except ImportError as exc:
        raise GpuUnavailableError(f"pycuda is not installed or cannot load ({exc}); {INSTALL_HINT}") from None
    try:
        drv.init()
    except Exception as exc:  # pycuda raises its own RuntimeError types without a driver
        raise GpuUnavailableError(f"the CUDA driver could not start ({exc}); is an NVIDIA GPU and driver present?") from None
    return drv


def _version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def driver_release() -> str:
    """The kernel driver's release (``580.159.04``) from /proc on Linux, or '' where it is not there."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return ""
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    return m.group(1) if m else ""


def pci_bus_id(index: int) -> str:
    """The PCI bus id of CUDA device ``index`` (``0000:19:00.0``), without creating a context: how
    NVML (which numbers GPUs its own way) finds the same GPU."""
    return str(_driver().Device(index).pci_bus_id())


def device_count() -> int:
    """Number of CUDA devices (raises GpuUnavailableError without pycuda or a driver)."""
    return _driver().Device.count()


class Kernel:
    """A compiled ``extern "C"`` kernel, launched with explicit grid, block and dynamic shared memory."""

    def __init__(self, dev: "Device", function: Any, name: str, info: "build.KernelInfo | None" = None):
        self._dev = dev
        self._fn = function
        self.name = name
        self.info = info  # ptxas's report and the parameter sizes of the build this kernel came from
        attr = dev.drv.function_attribute
        self.num_regs = function.get_attribute(attr.NUM_REGS)
        self.static_shared = function.get_attribute(attr.SHARED_SIZE_BYTES)
        self.local_bytes = function.get_attribute(attr.LOCAL_SIZE_BYTES)
        self.max_threads = function.get_attribute(attr.MAX_THREADS_PER_BLOCK)
        self._sig: str | None = None
        self._dyn_limit = 0
        self.last_launch: tuple[tuple[int, ...], int] | None = None

    def launch(self, grid: Dim3, block: Dim3, args: Sequence[Any], shared: int = 0) -> None:
        """Enqueue one launch. Args are DeviceArrays or NumPy scalars (their dtype sets the C type)."""
        sig = "".join(_code(a) for a in args)
        if sig != self._sig:
            self._fn.prepare(sig)
            self._sig = sig
        if self.static_shared + shared > 48 * 1024 and shared > self._dyn_limit:
            # Above 48 KiB in all (its static arrays count) a kernel must opt in to its dynamic bytes.
            optin = self._dev.limits.max_shared_per_block_optin
            if self.static_shared + shared > optin:
                raise GpuError(f"{self.name}: {self.static_shared} bytes of static and {shared} of dynamic shared "
                               f"memory per block; the device allows {optin} in all")
            self._fn.set_attribute(self._dev.drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
            self._dyn_limit = shared
        vals = [a.ptr if isinstance(a, DeviceArray) else a for a in args]
        self.last_launch = (tuple(block), shared)  # what the row's occupancy is computed for
        if self._dev.launch_log is not None:  # child runs under a tool: how its launches are matched
            self._dev.launch_log.append((self.name, fmt_dims(grid), fmt_dims(block)))
        try:
            if self._dev.stream is not None:  # a graph is being captured (Device.capture)
                self._fn.prepared_async_call(tuple(grid), tuple(block), self._dev.stream, *vals, shared_size=shared)
            else:
                self._fn.prepared_call(tuple(grid), tuple(block), *vals, shared_size=shared)
        except self._dev.drv.Error as exc:
            raise GpuError(f"launch of {self.name} failed: {exc}") from None


def _code(arg: Any) -> str:
    if isinstance(arg, DeviceArray):
        return "P"
    codes = {np.int32: "i", np.uint32: "I", np.int64: "q", np.uint64: "Q", np.float32: "f", np.float64: "d"}
    for t, c in codes.items():
        if isinstance(arg, t):
            return c
    raise TypeError(f"kernel argument {arg!r} must be a DeviceArray or a sized NumPy scalar (np.int32(...))")


class Device:
    """One GPU, its primary context made current (shared with CuPy), and the helpers around it."""

    def __init__(self, index: int = 0):
        self.drv = drv = _driver()
        count = drv.Device.count()
        if count == 0:
            raise GpuUnavailableError("no CUDA GPU found (the driver loaded but reports 0 devices)")
        if not 0 <= index < count:
            raise GpuUnavailableError(f"GPU {index} does not exist; this machine has {count} (0..{count - 1})")
        self._device = d = drv.Device(index)
        # The primary context is the one the CUDA runtime (and so CuPy) uses: sharing it lets
        # the library reference rows read our device arrays and run on the same stream.
        self._ctx = d.retain_primary_context()
        self._ctx.push()
        atexit.register(self.close)
        a = drv.device_attribute
        get = d.get_attribute
        self.info = DeviceInfo(
            index=index,
            name=d.name(),
            compute_capability=d.compute_capability(),
            sm_count=get(a.MULTIPROCESSOR_COUNT),
            total_memory=d.total_memory(),
            l2_bytes=get(a.L2_CACHE_SIZE),
            sm_clock_mhz=get(a.CLOCK_RATE) // 1000,
            mem_clock_mhz=get(a.MEMORY_CLOCK_RATE) // 1000,
            bus_width_bits=get(a.GLOBAL_MEMORY_BUS_WIDTH),
            driver_version=_version(drv.get_driver_version()),
            cuda_version=".".join(str(x) for x in drv.get_version()[:2]),
            driver_release=driver_release(),
        )
        self.limits = DeviceLimits(
            max_threads_per_block=get(a.MAX_THREADS_PER_BLOCK),
            max_block=(get(a.MAX_BLOCK_DIM_X), get(a.MAX_BLOCK_DIM_Y), get(a.MAX_BLOCK_DIM_Z)),
            max_grid=(get(a.MAX_GRID_DIM_X), get(a.MAX_GRID_DIM_Y), get(a.MAX_GRID_DIM_Z)),
            max_shared_per_block=get(a.MAX_SHARED_MEMORY_PER_BLOCK),
            max_shared_per_block_optin=get(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            sm_count=get(a.MULTIPROCESSOR_COUNT),
        )
        self._scratch = None
        self._flush_fn: Any = None
        self._spin_fn: Any = None
        self._empty_fn: Any = None
        self.stream: Any = None           # the capture stream while Device.capture runs, else None (legacy stream)
        self._capture_stream: Any = None
        self._internal: list[Any] = []
        self._modules: dict[tuple, Any] = {}
        self._staging = None
        #: (kernel, grid, block) of every launch, when a child run under a tool sets it to a list
        self.launch_log: list[tuple[str, str, str]] | None = None

    def close(self) -> None:
        """Free what this object holds and release the context (safe to call twice)."""
        if self._ctx is None:
            return
        self._modules.clear()
        self._staging = None
        self._spin_fn = None
        self._empty_fn = None
        self._flush_fn = None
        self._internal.clear()
        if self._scratch is not None:
            self._scratch.free()
            self._scratch = None
        gc.collect()
        try:
            self._ctx.pop()
        except Exception:  # already popped by an interrupted run: nothing left to release
            pass
        self._ctx = None

    def device_count(self) -> int:
        """How many GPUs this process sees (``--devices all`` asks the first worker)."""
        return int(self.drv.Device.count())

    # --- memory -------------------------------------------------------------------------
    def mem_info(self) -> tuple[int, int]:
        """(free, total) device memory in bytes."""
        return self.drv.mem_get_info()

    def empty(self, shape: tuple[int, ...], dtype: Any, pitched: bool = False) -> DeviceArray:
        """Allocate an uninitialised device array."""
        return DeviceArray(self, shape, np.dtype(dtype), pitched)

    def to_device(self, host: np.ndarray, pitched: bool = False) -> DeviceArray:
        """Allocate and upload a host array."""
        arr = self.empty(host.shape, host.dtype, pitched)
        arr.upload(host)
        return arr

    def memcpy_dtod(self, dst: DeviceArray, src: DeviceArray, nbytes: int) -> None:
        """The driver's device-to-device copy (the roofline row), enqueued on the default stream (or on the stream
        being captured: graph timing replays it)."""
        self.drv.memcpy_dtod_async(dst.ptr, src.ptr, nbytes, self.stream)

    def staging(self, nbytes: int) -> np.ndarray:
        """A pinned host buffer of at least ``nbytes`` (uint8), kept for the process: downloads into
        pinned memory run at full PCIe/NVLink speed, pageable ones at a fraction of it."""
        if self._staging is None or self._staging.nbytes < nbytes:
            # the worker's start made one while Python imported (cudalab.worker.warm): 70 ms less here
            self._staging = warm.take_staging(nbytes)
            if self._staging is None:
                self._staging = self.drv.pagelocked_empty(max(nbytes, 1), np.uint8)
        return self._staging

    def flush_l2(self) -> None:
        """Read a buffer twice the L2 size so the next sample starts with a cold cache of clean lines
        (see :data:`cudalab.worker.own_kernels.FLUSH_SRC`); a memset of it where the read kernel cannot be built."""
        nbytes = 2 * max(self.info.l2_bytes, 1 << 20)
        if self._scratch is None:
            self._scratch = self.drv.mem_alloc(nbytes + 64)
            self.drv.memset_d32(self._scratch, 0x5A5A5A5A, nbytes // 4)  # filled once, read ever after
            self._flush_fn = self._build_internal(FLUSH_SRC, "cudalab_flush_read")
        if self._flush_fn:
            self._flush_fn(self._scratch, np.uint64(nbytes // 16), np.uintp(int(self._scratch) + nbytes),
                           block=(256, 1, 1), grid=(4 * self.info.sm_count, 1), stream=self.stream)
        else:
            self.drv.memset_d32_async(self._scratch, 0x5A5A5A5A, nbytes // 4, self.stream)

    #: cudalab's own small kernels (source, name): their cubins are built as a serving worker opens (build_own_soon).
    OWN = ((FLUSH_SRC, "cudalab_flush_read"), (SPIN_SRC, "cudalab_spin"), (EMPTY_SRC, "cudalab_empty"))

    def build_own_soon(self) -> list[threading.Thread]:
        """Build :data:`OWN`'s cubins into the build cache on threads of their own, one each, while the worker
        waits for its first point: from an empty cache its first flush and spin otherwise waited for nvcc inside
        the first trial (0.57 s on an H200 host, a cold campaign's, after it had already waited for that trial's own
        build). Only the cubins: each module is loaded at its first use, on the context's thread, and a build still
        under way then is waited for (the build's lock), not made twice. A build that fails leaves it to that use.

        Returns:
            The threads (a test joins them).
        """
        arch = self.info.arch

        def one(source: str, name: str) -> None:
            try:
                build.build(source_file(source, name), {}, arch)
            except Exception:  # noqa: BLE001  (_build_internal tries again at first use and falls back)
                pass

        threads = [threading.Thread(target=one, args=pair, name=f"cudalab-own-{pair[1]}", daemon=True)
                   for pair in self.OWN]
        for t in threads:
            t.start()
        return threads

    def _build_internal(self, source: str, name: str) -> Any:
        """One of cudalab's own small kernels (flush, spin), or False where nvcc cannot build it here
        (built and cached as the families' kernels are: pycuda's compiler ran ``nvcc --version`` first)."""
        try:
            mod = self.drv.module_from_buffer(build.build(source_file(source, name), {}, self.info.arch).cubin)
        except Exception:  # no nvcc, an old PTX ISA, no cache folder: the callers fall back
            return False
        self._internal.append(mod)  # keep the module: unloading it would invalidate the function
        return mod.get_function(name)

    def synchronize(self) -> None:
        """Wait for all enqueued work; a failed kernel surfaces here as GpuError."""
        try:
            self._ctx.synchronize()
        except self.drv.Error as exc:
            raise GpuError(f"the GPU reported an error: {exc}") from None
        heartbeat.beat()

    # --- compile and time ---------------------------------------------------------------------
    def compile(self, source: Path, defines: dict[str, str], kernels: Sequence[str],
                arch: str | None = None) -> dict[str, Kernel]:
        """Build ``source`` for this GPU (:func:`cudalab.build.build`) and return the named kernels.

        ``arch``: an arch-specific target of this GPU (``sm_90a``, :func:`cudalab.plan.variant_arch`)
        instead of its plain one.

        The cubin is the one ``cudalab compile`` reports (same flags, same disk cache); modules stay
        loaded per (file, defines) for the life of this process.

        Raises:
            UsageError: a define is refused.
            CompileError: with nvcc's log (file and line), or the driver refused the cubin.
        """
        arch = arch or self.info.arch
        key = (str(source), tuple(sorted(defines.items())), arch)
        entry = self._modules.get(key)
        if entry is None:
            b = build.build(source, defines, arch)
            try:
                mod = self.drv.module_from_buffer(b.cubin)
            except self.drv.Error as exc:
                raise CompileError(f"the driver could not load the {b.arch} cubin of {source}: {exc}") from None
            entry = self._modules[key] = (mod, b)
        mod, b = entry
        out = {}
        for name in kernels:
            try:
                out[name] = Kernel(self, mod.get_function(name), name, b.kernel(name))
            except self.drv.LogicError:
                raise CompileError(f"{source} has no kernel named {name!r} (is it extern \"C\"?)") from None
        return out

    def capture(self, enqueue: Callable[[], None]) -> Any:
        """Capture the kernels ``enqueue`` launches (and L2 flushes) into a CUDA graph
        (:func:`cudalab.worker.graphs.capture`); its ``launch()`` replays them on the default stream.

        Raises:
            GpuError: something in ``enqueue`` cannot be captured (a library call, a copy, a synchronisation).
        """
        from cudalab.worker import graphs  # noqa: PLC0415

        if self._scratch is None:
            self.flush_l2()  # the flush's buffer is allocated outside the capture (no allocation inside one)
        if self._capture_stream is None:
            self._capture_stream = self.drv.Stream()
        self.stream = self._capture_stream
        try:
            return graphs.capture(int(self.stream.handle), enqueue)
        finally:
            self.stream = None

    def marks(self, count: int) -> Any:
        """``count`` CUDA events that a capture records as graph nodes (:class:`cudalab.worker.graphs.EventMarks`).

        Raises:
            GpuError: the driver could not create them.
        """
        from cudalab.worker import graphs  # noqa: PLC0415

        return graphs.EventMarks(count, lambda: int(self.stream.handle) if self.stream is not None else 0)

    def empty_kernel(self) -> None:
        """Enqueue cudalab's empty kernel (one thread) on the current stream: graph timing's reference launch.

        Raises:
            GpuError: it cannot be built here (no nvcc): the caller times the row another way.
        """
        if self._empty_fn is None:
            self._empty_fn = self._build_internal(EMPTY_SRC, "cudalab_empty")
        if self._empty_fn is False:
            raise GpuError("cudalab's empty kernel cannot be built here (nvcc): no reference launch for the graph")
        self._empty_fn(block=(1, 1, 1), grid=(1, 1), stream=self.stream)

    def spin(self, ms: float) -> bool:
        """Enqueue a one-thread kernel that keeps the default stream busy for ``ms`` milliseconds.

        Returns False (and enqueues nothing) when the spin kernel cannot be built here; batches then
        run at whatever rate the host enqueues them.
        """
        if self._spin_fn is None:  # no nvcc here, or an old PTX ISA: False, batches still work, less tightly
            self._spin_fn = self._build_internal(SPIN_SRC, "cudalab_spin")
        fn = self._spin_fn
        if fn is False:
            return False
        fn(np.uint64(max(0, int(ms * 1e6))), block=(1, 1, 1), grid=(1, 1))
        return True

    def time_ms(self, enqueue: Callable[[], None]) -> EventTime:
        """Time what ``enqueue`` puts on the default stream between two CUDA events.

        Whether the queue stayed ahead of the GPU is asked once ``enqueue`` returns: if the GPU has
        already passed the start event, it may have waited for the host's launch inside the window.
        """
        start, end = self.drv.Event(), self.drv.Event()
        start.record()
        enqueue()
        ahead = not start.query()
        end.record()
        try:
            end.synchronize()
        except self.drv.Error as exc:
            raise GpuError(f"the GPU reported an error: {exc}") from None
        heartbeat.beat()
        return EventTime(end.time_since(start), ahead)
