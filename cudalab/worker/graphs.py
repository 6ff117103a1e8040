"""Short kernels timed as a CUDA graph: the N launches of a sample captured once and replayed (``--launch graph``).

A batch of N launches enqueued from Python runs at the GPU's pace only behind a spin kernel, and each launch
still pays the driver's per-launch work on the GPU side (a few hundred ns between back-to-back kernels). A graph
replays N kernel nodes from one host call: the gaps between them are the GPU's own. Cold (the default) puts an
L2 flush node before every launch, so each launch starts from a cold L2, not only the first of a batch; the flush
is timed alone the same way (a graph of N flushes, interleaved with the samples) and its median taken out:
time per launch = (graph of N (flush, launch) - median graph of N flushes) / N. ``--hot`` captures the N
launches alone.

pycuda (2026.1) has no graph API: the capture, instantiation and launch are the driver API's, through ctypes on
``libcuda`` (as :mod:`cudalab.worker.warm` does), on a stream of pycuda's whose launches the device routes there
while it captures (:meth:`cudalab.worker.gpu.Device.capture`). A case whose ``run`` cannot be captured (a library
call, a copy on the legacy stream, a synchronisation) is timed by events and its row says why.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from cudalab.bench import Protocol, Stats, measure_until, summarize
from cudalab.errors import GpuError

#: ``CU_STREAM_CAPTURE_MODE_THREAD_LOCAL``: a call of this thread that is not safe while capturing fails the
#: capture (a case that does one is timed by events instead) without touching another thread's work.
THREAD_LOCAL = 1


class _Driver:
    """The few driver-API entry points a graph needs (ctypes on libcuda; the context is pycuda's, current)."""

    def __init__(self) -> None:
        try:
            self.cu = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise GpuError(f"CUDA graphs need libcuda.so.1: {exc}") from None

    def check(self, rc: int, what: str) -> None:
        """Raise GpuError naming the call and the driver's error name (rc != 0)."""
        if rc == 0:
            return
        name = ctypes.c_char_p()
        self.cu.cuGetErrorName(rc, ctypes.byref(name))
        raise GpuError(f"{what} failed: {(name.value or b'CUDA error %d' % rc).decode()}")

    def begin(self, stream: int) -> None:
        self.check(self.cu.cuStreamBeginCapture_v2(ctypes.c_void_p(stream), THREAD_LOCAL), "cuStreamBeginCapture")

    def end(self, stream: int) -> ctypes.c_void_p:
        graph = ctypes.c_void_p()
        self.check(self.cu.cuStreamEndCapture(ctypes.c_void_p(stream), ctypes.byref(graph)), "cuStreamEndCapture")
        return graph

    def instantiate(self, graph: ctypes.c_void_p) -> ctypes.c_void_p:
        exe = ctypes.c_void_p()
        self.check(self.cu.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, ctypes.c_ulonglong(0)),
                   "cuGraphInstantiate")
        return exe

    def launch(self, exe: ctypes.c_void_p, stream: int = 0) -> None:
        self.check(self.cu.cuGraphLaunch(exe, ctypes.c_void_p(stream)), "cuGraphLaunch")

    def destroy(self, graph: ctypes.c_void_p | None, exe: ctypes.c_void_p | None) -> None:
        if exe:
            self.cu.cuGraphExecDestroy(exe)
        if graph:
            self.cu.cuGraphDestroy(graph)


_DRIVER: _Driver | None = None


class Graph:
    """A captured, instantiated graph: :meth:`launch` replays it on the default stream (where the events are)."""

    def __init__(self, drv: _Driver, graph: ctypes.c_void_p, exe: ctypes.c_void_p):
        self._drv, self._graph, self._exe = drv, graph, exe

    def launch(self) -> None:
        """Enqueue one replay on the legacy default stream."""
        self._drv.launch(self._exe, 0)

    def close(self) -> None:
        """Free the graph (safe twice)."""
        self._drv.destroy(self._graph, self._exe)
        self._graph = self._exe = None


