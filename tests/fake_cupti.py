"""A stand-in for NVIDIA's ``cupti-python`` (``from cupti import cupti``) and a GPU it watches: the calls
:mod:`cudalab.worker.cupti_timing` makes, with records made the way CUPTI makes them.

:class:`CuptiGpu` is both the device the timing code drives (``flush_l2``, ``spin``, ``synchronize``,
``time_ms``, and ``kernel``/``memset`` for a case's ``run``) and the ``cupti`` module. Every launch is an API
call: a ``DRIVER`` record (host start/end on CUPTI's clock, a fresh correlation id) and an operation queued on
the GPU; ``synchronize`` runs the queue in order, each operation a record (``CONCURRENT_KERNEL`` or
``MEMSET``) with its GPU start and end and the call's correlation id; ``activity_flush_all`` hands the records of
the enabled kinds to the buffer-completed callback. A kernel made with ``cold_ns`` lasts that long when the
operation before it on the GPU was an L2 flush, ``ns`` otherwise: a cold-L2 kernel that reads from DRAM.
"""

from __future__ import annotations

import enum
import sys
import types
from types import SimpleNamespace
from typing import Any, Callable

from cudalab.errors import GpuError
from cudalab.worker.gpu import EventTime

#: One API call's host time (ns on CUPTI's clock); a CUPTI timestamp read costs 1 ns.
API_NS = 1_000
#: What one launch between two CUDA events adds on a real GPU (launch overhead, the events' resolution).
EVENT_OVERHEAD_NS = 4_000
FLUSH_NS = 30_000
#: The GPU's idle time between two activities: inside a pair of events, in no activity's own duration.
GAP_NS = 500


class ActivityKind(enum.IntEnum):
    MEMCPY = 1
    MEMSET = 2
    KERNEL = 3
    DRIVER = 4
    RUNTIME = 5
    CONCURRENT_KERNEL = 10


class Result(enum.IntEnum):
    SUCCESS = 0
    ERROR_NOT_INITIALIZED = 15
    ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39


class cuptiError(Exception):  # noqa: N801  (cupti-python's own name)
    def __init__(self, status: int):
        super().__init__(f"CUPTI error {status}")
        self.status = status


