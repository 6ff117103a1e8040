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

KERNEL_MS = 0.003     # 3 µs: the row kernel's own span (what CUPTI would say)
LAUNCH_MS = 0.004     # what one launch between two events costs on top (launch overhead)
FLUSH_MS = 0.030
EMPTY_MS = 0.0006     # the empty kernel's own span
GAP_MS = 0.00005      # between two nodes of a graph: the residue every CUPTI-free design keeps
EVENT_MS = 0.0011     # an event node and the launch behind it, beyond the kernel's span
WRITEBACK_MS = 0.002  # what the flush after the row kernel pays for the lines the kernel dirtied
REPLAY_MS = 0.003     # a replay's own start behind an event, whatever its nodes


class FakeGraph:
    """Nodes replayed on the fake GPU's clock: a kernel (its span), a flush (longer after the row kernel: the
    write-back), an event mark (stamped; the launch after it costs EVENT_MS), GAP_MS between any two nodes."""

    def __init__(self, dev, ops):
        self.dev, self.ops, self.closed = dev, ops, False

    def launch(self):
        assert not self.closed
        self.dev.replays += 1
        self.dev.gpu_ms += REPLAY_MS
        for i, op in enumerate(self.ops):
            self.dev.gpu_ms += GAP_MS if i else 0.0
            self.dev.run_op(op, in_graph=True)

    def close(self):
        self.closed = True


class FakeMarks:
    def __init__(self, dev, count):
        self.dev, self.stamps, self.closed = dev, [None] * count, False

    def record(self, i):
        self.dev._enqueue(("mark", self, i))

    def windows_ms(self):
        return [b - a for a, b in zip(self.stamps[0::2], self.stamps[1::2])]

    def close(self):
        self.closed = True


class FakeGpu:
    """Time is what was enqueued; a launch outside a graph costs LAUNCH_MS more; ``refuse``: capture fails;
    ``marks=False``: no event nodes (the windows cannot be made)."""

    def __init__(self, refuse: str = "", marks: bool = True):
        self.gpu_ms = 0.0
        self.recording: list | None = None
        self.refuse = refuse
        self.replays = 0
        self.graphs: list[FakeGraph] = []
        self.made_marks: list[FakeMarks] = []
        self.dirty = False
        if marks:
            self.marks = self._marks
            self.empty_kernel = lambda: self._enqueue(("kernel", EMPTY_MS, False))

    def _marks(self, count):
        self.made_marks.append(FakeMarks(self, count))
        return self.made_marks[-1]

    def run_op(self, op, in_graph):
        kind = op[0]
        if kind == "kernel":
            self.gpu_ms += op[1] + (0.0 if in_graph else LAUNCH_MS)
            self.dirty = self.dirty or op[2]
        elif kind == "flush":
            self.gpu_ms += FLUSH_MS + (WRITEBACK_MS if self.dirty else 0.0)
            self.dirty = False
        elif kind == "mark":
            _, marks, i = op
            if i % 2:
                marks.stamps[i] = self.gpu_ms
            else:
                marks.stamps[i] = self.gpu_ms
                self.gpu_ms += EVENT_MS
        else:
            self.gpu_ms += op[1]

    def _enqueue(self, op):
        if self.recording is not None:
            self.recording.append(op)
        else:
            self.run_op(op, in_graph=False)

    def kernel(self):
        self._enqueue(("kernel", KERNEL_MS, True))

    def flush_l2(self):
        self._enqueue(("flush",))

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
GRAPH = Protocol(**{**PROTO.__dict__, "launch": "graph"})
HOT = Protocol(**{**GRAPH.__dict__, "flush_l2": False})


def test_cold_windows_read_the_kernels_span_not_the_flush_nor_its_write_back():
    """Cold: the row's window less the empty kernel's, plus the empty kernel's hot time = span + one graph gap;
    the flush (and the write-back of the row's dirty lines inside it) lies outside every window."""
    dev = FakeGpu()
    t = time_case(dev, Case(run=dev.kernel, result=lambda: None), GRAPH)
    assert t.method == "graph" and t.batch > 1 and t.note == ""
    assert t.stats.median == pytest.approx(KERNEL_MS + GAP_MS)
    assert t.empty_ms == pytest.approx(EMPTY_MS + GAP_MS)    # the empty kernel's span and the gap, put back
    assert t.single_ms == pytest.approx(KERNEL_MS + LAUNCH_MS)
    extra = t.extra()
    assert extra["timed_by"] == "graph" and extra["graph_empty_ms"] == pytest.approx(EMPTY_MS + GAP_MS)
    assert len(t.spans) == t.stats.n and all(g.closed for g in dev.graphs) and all(m.closed for m in dev.made_marks)
    row = next(g for g in dev.graphs if ("kernel", KERNEL_MS, True) in g.ops)
    assert [op[0] for op in row.ops[:4]] == ["flush", "mark", "kernel", "mark"]   # a flush before every launch
    assert len(row.ops) == 4 * t.batch


