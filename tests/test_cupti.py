"""CUPTI timing (issue 46, ``--launch cupti``) on a fake GPU and a fake ``cupti`` module (tests/fake_cupti.py): each
launch's own activity records, the flushes and the spin left out, cold with a flush before every launch or hot;
every reason CUPTI cannot time a row is a note and a batch (or events), never a lost row; cupti-python is imported
only when asked; the command line, the run table and ``cudalab truth``'s tables name the method."""

from __future__ import annotations

import importlib.abc
import subprocess
import sys

import pytest
from click.testing import CliRunner

import cudalab.worker as worker_pkg
from cudalab import report
from cudalab.bench import LAUNCH_METHODS, Protocol, summarize
from cudalab.cli import cli
from cudalab.errors import GpuError
from cudalab.families.model import Case
from cudalab.records.results import PASSED, Result
from cudalab.worker import cupti_timing
from cudalab.worker.sampling import time_case

from fake_cupti import EVENT_OVERHEAD_NS, GAP_NS, CuptiGpu, install

PROTO = Protocol(warmup=1, min_samples=5, max_samples=8, budget_s=10.0, launch="cupti")
HOT = Protocol(**{**PROTO.__dict__, "flush_l2": False})


def gpu_with(monkeypatch, **kw) -> CuptiGpu:
    gpu = CuptiGpu(**kw)
    install(monkeypatch, gpu)
    return gpu


# --- the arithmetic ----------------------------------------------------------------------------------------

def test_cold_each_launch_is_timed_cold_by_its_own_records_without_the_flushes_and_the_spin(monkeypatch):
    gpu = gpu_with(monkeypatch)
    case = Case(run=lambda: gpu.kernel(ns=3_000, cold_ns=5_000), result=lambda: None)
    t = time_case(gpu, case, PROTO)
    assert t.method == "cupti" and t.note == "" and t.batch > 1
    # every launch followed a flush: each sample is exactly the cold kernel, nothing of the 30 µs flushes or the spin
    assert t.stats.samples == pytest.approx([0.005] * t.stats.n)
    # the events' probe: the launch's overhead and the GPU's gap before it are inside
    assert t.single_ms == pytest.approx((5_000 + GAP_NS + EVENT_OVERHEAD_NS) / 1e6)
    assert t.spin and len(t.spans) == t.stats.n
    ex = t.extra()
    assert ex["timed_by"] == "cupti" and ex["batch"] == t.batch and "timed_by_note" not in ex
    # a flush before every launch of every sample (warm-up included), not one a sample
    cupti_launches = t.batch * (t.stats.n + PROTO.warmup)
    assert gpu.flushes >= cupti_launches and t.launches == gpu.kernels
    # CUPTI attached for the row only: every kind enabled was disabled, then finalized
    assert gpu.calls[0] == "register" and gpu.calls[-1] == "finalize" and gpu.enabled == set()
    assert {c for c in gpu.calls if c.startswith("enable")} == {f"enable {k}" for k in cupti_timing.API_KINDS
                                                                + cupti_timing.WORK_KINDS}


def test_the_batch_reads_a_warm_l2_where_cupti_reads_each_launch_cold(monkeypatch):
    """The claim behind the method: one flush a batch leaves launches 2..N warm; a flush before each does not."""
    gpu = gpu_with(monkeypatch)
    case = Case(run=lambda: gpu.kernel(ns=3_000, cold_ns=5_000), result=lambda: None)
    batch = time_case(gpu, case, Protocol(**{**PROTO.__dict__, "launch": "batch"}))
    cupti = time_case(gpu, case, PROTO)
    assert batch.method == "batch" and batch.stats.median < 0.004 < cupti.stats.median == pytest.approx(0.005)


def test_hot_no_flush_and_each_launch_warm(monkeypatch):
    gpu = gpu_with(monkeypatch)
    t = time_case(gpu, Case(run=lambda: gpu.kernel(ns=3_000, cold_ns=5_000), result=lambda: None), HOT)
    assert t.method == "cupti" and t.stats.median == pytest.approx(0.003) and gpu.flushes == 0


def test_a_runs_kernels_and_memsets_are_summed(monkeypatch):
    gpu = gpu_with(monkeypatch)

    def run():
        gpu.kernel(ns=2_000, name="first")
        gpu.kernel(ns=1_500, name="second")
        gpu.memset(ns=700)

    t = time_case(gpu, Case(run=run, result=lambda: None), PROTO)
    assert t.method == "cupti" and t.stats.samples == pytest.approx([0.0042] * t.stats.n)


