"""One contract for instruments (cudalab.instruments): an ncu metric set declares its columns and legend in
cudalab/ncu/metrics.py alone; `cudalab ncu`, a family run with --ncu and `cudalab report` of either's record
show them; cudalab.report and cudalab.ncu never import each other. CPU only (the committed ncu CSVs, a fake ncu)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_tools import FakeRun, ncu_csv, planned_rows

from cudalab import ncu
from cudalab import instruments as instrument
from cudalab.ncu import metrics
from cudalab.records.results import PASSED, Result, RunPoint, RunRecord, load_record, save_record
from cudalab.plan import RunRequest

ROOT = Path(__file__).parent.parent
COPY_CSV = ROOT / "tests" / "data" / "ncu_import_copy_memory_h200.csv"
SOURCE_CSV = ROOT / "tests" / "data" / "ncu-source" / "transpose.csv"


# --- (a) neither package imports the other -----------------------------------------------------------

def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (``from cudalab import ncu`` counts as cudalab.ncu)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


@pytest.mark.parametrize("package, other", [("report", "cudalab.ncu"), ("ncu", "cudalab.report")])
def test_report_and_ncu_import_nothing_of_each_other(package, other):
    found = {f"{p.name}: {m}" for p in sorted((ROOT / "cudalab" / package).glob("*.py"))
             for m in _imports(p) if m == other or m.startswith(other + ".")}
    assert not found, found
    contract = _imports(ROOT / "cudalab" / "instruments" / "__init__.py")  # the contract both use imports neither
    assert not any(m.startswith(("cudalab.ncu", "cudalab.report")) for m in contract)


def test_report_renders_a_saved_ncu_record_without_importing_ncu(invoke, tmp_path):
    saved = tmp_path / "ncu.json"
    assert invoke("ncu", "copy", "--import", COPY_CSV, "--json", saved).exit_code == 0
    code = ("import sys; from cudalab import report; from cudalab.records.results import load_record; "
            f"rec = load_record({str(saved)!r}); con = report.console(); "
            "report.print_point(con, rec, rec.points[0]); "
            "print(sorted(m for m in sys.modules if m.startswith('cudalab.ncu')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env=dict(os.environ, COLUMNS="200")).stdout
    assert "gld eff %" in out and "global ld / st eff %" in out and "ncu ms is from a second process" in out
    assert out.strip().splitlines()[-1] == "[]"


def test_ncu_formats_its_table_without_report_or_rich():
    code = ("import sys; from cudalab import ncu; from cudalab.plan import RunRequest; "
            f"t = ncu.table(ncu.load_import({str(SOURCE_CSV)!r}, RunRequest(family='transpose'))); "
            "assert 'ld wf/req' in t.headers, t.headers; "
            "print(sorted(m for m in sys.modules if m.startswith(('cudalab.report', 'rich'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stderr


# --- (b) a new metric set: one entry in METRIC_SETS, nothing else -------------------------------------

LEGEND = "permil = DRAM throughput in thousandths of its sustained peak (a test set)."
PERMIL = metrics.Figure("DRAM ‰ peak", lambda r: None if r.value(metrics.DRAM_PCT) is None
                        else 10 * r.value(metrics.DRAM_PCT), 0, key="ncu_test_permil", run_header="test ‰",
                        run_digits=1)
GLD = metrics.Figure("ld sector use", metrics.GLD_EFF, 3, key="ncu_test_gld", run_header="test gld")
TEST_SET = metrics.MetricSet("permil", (metrics.DRAM_PCT, metrics.GLD_EFF, metrics.DURATION), "a test set",
                             columns=(PERMIL, GLD, metrics.TIME), kept=(GLD, PERMIL), legend=(LEGEND,))


@pytest.fixture
def test_set(monkeypatch):
    monkeypatch.setitem(metrics.METRIC_SETS, "permil", TEST_SET)
    return TEST_SET


def report_elsewhere(path: Path) -> str:
    """`cudalab report PATH` in a fresh process: the test set is not registered there."""
    return subprocess.run([sys.executable, "-m", "cudalab", "report", str(path)], capture_output=True, text=True,
                          check=True, cwd=ROOT, env=dict(os.environ, COLUMNS="200")).stdout


def test_a_new_metric_set_shows_in_ncu_and_in_report_of_its_record(test_set, invoke, tmp_path):
    saved = tmp_path / "permil.json"
    res = invoke("ncu", "copy", "--import", COPY_CSV, "--metrics", "permil", "--json", saved)
    assert res.exit_code == 0, res.output
    assert "metrics permil" in res.output and "DRAM ‰ peak" in res.output and "ld sector use" in res.output
    naive = next(ln for ln in res.output.splitlines() if " naive " in ln)
    assert "364 " in naive and "100.000" in naive and "65,890" in naive  # its digits, its value function
    assert res.stdout.rstrip().endswith(LEGEND) and "global ld / st eff" not in res.output  # its legend alone

    from test_saved_runs import validate

    # docs/result-schema.json knows the point's instruments, and an ncu record's device {} (it names no GPU)
    assert validate(json.loads(saved.read_text())) == []
    assert load_record(saved).points[0].instruments == (test_set.instrument(),)
    row = load_record(saved).points[0].results[0].extra
    assert row["ncu_test_permil"] == pytest.approx(364.1) and row["ncu_test_gld"] == 100.0
    assert "ncu_ms" not in row  # kept: only what the set keeps

    out = report_elsewhere(saved)
    head = next(ln for ln in out.splitlines() if " variant " in ln)
    assert head.index("test gld") < head.index("test ‰") and "ncu ms" not in head  # kept order, run headers
    naive = next(ln for ln in out.splitlines() if ln.startswith(" naive "))
    assert "100.00" in naive and "364.1" in naive
    assert LEGEND in out and "ncu ms is from a second process" in out and "global ld / st eff" not in out


def test_a_new_metric_set_through_a_family_run_with_ncu(test_set, tmp_path):
    req = RunRequest(family="copy", n="4096", variants="naive,shared,vec4")
    figures = {"naive": ("36.41", "100", "65890"), "vec4": ("70.66", "50", "32700")}  # ncu missed shared
    launches = [(*r.extra["launches"][0], {metrics.DRAM_PCT: ("%", figures[r.variant][0]),
                                           metrics.GLD_EFF: ("%", figures[r.variant][1]),
                                           metrics.DURATION: ("nsecond", figures[r.variant][2])})
                for r in planned_rows(req) if r.variant in figures]
    point = RunPoint("copy", "bandwidth", {"dims": [4096, 4096], "dtype": "float32"},
                     results=tuple(Result(v, "kernel", PASSED) for v in ("naive", "shared", "vec4")))
    point = ncu.add_ncu(point, req, "permil", ncu="/opt/ncu", run=FakeRun(csv=ncu_csv(launches)))
    assert [i.name for i in point.instruments] == ["ncu"]
    saved = tmp_path / "run.json"
    save_record(saved, RunRecord(cudalab="x", command=("cudalab", "copy", "--ncu"), started=0.0, device={},
                                 points=(point,)))
    out = report_elsewhere(saved)
    vec4 = next(ln for ln in out.splitlines() if ln.startswith(" vec4 "))
    assert "50.00" in vec4 and "706.6" in vec4 and LEGEND in out
    assert "ncu: shared missing: ncu saw no launch of copy_shared" in out  # the instrument's own row status


# --- the contract itself -----------------------------------------------------------------------------

def test_every_set_keeps_keyed_figures_and_says_what_they_are():
    for name, mset in metrics.METRIC_SETS.items():
        assert all(f.key.startswith("ncu_") for f in mset.keeps()), name
        assert len({f.key for f in mset.keeps()}) == len(mset.keeps()), name
        assert mset.legend and mset.instrument().legend[-1] == metrics.RUN_LEGEND, name
        back = instrument.Instrument.from_dict(mset.instrument().to_dict())
        assert back == mset.instrument(), name


def test_a_record_written_before_points_named_their_instruments_reads_its_ncu_columns():
    rows = (Result("block", "kernel", PASSED, extra={"ncu_ld_wpr": 32.16, "ncu_ld_ok": False, "ncu_ms": 0.5}),)
    point = RunPoint("transpose", "bandwidth", {}, results=rows)
    (inst,) = instrument.of(point)
    assert [c.cell(rows[0].extra) for c in inst.present(rows)] == ["32.16 ✗", "0.500000"]
    assert inst.notes(rows)[0].startswith("wf/req = ")  # the smem legend, as that version printed it
    assert inst.notes(rows)[-1].startswith("ncu ms is from a second process")
    assert instrument.of(RunPoint("transpose", "bandwidth", {}, results=(Result("b", "kernel", PASSED),))) == ()
