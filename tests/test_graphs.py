"""Graph timing (issue 46, item 1) on a fake GPU whose clock is the work enqueued: ``--launch graph`` captures the
N launches of a sample once, cold (a flush node before each, the flush's own graph taken out) or hot, falls back
to events where a case cannot be captured, and the table says which method timed each row."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cudalab import report
from cudalab.bench import Protocol, summarize
from cudalab.cli import cli
from cudalab.errors import GpuError
from cudalab.families.model import Case
from cudalab.records.results import PASSED, Result
from cudalab.worker.gpu import EventTime
from cudalab.worker.graphs import graph_samples
from cudalab.worker.sampling import time_case

KERNEL_MS = 0.003     # 3 µs of GPU time a launch
LAUNCH_MS = 0.004     # what one launch between two events costs on top (launch overhead)
FLUSH_MS = 0.030


class FakeGraph:
    def __init__(self, dev, ops):
        self.dev, self.ops, self.closed = dev, ops, False

    def launch(self):
        assert not self.closed
        self.dev.gpu_ms += sum(self.ops)   # a graph's nodes run back to back: no launch overhead
        self.dev.replays += 1

    def close(self):
        self.closed = True


class FakeGpu:
    """Time is what was enqueued; a launch outside a graph costs LAUNCH_MS more; ``refuse``: capture fails."""

    def __init__(self, refuse: str = ""):
        self.gpu_ms = 0.0
        self.recording: list[float] | None = None
        self.refuse = refuse
        self.replays = 0
        self.graphs: list[FakeGraph] = []

    def _enqueue(self, ms, overhead):
        if self.recording is not None:
            self.recording.append(ms)
        else:
            self.gpu_ms += ms + overhead

    def kernel(self):
        self._enqueue(KERNEL_MS, LAUNCH_MS)

    def flush_l2(self):
        self._enqueue(FLUSH_MS, 0.0)

    def capture(self, enqueue):
        self.recording = []
        try:
            enqueue()
            if self.refuse:
                raise GpuError(self.refuse)
            g = FakeGraph(self, self.recording)
        finally:
            self.recording = None
        self.graphs.append(g)
        return g

    def time_ms(self, enqueue):
        t0 = self.gpu_ms
        enqueue()
        return EventTime(self.gpu_ms - t0, True)

    def synchronize(self):
        pass


PROTO = Protocol(warmup=1, min_samples=5, max_samples=8, budget_s=10.0)


def test_a_cold_graph_takes_the_flush_out_and_removes_the_launch_overhead():
    dev = FakeGpu()
    case = Case(run=dev.kernel, result=lambda: None)
    t = time_case(dev, case, PROTO.__class__(**{**PROTO.__dict__, "launch": "graph"}))
    assert t.method == "graph" and t.batch > 1
    assert t.stats.median == pytest.approx(KERNEL_MS)             # the kernel's own time, flush taken out
    assert t.single_ms == pytest.approx(KERNEL_MS + LAUNCH_MS)    # one launch between two events
    assert t.flush_ms == pytest.approx(FLUSH_MS)
    extra = t.extra()
    assert extra["timed_by"] == "graph" and extra["launch_overhead_us"] == pytest.approx(LAUNCH_MS * 1e3)
    assert len(t.spans) == t.stats.n and all(g.closed for g in dev.graphs)
    work = max(dev.graphs, key=lambda g: sum(g.ops))
    assert work.ops == [FLUSH_MS, KERNEL_MS] * t.batch             # a flush node before every launch


def test_a_hot_graph_has_no_flush_nodes():
    dev = FakeGpu()
    proto = Protocol(**{**PROTO.__dict__, "launch": "graph", "flush_l2": False})
    t = time_case(dev, Case(run=dev.kernel, result=lambda: None), proto)
    assert t.method == "graph" and t.flush_ms == 0.0 and t.stats.median == pytest.approx(KERNEL_MS)
    assert len(dev.graphs) == 1 and set(dev.graphs[0].ops) == {KERNEL_MS}


def test_the_flush_is_timed_interleaved_and_its_median_taken_out():
    dev = FakeGpu()
    flushes = iter([FLUSH_MS, FLUSH_MS * 3, FLUSH_MS] * 50)   # one slow flush graph in three

    class Noisy(FakeGpu):
        def flush_l2(self):
            self._enqueue(next(flushes), 0.0) if self.recording is None else self.recording.append("F")

    dev = Noisy()

    def replay(graph):
        dev.gpu_ms += sum(next(flushes) if op == "F" else op for op in graph.ops)

    FakeGraph.launch_orig = FakeGraph.launch
    try:
        FakeGraph.launch = lambda self: replay(self)
        g = graph_samples(dev, Case(run=dev.kernel, result=lambda: None), Protocol(warmup=0, min_samples=6,
                          max_samples=6, budget_s=10), n=1)
    finally:
        FakeGraph.launch = FakeGraph.launch_orig
    assert g.flush_ms == pytest.approx(FLUSH_MS)   # the median of the flush graphs, not their mean
    assert g.stats.n == 6


def test_a_case_the_capture_refuses_is_timed_by_events_and_says_why():
    dev = FakeGpu(refuse="cuStreamEndCapture failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
    t = time_case(dev, Case(run=dev.kernel, result=lambda: None), Protocol(**{**PROTO.__dict__, "launch": "graph"}))
    assert t.method == "batch" and "graph capture failed" in t.note and "INVALIDATED" in t.note
    assert t.extra()["timed_by_note"] == t.note


def test_a_case_that_cannot_repeat_is_not_graphed():
    dev = FakeGpu()
    case = Case(run=dev.kernel, result=lambda: None, reset=lambda: None)   # a reset: not repeatable
    t = time_case(dev, case, Protocol(**{**PROTO.__dict__, "launch": "graph"}))
    assert t.method == "events" and dev.graphs == [] and "cannot be replayed as a graph" in t.note


def test_events_never_batch_and_auto_batches():
    dev = FakeGpu()
    case = Case(run=dev.kernel, result=lambda: None)
    t = time_case(dev, case, Protocol(**{**PROTO.__dict__, "launch": "events"}))
    assert t.method == "events" and t.batch == 1 and t.stats.median == pytest.approx(KERNEL_MS + LAUNCH_MS)
    t = time_case(dev, case, PROTO)
    assert t.method == "batch" and t.batch > 1 and dev.graphs == []


def test_the_table_names_the_method_and_the_overhead_removed():
    rows = [Result("g", "kernel", PASSED, stats=summarize([0.003] * 3), max_error=0.0,
                   extra={"timed_by": "graph", "batch": 67, "launch_overhead_us": 4.0, "single_launch_ms": 0.007}),
            Result("e", "kernel", PASSED, stats=summarize([0.3] * 3), max_error=0.0, extra={"timed_by": "events"})]
    con = report.console()
    with con.capture() as cap:
        con.print(report.results_table(rows, "none", wide=False))
    out = cap.get()
    assert "timed by" in out and "graph ×67 −4.00 µs" in out and "events" in out
    head = "\n".join(report.header_lines(None, "t", "p", Protocol(launch="graph"), None, rows))
    assert "timed by graph ×N" in head and "flush timed alone" in head
    with con.capture() as cap:
        con.print(report.results_table(rows[1:], "none", wide=False))
    assert "timed by" not in cap.get()   # every row one launch per event pair: no column


def test_launch_reaches_the_protocol(tmp_path):
    from test_telemetry import FakeGpu as CliGpu  # noqa: F401  (the CLI's fake GPU has no capture)

    from cudalab import catalog
    from cudalab.cli.options import requests_from
    from cudalab.families import load

    spec = catalog.family("copy")
    fam = load(spec.module)
    reqs = requests_from(spec, fam, {"launch": "graph", "n": "64", "budget": 0.5, "min_samples": 10})
    assert reqs[0].protocol.launch == "graph"
    res = CliRunner().invoke(cli, ["copy", "--launch", "graphs"])
    assert res.exit_code == 2 and "Invalid value for '--launch'" in res.output