def test_a_flush_that_is_a_memset_is_still_not_the_rows(monkeypatch):
    """Told apart by correlation ids, not names: cudalab's flush falls back to a memset where its kernel cannot be
    built, and a row's own memset must count while the flush's must not."""
    gpu = gpu_with(monkeypatch, flush_as_memset=True)

    def run():
        gpu.memset(ns=700)
        gpu.kernel(ns=2_000)

    t = time_case(gpu, Case(run=run, result=lambda: None), PROTO)
    assert t.method == "cupti" and t.stats.median == pytest.approx(0.0027)


def test_a_record_handed_over_late_is_waited_for_once(monkeypatch):
    gpu = gpu_with(monkeypatch, late=True)
    t = time_case(gpu, Case(run=lambda: gpu.kernel(ns=3_000), result=lambda: None), PROTO)
    assert t.method == "cupti" and t.note == "" and t.stats.median == pytest.approx(0.003)


def test_a_long_kernel_is_timed_by_cupti_one_launch_a_sample(monkeypatch):
    gpu = gpu_with(monkeypatch)
    t = time_case(gpu, Case(run=lambda: gpu.kernel(ns=50_000), result=lambda: None), PROTO)
    assert t.method == "cupti" and t.batch == 1 and t.stats.median == pytest.approx(0.05)


def test_per_launch_counts_only_calls_inside_a_bracket():
    marks = [(100, 200), (300, 400)]
    api = [(50, 90, 1), (110, 150, 2), (310, 350, 3), (390, 410, 4)]   # 1: before; 4: ends outside its bracket
    work = [(0, 10_000, 1), (1_000, 1_300, 2), (2_000, 2_500, 3), (3_000, 9_000, 4)]
    assert cupti_timing.per_launch_ns(marks, api, work) == pytest.approx((300 + 500) / 2)
    with pytest.raises(cupti_timing.CuptiUnavailable, match="records for 1 of 2 launches"):
        cupti_timing.per_launch_ns(marks, api, work[:2])
    with pytest.raises(cupti_timing.CuptiUnavailable, match="no activity record"):
        cupti_timing.per_launch_ns(marks, api, work[:1])


# --- what CUPTI cannot time: a note, and the batch (or events) --------------------------------------------

@pytest.mark.parametrize("how, fragment", [
    ("missing", "timed by batch: cupti-python is not installed"),
    ("refused", "timed by batch: CUPTI refused: CUPTI error 39 (ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)"),
    ("silent", "timed by batch: CUPTI gave no activity record for this row's launches"),
])
def test_cupti_that_cannot_time_a_row_leaves_a_note_and_a_batch(monkeypatch, how, fragment):
    gpu = CuptiGpu(refuse=39 if how == "refused" else None,
                   silent=("CONCURRENT_KERNEL", "MEMSET") if how == "silent" else ())
    install(monkeypatch, None if how == "missing" else gpu)
    t = time_case(gpu, Case(run=lambda: gpu.kernel(ns=3_000), result=lambda: None), PROTO)
    assert t.method == "batch" and t.batch > 1 and t.note.startswith(fragment), t.note
    assert t.extra()["timed_by_note"] == t.note
    assert t.stats.median == pytest.approx((3_000 + GAP_NS + EVENT_OVERHEAD_NS / t.batch) / 1e6)   # the batch's
    if how != "missing":
        assert gpu.enabled == set() and gpu.calls[-1] == "finalize"   # CUPTI let go of, refused or not


def test_a_long_kernel_cupti_cannot_time_is_timed_by_events_and_says_so(monkeypatch):
    gpu = CuptiGpu()
    install(monkeypatch, None)
    t = time_case(gpu, Case(run=lambda: gpu.kernel(ns=50_000), result=lambda: None), PROTO)
    assert t.method == "events" and t.note.startswith("timed by events: cupti-python is not installed")