def test_the_old_design_would_have_kept_the_write_back():
    """What the windows avoid: a graph of (flush, kernel) less one of flushes reads the write-back as the kernel's."""
    dev = FakeGpu()
    n = 10
    both = dev.capture(lambda: [f() for _ in range(n) for f in (dev.flush_l2, dev.kernel)])
    flushes = dev.capture(lambda: [dev.flush_l2() for _ in range(n)])
    old = (dev.time_ms(both.launch).ms - dev.time_ms(flushes.launch).ms) / n
    assert old > KERNEL_MS + WRITEBACK_MS / 2


def test_a_hot_row_that_can_repeat_is_a_plain_replay():
    dev = FakeGpu()
    t = time_case(dev, Case(run=dev.kernel, result=lambda: None), HOT)
    assert t.method == "graph" and t.empty_ms == 0.0 and t.stats.median == pytest.approx(KERNEL_MS + GAP_MS)
    assert [len(g.ops) for g in dev.graphs] == [t.batch, 2 * t.batch] and not dev.made_marks
    assert {op[0] for g in dev.graphs for op in g.ops} == {"kernel"}


@pytest.mark.parametrize("proto", [GRAPH, HOT])
def test_a_row_reset_before_each_launch_is_graphed_with_its_reset_outside_the_windows(proto):
    """An in-place reduction: each launch after its own reset (a long copy), hot or cold; the windows hold the
    launch alone. Two launches a run (a two-pass row) read as one window: both spans and the gap between."""
    dev = FakeGpu()
    state = {"fresh": False}

    def reset():
        state["fresh"] = True
        dev._enqueue(("copy", 0.02))

    def run():
        dev.kernel()
        dev.kernel()

    t = time_case(dev, Case(run=run, result=lambda: None, reset=reset), proto)
    assert t.method == "graph" and t.note == ""
    assert t.stats.median == pytest.approx(2 * KERNEL_MS + 2 * GAP_MS)
    row = next(g for g in dev.graphs if ("kernel", KERNEL_MS, True) in g.ops)
    assert [op[0] for op in row.ops[:3]] == (["copy", "flush", "mark"] if proto.flush_l2 else ["copy", "mark", "kernel"])


def test_without_event_nodes_a_cold_row_is_not_graphed_and_says_why():
    dev = FakeGpu(marks=False)
    t = time_case(dev, Case(run=dev.kernel, result=lambda: None), GRAPH)
    assert t.method == "batch" and "cannot put event nodes in a graph" in t.note


def test_a_case_the_capture_refuses_is_timed_by_events_and_says_why():
    dev = FakeGpu(refuse="cuStreamEndCapture failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
    t = time_case(dev, Case(run=dev.kernel, result=lambda: None), Protocol(**{**PROTO.__dict__, "launch": "graph"}))
    assert t.method == "batch" and "graph capture failed" in t.note and "INVALIDATED" in t.note
    assert t.extra()["timed_by_note"] == t.note


def test_events_never_batch_and_auto_without_cupti_is_the_graph(monkeypatch):
    monkeypatch.setenv("CUDALAB_NO_CUPTI", "1")
    dev = FakeGpu()
    case = Case(run=dev.kernel, result=lambda: None)
    t = time_case(dev, case, Protocol(**{**PROTO.__dict__, "launch": "events"}))
    assert t.method == "events" and t.batch == 1 and t.stats.median == pytest.approx(KERNEL_MS + LAUNCH_MS)
    t = time_case(dev, case, PROTO)
    assert t.method == "graph" and t.batch > 1 and t.note == ""   # the designed fallback: no note on every row
    assert t.stats.median == pytest.approx(KERNEL_MS + GAP_MS)


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
    assert "timed by graph ×N" in head and "empty kernel taken out" in head
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