class CuptiGpu:
    """A fake GPU and the ``cupti`` module that records it (see the module's docstring).

    Args:
        refuse: ``activity_enable`` raises cuptiError with this status (as when another tool holds CUPTI).
        silent: the GPU activities of these kinds are never recorded (a launch CUPTI does not see).
        late: the last GPU record of each synchronise is handed over by the flush after the next one only.
        flush_as_memset: the L2 flush is a memset (cudalab's fallback where its flush kernel cannot be built).
        graphs: the device has ``capture`` (CUDA graphs); without it, hot rows too are timed on the stream.
        refuse_capture: ``capture`` raises GpuError (a row a graph cannot hold).
    """

    ActivityKind = ActivityKind
    Result = Result
    cuptiError = cuptiError

    def __init__(self, refuse: int | None = None, silent: tuple[str, ...] = (), late: bool = False,
                 flush_as_memset: bool = False, graphs: bool = False, refuse_capture: bool = False):
        self.refuse, self.silent, self.late, self.flush_as_memset = refuse, silent, late, flush_as_memset
        self.refuse_capture = refuse_capture
        self.capturing: list[tuple[str, int, int | None, str]] | None = None
        self.replays = 0
        if graphs:
            self.capture = self._capture
        self.host_ns = 1_000_000
        self.gpu_ns = 0
        self.corr = 0
        self.queue: list[tuple[int, str, int, int | None, str]] = []   # (correlation id, kind, ns, cold ns, name)
        self.pending: list[SimpleNamespace] = []
        self.held: list[SimpleNamespace] = []
        self.last_op = ""
        self.enabled: set[int] = set()
        self.callbacks: tuple[Callable, Callable] | None = None
        self.calls: list[str] = []     # the cupti calls, in order
        self.flushes = self.spins = self.kernels = 0

    # --- the GPU ----------------------------------------------------------------------------------------
    def _api(self, kind: str, ns: int, cold_ns: int | None = None, name: str = "", graph_ns: int | None = None) -> None:
        if self.capturing is not None:   # a launch inside a capture: an API record, the work is the graph's
            self.capturing.append((kind, ns if graph_ns is None else graph_ns, cold_ns, name))
            kind = ""
        self.corr += 1
        start = self.host_ns
        self.host_ns += API_NS
        if int(ActivityKind.DRIVER) in self.enabled:
            self.pending.append(SimpleNamespace(kind=ActivityKind.DRIVER, start=start, end=self.host_ns,
                                                correlation_id=self.corr, cbid=0))
        if kind:
            self.queue.append((self.corr, kind, ns, cold_ns, name))

    def kernel(self, ns: int = 3_000, cold_ns: int | None = None, name: str = "case_kernel",
               graph_ns: int | None = None) -> None:
        """``graph_ns``: how long it lasts as a node of a graph replay, back to back with its neighbours."""
        self.kernels += 1
        self._api("CONCURRENT_KERNEL", ns, cold_ns, name, graph_ns)

    def _capture(self, enqueue: Callable[[], None]) -> "FakeGraph":
        """A graph of what ``enqueue`` launches; each replay is one API call whose activities share its id."""
        if self.refuse_capture:
            raise GpuError("the capture refused a call")
        self.capturing = []
        try:
            enqueue()
            return FakeGraph(self, self.capturing)
        finally:
            self.capturing = None

    def replay(self, ops: list[tuple[str, int, int | None, str]]) -> None:
        self.replays += 1
        self._api("", 0)
        self.queue += [(self.corr, kind, ns, cold_ns, name) for kind, ns, cold_ns, name in ops]

    def memset(self, ns: int = 700) -> None:
        self._api("MEMSET", ns)

    def flush_l2(self) -> None:
        self.flushes += 1
        if self.flush_as_memset:
            self._api("MEMSET", FLUSH_NS, name="flush")
        else:
            self._api("CONCURRENT_KERNEL", FLUSH_NS, name="cudalab_flush_read")

    def spin(self, ms: float) -> bool:
        self.spins += 1
        self._api("CONCURRENT_KERNEL", int(ms * 1e6), name="cudalab_spin")
        return True

    def synchronize(self) -> None:
        done = []
        for corr, kind, ns, cold_ns, name in self.queue:
            took = cold_ns if cold_ns is not None and self.last_op == "flush" else ns
            start = self.gpu_ns + GAP_NS
            self.gpu_ns = start + took
            self.last_op = "flush" if name in ("cudalab_flush_read", "flush") else name
            if int(ActivityKind[kind]) in self.enabled and kind not in self.silent:
                done.append(SimpleNamespace(kind=ActivityKind[kind], start=start, end=self.gpu_ns,
                                            correlation_id=corr, name=name))
        self.queue.clear()
        if self.late:   # the last record waits for the flush after the next one
            self.pending += done[:-1]
            self.held += done[-1:]
        else:
            self.pending += done

    def time_ms(self, enqueue: Callable[[], None]) -> EventTime:
        """Events around ``enqueue``: its operations' GPU time plus one launch's overhead."""
        self.synchronize()
        t0 = self.gpu_ns
        enqueue()
        self.synchronize()
        return EventTime((self.gpu_ns - t0 + EVENT_OVERHEAD_NS) / 1e6, True)

    # --- the cupti module ---------------------------------------------------------------------------------
    def activity_register_callbacks(self, requested: Callable, completed: Callable) -> None:
        self.calls.append("register")
        size, most = requested()
        assert size > 0 and most == 0
        self.callbacks = (requested, completed)

    def activity_enable(self, kind: int) -> None:
        self.calls.append(f"enable {ActivityKind(kind).name}")
        if self.refuse is not None:
            raise cuptiError(self.refuse)
        self.enabled.add(int(kind))

    def activity_disable(self, kind: int) -> None:
        self.calls.append(f"disable {ActivityKind(kind).name}")
        self.enabled.discard(int(kind))

    def activity_flush_all(self, flag: int) -> None:
        self.calls.append(f"flush {flag}")
        out, self.pending, self.held = self.pending, self.held, []   # what was held back: the next flush
        if self.callbacks is not None and out:
            self.callbacks[1](out)

    def get_timestamp(self) -> int:
        self.host_ns += 1
        return self.host_ns

    def finalize(self) -> None:
        self.calls.append("finalize")
        self.callbacks = None


class FakeGraph:
    def __init__(self, gpu: CuptiGpu, ops: list[tuple[str, int, int | None, str]]):
        self.gpu, self.ops, self.closed = gpu, list(ops), False

    def launch(self) -> None:
        self.gpu.replay(self.ops)

    def close(self) -> None:
        self.closed = True


def install(monkeypatch: Any, gpu: CuptiGpu | None) -> None:
    """Make ``from cupti import cupti`` give ``gpu`` (None: cupti-python is not installed)."""
    if gpu is None:
        monkeypatch.setitem(sys.modules, "cupti", None)   # the import system's "not installed"
        return
    pkg = types.ModuleType("cupti")
    pkg.cupti = gpu  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupti", pkg)
    monkeypatch.setitem(sys.modules, "cupti.cupti", gpu)