@pytest.mark.parametrize("proto,kernel_ms", [(PROTO, 0.005), (HOT, 0.003)])
def test_a_row_that_cannot_repeat_is_reset_before_each_launch_and_the_reset_is_not_the_rows(monkeypatch, proto,
                                                                                               kernel_ms):
    """An in-place row (reduce's classic ladder) consumes its input: each launch must start from a reset one, and
    the reset's copy (here a long memset) must not be counted, as the flushes are not."""
    gpu = gpu_with(monkeypatch)
    state = {"fresh": False, "resets": 0}

    def reset():
        state["fresh"] = True
        state["resets"] += 1
        gpu.memset(ns=20_000)

    def run():
        assert state["fresh"], "launched on a consumed input"
        state["fresh"] = False
        gpu.kernel(ns=3_000, cold_ns=5_000)

    t = time_case(gpu, Case(run=run, result=lambda: None, reset=reset), proto)
    assert t.method == "cupti" and t.note == "" and t.batch > 1
    assert t.stats.samples == pytest.approx([kernel_ms] * t.stats.n)
    cupti_launches = t.batch * (t.stats.n + proto.warmup)
    assert state["resets"] >= cupti_launches


def test_the_rows_own_gpu_error_is_not_taken_for_cuptis(monkeypatch):
    gpu = gpu_with(monkeypatch)
    calls = [0]

    def run():
        calls[0] += 1
        if calls[0] == 11:   # once, past the events' warm-up and probes: inside CUPTI's samples
            raise GpuError("launch of case_kernel failed: an illegal memory access")
        gpu.kernel()

    with pytest.raises(GpuError, match="illegal memory access") as err:
        time_case(gpu, Case(run=run, result=lambda: None), PROTO)
    assert not isinstance(err.value, cupti_timing.CuptiUnavailable)
    assert gpu.calls[-1] == "finalize"


# --- imported only when asked ---------------------------------------------------------------------------

class _Refuse(importlib.abc.MetaPathFinder):
    """Records (and refuses) every import of cupti or of cudalab's CUPTI module."""

    def __init__(self):
        self.asked: list[str] = []

    def find_spec(self, name, path=None, target=None):
        if name == "cupti" or name.startswith("cupti.") or name == "cudalab.worker.cupti_timing":
            self.asked.append(name)
            raise ImportError(f"{name} must not be imported here")
        return None


