"""Short kernels timed as a CUDA graph (``--launch graph``; ``--launch auto``'s method where cupti-python is missing).

The reference for a short kernel's duration is its own span on the GPU as CUPTI's activity records give it
(:mod:`cudalab.worker.cupti_timing`). Without CUPTI no clock reads that span; what can be read is the time
between two points of a stream, and the work here is to make everything between them but the kernel cancel.

**Hot, a row that can repeat**: graphs of N and of 2N launches captured once and replayed between two events;
time per launch = (the 2N replay - the N replay) / N. Back-to-back kernel nodes of a graph follow each other at
the GPU's own pace (no host, no per-launch driver work between them), so each launch adds its span plus the
graph's node-to-node gap, the one thing left over; the difference takes out the replay's own start and the
events (a replay / N keeps a few microseconds / N in every launch).

**Cold (an L2 flush before each launch), or a row reset before each launch** (an in-place reduction): the flush
(or reset) cannot run between two launches without being timed with them, and the flush is 10x a short
kernel's length: timing it apart and taking its median out (this module's first design) strayed by more than
half the kernel's span on an H200 (issue 59): the flush that follows the kernel also writes back the lines the
kernel dirtied, and a flush behind a flush does not. So the launch itself is bracketed: each launch
sits between two event-record nodes of the graph ``[reset?, flush?, event, launch, event] x N``, and the same
graph with cudalab's empty kernel (one thread that returns) in place of the launch is replayed beside it. A
window (event to event) holds the launch's span plus what an event and a launch behind it cost the front end;
the empty kernel's window holds the same overhead plus the empty kernel's span, so
row window - empty window = the row's span - the empty kernel's span, and the write-back of what the row left
in L2 falls in the next flush, outside every window. The empty kernel's span is put back as the hot replay of
N empty kernels over N (its span plus the node-to-node gap: the same leftover as the hot replay's). A row whose
``run`` makes several launches (a two-pass reduction) is one window, its launches and the gaps between them
inside: CUPTI sums the spans alone.

Why not the alternatives: a graph of ``[flush, kernel] x N`` less one of ``[flush, empty kernel] x N`` cancels
the launch gaps but keeps the write-back of the kernel's dirty lines inside the flush that follows (its output
over the DRAM bandwidth: for a few MB, as long as the short kernel itself); ``%globaltimer`` read by
marker kernels around the launch measures the markers' own tails and heads as well and is no better than
event nodes, which need no kernel of ours in the row's stream. The residue of every CUPTI-free design is the
gap between graph nodes; ``cudalab truth`` and ``scripts/bench_truth.py`` measure it against CUPTI on the
same rows (``docs/timing.md``).

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

from cudalab.bench import Protocol, Stats, measure_spanned, summarize
from cudalab.errors import GpuError

#: ``CU_EVENT_RECORD_EXTERNAL``: an event recorded inside a capture becomes an event-record node of the graph (the
#: default only orders the capture's streams), so each replay stamps it.
RECORD_EXTERNAL = 1
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


def _driver() -> _Driver:
    """The process's one :class:`_Driver` (libcuda loaded once)."""
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = _Driver()
    return _DRIVER