def capture(stream: int, enqueue: Callable[[], None]) -> Graph:
    """Capture what ``enqueue`` puts on ``stream`` (a pycuda stream's handle) into an instantiated graph.

    Raises:
        GpuError: the driver refused the capture (``enqueue`` did something a graph cannot hold) or has no graphs.
    """
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = _Driver()
    drv = _DRIVER
    drv.begin(stream)
    try:
        enqueue()
    except BaseException as exc:
        try:
            drv.destroy(drv.end(stream), None)
        except GpuError:
            pass
        if isinstance(exc, Exception) and not isinstance(exc, GpuError):  # pycuda's error for a refused call
            raise GpuError(f"the capture refused a call: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        raise
    graph = drv.end(stream)   # an unsafe call inside enqueue invalidated the capture: it fails here
    try:
        return Graph(drv, graph, drv.instantiate(graph))
    except GpuError:
        drv.destroy(graph, None)
        raise


# --- timing (pure over the device interface: tests pass a fake device) -----------------------------------

@dataclass(frozen=True)
class GraphTiming:
    """What :func:`graph_samples` measured.

    Attributes:
        stats: time per launch (ms), each sample's graph less the flushes' median, over ``n``.
        stop: why sampling stopped (:func:`cudalab.bench.stop_reason`).
        spans: the host clock's (start, end) around each counted sample (telemetry judges them).
        flush_ms: the flush's median per launch that was taken out (0: ``--hot``).
    """

    stats: Stats
    stop: str
    spans: tuple[tuple[float, float], ...]
    flush_ms: float


def graph_samples(dev: Any, case: Any, proto: Protocol, n: int, on_sample: Callable[[], None] = lambda: None,
                  clock: Callable[[], float] = time.perf_counter) -> GraphTiming:
    """Sample ``case`` as a graph of ``n`` launches, cold (a flush node before each; a graph of ``n`` flushes
    timed alone between samples and its median taken out) or hot (``proto.flush_l2`` False).

    ``dev`` has ``capture(enqueue) -> Graph``, ``time_ms(enqueue) -> EventTime``, ``flush_l2()`` and
    optionally ``spin(ms)``.

    Raises:
        GpuError: the case cannot be captured (the caller times it by events).
    """
    cold = proto.flush_l2

    def body() -> None:
        for _ in range(n):
            if cold:
                dev.flush_l2()
            case.run()

    case.reset()
    work = dev.capture(body)
    try:
        flushes = dev.capture(lambda: [dev.flush_l2() for _ in range(n)]) if cold else None
    except BaseException:
        work.close()
        raise
    spin = getattr(dev, "spin", None)
    alone: list[float] = []
    raw: list[float] = []
    spans: list[tuple[float, float]] = []

    def timed(graph: Graph) -> float:
        if spin is not None:
            spin(0.05)   # one host call to enqueue: a short spin keeps it ahead of the GPU
        return float(dev.time_ms(graph.launch).ms)

    def sample() -> float:
        t0 = clock()
        if flushes is not None:
            alone.append(timed(flushes))   # interleaved: the flush's drift is the sample's
        ms = timed(work)
        spans.append((t0, clock()))
        raw.append(ms)
        return (ms - (float(np.median(alone)) if alone else 0.0)) / n

    try:
        for _ in range(proto.warmup):
            sample()
        alone.clear()
        raw.clear()
        spans.clear()
        got = measure_until(sample, proto, clock, warmup=False, on_sample=on_sample)
    finally:
        work.close()
        if flushes is not None:
            flushes.close()
    flush_ms = float(np.median(alone)) if alone else 0.0
    per = [(ms - flush_ms) / n for ms in raw]   # every sample against the final median of the flushes
    return GraphTiming(summarize(per), got.stop, tuple(spans), flush_ms / n)