@pytest.mark.parametrize("launch", ["batch", "graph", "events"])
def test_other_methods_never_import_cupti(monkeypatch, launch):
    finder = _Refuse()
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    for name in ("cupti", "cupti.cupti", "cudalab.worker.cupti_timing"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delattr(worker_pkg, "cupti_timing", raising=False)   # else `from cudalab.worker import` finds it
    gpu = CuptiGpu()
    t = time_case(gpu, Case(run=lambda: gpu.kernel(ns=3_000), result=lambda: None),
                  Protocol(**{**PROTO.__dict__, "launch": launch}))
    assert t.method in ("batch", "events") and finder.asked == []
    with pytest.raises(ImportError):   # the finder is in the way: cupti would have been seen
        time_case(gpu, Case(run=lambda: gpu.kernel(ns=3_000), result=lambda: None), PROTO)
    assert finder.asked == ["cudalab.worker.cupti_timing"]


def test_a_worker_without_cupti_python_starts():
    code = ("import sys; sys.modules['cupti'] = None\n"
            "import cudalab.worker.serve, cudalab.worker.executor, cudalab.worker.sampling, cudalab.worker.gpu\n"
            "assert 'cudalab.worker.cupti_timing' not in sys.modules\n"
            "from cudalab.worker import cupti_timing\n"
            "try:\n    cupti_timing.load()\nexcept cupti_timing.CuptiUnavailable as e:\n    print(e)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "cupti-python is not installed" in res.stdout and "cudalab[cupti]" in res.stdout


# --- the command line and the tables ---------------------------------------------------------------------

def test_launch_cupti_reaches_the_protocol_and_a_bad_value_is_one_line(one_line_exit_2):
    from cudalab import catalog
    from cudalab.cli.options import requests_from, timing_options
    from cudalab.families import load

    spec = catalog.family("copy")
    reqs = requests_from(spec, load(spec.module), {"launch": "cupti", "n": "64", "budget": 0.5, "min_samples": 10})
    assert reqs[0].protocol.launch == "cupti"
    choice = next(o for o in timing_options() if o.name == "launch").type
    assert tuple(choice.choices) == tuple(sorted(LAUNCH_METHODS, key=list(choice.choices).index))
    assert set(choice.choices) == set(LAUNCH_METHODS)
    res = CliRunner().invoke(cli, ["copy", "--launch", "cuptii"])
    one_line_exit_2(res, "--launch")


def test_the_table_names_cupti_and_a_row_it_could_not_time():
    rows = [Result("c", "kernel", PASSED, stats=summarize([0.005] * 3), max_error=0.0,
                   extra={"timed_by": "cupti", "batch": 29, "launch_overhead_us": 4.0, "single_launch_ms": 0.009}),
            Result("b", "kernel", PASSED, stats=summarize([0.003] * 3), max_error=0.0,
                   extra={"timed_by": "batch", "batch": 64, "single_launch_ms": 0.007,
                          "timed_by_note": "timed by batch: cupti-python is not installed"})]
    con = report.console()
    with con.capture() as cap:
        con.print(report.results_table(rows, "none", wide=False))
    out = cap.get()
    assert "cupti ×29 −4.00 µs" in out and "batch ×64 *" in out
    head = "\n".join(report.header_lines(None, "t", "p", PROTO, None, rows))
    assert "timed by cupti ×N" in head and "flush before each launch, not counted" in head
    assert "b (timed by batch: cupti-python is not installed)" in head
    marked = next(ln for ln in head.splitlines() if ln.startswith("rows marked batch ×N"))
    assert "the throughput a stream of launches reaches" in marked
    assert "64" in marked and "29" not in marked   # the batch's line is the batch rows' only
    hot = "\n".join(report.header_lines(None, "t", "p", HOT, None, rows[:1]))
    assert "timed by cupti ×N" in hot and "hot L2" in hot


def test_truths_tables_show_each_method_beside_cupti_and_ncus_offset():
    from cudalab.report.truth import tables
    from cudalab.studies.truth import Figure, Row, Truth

    figs = []
    for temp in ("cold", "hot"):
        figs += [(temp, "events", Figure(0.0060, 0.0001, 20, "events")),
                 (temp, "batch", Figure(0.0030, 0.00001, 20, "batch", 64)),
                 (temp, "graph", Figure(0.0020, 0.00001, 20, "graph", 64)),
                 (temp, "cupti", Figure(0.0031, 0.00001, 20, "cupti", 64) if temp == "cold" else
                  Figure(0.0030, 0.00001, 20, "graph", 64, "timed by graph: cupti-python is not installed")),
                 (temp, "ncu", Figure(0.0041, 0.00001, 9, "ncu"))]
    t = Truth("smem-square", (Row("1 block", "row-row", "kernel", tuple(figs)),), {"name": "GPU"}, 10)
    cold, hot = tables(t)
    assert "cupti µs (reference)" in cold.headers and "batch µs vs cupti" in cold.headers
    row = dict(zip(cold.headers, (c[0] if isinstance(c, tuple) else c for c in cold.rows[0])))
    assert row["cupti µs (reference)"].startswith("3.100") and row["batch µs vs cupti"].endswith("-3.2%")
    assert row["ncu µs, −cupti"].endswith("+1.000") and row["tables vs cupti"] == "+0.0%"
    hrow = dict(zip(hot.headers, (c[0] if isinstance(c, tuple) else c for c in hot.rows[0])))
    assert hrow["cupti µs (reference)"].endswith("(graph)") and hrow["tables vs cupti"] == "–"   # no reference hot
    assert hrow["tables use"] == "graph ×64"
    assert any("row-row (hot, cupti): timed by graph: cupti-python is not installed" in n for n in hot.notes)
    assert any(n.startswith("ncu offset (cold) on this GPU: +1.000 µs") for n in hot.notes)
    assert not any(n.startswith("ncu offset (hot)") for n in hot.notes)
    doc = t.to_dict()
    assert doc["methods"] == ["events", "batch", "graph", "cupti", "ncu"] and doc["reference"] == "cupti"
    assert doc["rows"][0]["cold"]["batch"]["vs_cupti"] == pytest.approx(0.0030 / 0.0031 - 1)
    assert doc["rows"][0]["cold"]["batch"]["agrees"] is True        # 0.1 µs off: within 0.1 µs
    assert doc["rows"][0]["cold"]["graph"]["agrees"] is False
    assert doc["ncu"]["offset_ms"]["cold"] == pytest.approx(0.001) and doc["ncu"]["offset_ms"]["hot"] is None