class EventMarks:
    """``count`` CUDA events that a capture records as event-record nodes (:data:`RECORD_EXTERNAL`); after each
    replay, :meth:`windows_ms` reads the times between marks 0-1, 2-3, ... (the driver API's, through ctypes).

    Raises:
        GpuError: the driver could not create an event.
    """

    def __init__(self, count: int, stream: Callable[[], int]):
        self._drv, self._stream = _driver(), stream
        self._events: list[ctypes.c_void_p] = []
        for _ in range(count):
            ev = ctypes.c_void_p()
            self._drv.check(self._drv.cu.cuEventCreate(ctypes.byref(ev), ctypes.c_uint(0)), "cuEventCreate")
            self._events.append(ev)

    def record(self, i: int) -> None:
        """Record mark ``i`` on the stream being captured (an event-record node of the graph)."""
        self._drv.check(self._drv.cu.cuEventRecordWithFlags(self._events[i], ctypes.c_void_p(self._stream()),
                                                             ctypes.c_uint(RECORD_EXTERNAL)), "cuEventRecordWithFlags")

    def windows_ms(self) -> list[float]:
        """The last replay's time (ms) from mark 2i to mark 2i+1, for each i (the caller synchronised)."""
        out = []
        for a, b in zip(self._events[0::2], self._events[1::2]):
            ms = ctypes.c_float()
            self._drv.check(self._drv.cu.cuEventElapsedTime(ctypes.byref(ms), a, b), "cuEventElapsedTime")
            out.append(float(ms.value))
        return out

    def close(self) -> None:
        """Destroy the events (safe twice)."""
        for ev in self._events:
            self._drv.cu.cuEventDestroy_v2(ev)
        self._events = []


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
    drv = _driver()
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
        stats: time per launch (ms).
        stop: why sampling stopped (:func:`cudalab.bench.stop_reason`).
        spans: the host clock's (start, end) around each counted sample (telemetry judges them).
        empty_ms: the windows' design (cold, or a row reset before each launch): the empty kernel's hot time per
            launch that was put back (its span plus the node-to-node gap); 0 for a plain replay.
    """

    stats: Stats
    stop: str
    spans: tuple[tuple[float, float], ...]
    empty_ms: float = 0.0


def needs_windows(case: Any, proto: Protocol) -> bool:
    """Whether a sample needs each launch between two event nodes: cold (a flush before each launch), or a row
    reset before each launch; a hot row that can repeat is a plain replay."""
    return bool(proto.flush_l2) or not case.can_repeat


def graph_samples(dev: Any, case: Any, proto: Protocol, n: int, on_sample: Callable[[], None] = lambda: None,
                  clock: Callable[[], float] = time.perf_counter) -> GraphTiming:
    """Sample ``case`` as graphs of ``n`` launches: windows (:func:`window_samples`) cold or for a row reset before
    each launch; else the replay of ``n`` launches between two events, over ``n``.

    ``dev`` has ``capture(enqueue) -> Graph``, ``time_ms(enqueue) -> EventTime``, ``flush_l2()``, optionally
    ``spin(ms)``; for windows also ``marks(count)``, ``empty_kernel()`` and ``synchronize()``.

    Raises:
        GpuError: the case cannot be captured (the caller times it by events).
    """
    if needs_windows(case, proto):
        return window_samples(dev, case, proto, n, on_sample, clock)
    case.reset()
    pair = Pair(dev, case.run, n)
    try:
        got, spans = measure_spanned(pair.per_launch_ms, proto, clock, on_sample)
    finally:
        pair.close()
    return GraphTiming(got.stats, got.stop, spans)


class Pair:
    """Graphs of ``n`` and of ``2n`` back-to-back launches of ``launch``: one replay of each between two events,
    the difference over ``n`` is a launch's time in a graph (its span and one node-to-node gap). The difference
    takes out what a replay costs besides its nodes (the event, the graph's own start: microseconds, which over
    ``n`` alone would stay in each launch)."""

    def __init__(self, dev: Any, launch: Callable[[], None], n: int):
        self.dev, self.n = dev, n
        self.graphs = [dev.capture(lambda: [launch() for _ in range(n)])]
        try:
            self.graphs.append(dev.capture(lambda: [launch() for _ in range(2 * n)]))
        except BaseException:
            self.close()
            raise

    def per_launch_ms(self) -> float:
        """One replay of each (ms): (the 2n graph - the n graph) / n."""
        one, two = (_replay_ms(self.dev, g) for g in self.graphs)
        return (two - one) / self.n

    def close(self) -> None:
        """Free both graphs."""
        for g in self.graphs:
            g.close()


def _replay_ms(dev: Any, graph: Any) -> float:
    """One replay of ``graph`` between two events (ms), behind a short spin (one host call to enqueue)."""
    spin = getattr(dev, "spin", None)
    if spin is not None:
        spin(0.05)
    return float(dev.time_ms(graph.launch).ms)


def window_samples(dev: Any, case: Any, proto: Protocol, n: int, on_sample: Callable[[], None] = lambda: None,
                   clock: Callable[[], float] = time.perf_counter) -> GraphTiming:
    """Sample ``case`` as ``[reset?, flush?, mark, launch, mark] x n`` beside the same graph of the empty kernel:
    each sample = mean row window - mean empty window + the empty kernel's hot time per launch in a graph (the
    median over the samples of :class:`Pair`'s, interleaved with them).

    Raises:
        GpuError: a graph or an event the driver refused (the caller times the row another way).
    """
    cold, fresh = proto.flush_l2, not case.can_repeat
    dev.empty_kernel()   # built and loaded outside the captures (nothing is loaded inside one)
    held: list[Any] = []

    def body(launch: Callable[[], None], marks: Any) -> Callable[[], None]:
        def enqueue() -> None:
            for i in range(n):
                if fresh:
                    case.reset()   # before the flush: what the reset leaves in L2 is flushed too
                if cold:
                    dev.flush_l2()
                marks.record(2 * i)
                launch()
                marks.record(2 * i + 1)
        return enqueue

    try:
        row_marks = dev.marks(2 * n)
        held.append(row_marks)
        empty_marks = dev.marks(2 * n)
        held.append(empty_marks)
        case.reset()
        row = dev.capture(body(case.run, row_marks))
        held.append(row)
        empty = dev.capture(body(dev.empty_kernel, empty_marks))
        held.append(empty)
        base = Pair(dev, dev.empty_kernel, n)
        held.append(base)
        bases: list[float] = []
        diffs: list[float] = []

        def windows(graph: Any, marks: Any) -> float:
            graph.launch()
            dev.synchronize()
            return float(np.mean(marks.windows_ms()))

        def sample() -> float:
            bases.append(base.per_launch_ms())
            diff = windows(row, row_marks) - windows(empty, empty_marks)
            diffs.append(diff)
            return diff + float(np.median(bases))

        got, spans = measure_spanned(sample, proto, clock, on_sample, lambda: (bases.clear(), diffs.clear()))
    finally:
        for h in reversed(held):
            h.close()
    empty_ms = float(np.median(bases))
    return GraphTiming(summarize([d + empty_ms for d in diffs]), got.stop, spans, empty_ms)
