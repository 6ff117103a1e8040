"""cudalab.ncu without a GPU or ncu: CSV parsing on files captured from real ncu runs (tests/data), the
launch matcher, expectations, argv, errors, the one-process profile flow with a fake ncu over the child
protocol, export/import round trips, and ``cudalab ncu FAMILY --import`` through click."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_tools import FakeRun, ncu_csv, planned_rows

from cudalab import ncu
from cudalab.worker.protocol import ChildResult
from cudalab.errors import CudalabError, ToolFailedError, ToolMissingError
from cudalab.records.results import INCORRECT, MISSING, PASSED, FAILED, SKIPPED, Result, RunPoint
from cudalab.plan import RunRequest

DATA = Path(__file__).parent / "data"
TRANSPOSE_CSV = DATA / "ncu_transpose_smem_h200.csv"      # ncu --csv stdout, program output mixed in
COPY_CSV = DATA / "ncu_import_copy_memory_h200.csv"        # ncu --import x.ncu-rep --csv
DERIVED_CSV = DATA / "ncu_derived_thousands.csv"           # derived from TRANSPOSE_CSV: "1,024" values


def parsed(path: Path) -> ncu.ParsedCsv:
    return ncu.parse_csv(path.read_text(), str(path))


def smem_metrics(ld_wf: int, st_wf: int, req: int = 32, ns: str = "2304") -> dict:
    return {ncu.SMEM_LD_REQ: ("inst", str(req)), ncu.SMEM_ST_REQ: ("inst", str(req)),
            ncu.SMEM_LD_WF: ("", f"{ld_wf:,}"), ncu.SMEM_ST_WF: ("", f"{st_wf:,}"),
            ncu.SMEM_LD_CONF: ("", str(ld_wf - req)), ncu.SMEM_ST_CONF: ("", str(st_wf - req)),
            ncu.DURATION: ("nsecond", ns)}


# --- parsing -----------------------------------------------------------------------------------------

def test_header_found_among_program_output():
    p = parsed(TRANSPOSE_CSV)
    ls = p.launches
    assert [ln.launch_id for ln in ls] == list(range(12))  # 6 kernels, warm-up + verified each (older cudalab)
    assert all(len(ln.metrics) == 7 for ln in ls) and not p.truncated
    assert ls[0].block == "32x32" and ls[0].grid == "128x128" and ls[0].cc == "9.0"
    assert ls[0].key == ("transpose_naive", "128x128", "32x32")


def test_durations_in_nanoseconds_at_full_precision():
    assert parsed(TRANSPOSE_CSV).launches[0].duration_ns == 252352
    cp = parsed(COPY_CSV).launches[0]
    assert cp.metric(ncu.DURATION).unit == "ns" and cp.metric(ncu.DURATION).raw == "65.82"
    assert cp.duration_ns == pytest.approx(65820)
    assert cp.value(ncu.DRAM_PCT) == pytest.approx(36.38)
    d = parsed(DERIVED_CSV).launches
    assert d[0].duration_ns == pytest.approx(130270) and d[1].duration_ns == pytest.approx(74688)  # us, msecond
    assert d[0].value(ncu.SMEM_LD_WF) == 16860216 and d[0].metric(ncu.SMEM_LD_WF).raw == "16,860,216"
    assert ncu.parse_number("1,024") == 1024 and ncu.parse_number("n/a") is None and ncu.parse_number("") is None


def test_a_byte_order_mark_is_not_in_the_way():
    plain = parsed(COPY_CSV)
    text = "\ufeff" + COPY_CSV.read_text()
    assert ncu.parse_csv(text, "bom.csv").launches == plain.launches


def test_no_header_is_a_clear_error():
    with pytest.raises(ncu.NcuParseError, match="no ncu CSV found"):
        ncu.parse_csv("==PROF== Connected\nhello\n", "x.csv")


def test_cut_final_line_and_short_launch_are_truncation():
    text = TRANSPOSE_CSV.read_text()
    cut = text[: len(text) - 8]  # mid-value of the last row
    p = ncu.parse_csv(cut)
    assert "cut-off row" in p.truncated and "the last line" in p.truncated
    assert p.launches[-1].missing == (ncu.SMEM_ST_REQ,)


def test_counter_permission_message():
    text = "==PROF== Connected to process 1\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission\n"
    with pytest.raises(ncu.CounterPermissionError) as info:
        ncu.parse_csv(text)
    msg = str(info.value)
    for word in ("ERR_NVGPUCTRPERM", "root", "CAP_PERFMON", "NVreg_RestrictProfilingToAdminUsers=0"):
        assert word in msg
    assert info.value.exit_code == 2 and isinstance(info.value, CudalabError)


# --- matching ----------------------------------------------------------------------------------------

def L(i, kernel, grid="128x128", block="32x32", **metrics):
    return ncu.KernelLaunch(i, kernel, block, grid, metrics=tuple(
        ncu.parse.metric(k, "ns" if k == ncu.DURATION else "", str(v)) for k, v in metrics.items()))


BLOCK = ("transpose_block", "128x128", "32x32")


def test_shared_kernel_and_shape_told_apart_by_order_within_the_key():
    launches = [L(0, "transpose_naive"), L(1, "transpose_block"), L(2, "transpose_tiled", block="32x8"),
                L(3, "transpose_block")]
    logs = [("naive", [("transpose_naive", "128x128", "32x32")]), ("block", [BLOCK]),
            ("tiled", [("transpose_tiled", "128x128", "32x8")]), ("bankopt", [BLOCK])]
    got, notes = ncu.match_launches(logs, launches)
    assert [ln.launch_id for ln in got["block"].launches] == [1]
    assert [ln.launch_id for ln in got["bankopt"].launches] == [3]
    assert [ln.launch_id for ln in got["tiled"].launches] == [2] and notes == []


def test_a_missing_launch_marks_its_key_instead_of_shifting():
    launches = [L(0, "transpose_naive"), L(1, "transpose_block")]
    logs = [("naive", [("transpose_naive", "128x128", "32x32")]), ("block", [BLOCK]), ("bankopt", [BLOCK])]
    got, _ = ncu.match_launches(logs, launches)
    assert got["naive"].launches and not got["naive"].problem
    assert not got["block"].launches and "ncu saw 1 launch(es) of transpose_block" in got["block"].problem
    assert "the run logged 2" in got["bankopt"].problem


def test_extra_launches_are_noted_and_kernels_outside_the_filter_ignored():
    logs = [("v", [("k", "1", "32"), ("helper", "1", "32")])]
    got, notes = ncu.match_launches(logs, [L(0, "k", "1", "32"), L(1, "other", "1", "32")], kernels={"k"})
    assert [ln.launch_id for ln in got["v"].launches] == [0]
    assert "match no selected variant: 1× other" in notes[0]


def test_several_launches_of_one_variant_are_combined():
    a = L(0, "sort_pass", **{ncu.DURATION: 100, ncu.SMEM_LD_WF: 10, ncu.DRAM_PCT: 50})
    b = L(1, "sort_pass", **{ncu.DURATION: 300, ncu.SMEM_LD_WF: 5, ncu.DRAM_PCT: 90})
    got, _ = ncu.match_launches([("sort", [a.key, b.key])], [a, b])
    one = ncu.combine(got["sort"].launches)
    assert one.duration_ns == 400 and one.value(ncu.SMEM_LD_WF) == 15
    assert one.value(ncu.DRAM_PCT) == pytest.approx((50 * 100 + 90 * 300) / 400)


# --- expectations, metric sets, argv --------------------------------------------------------------

@pytest.mark.parametrize("measured,expected,ok", [(32.16, 32, True), (1.06, 1, True), (1.3, 1, False),
                                                  (0.97, 1, False), (2.0, 1, False), (None, 1, False), (5, None, None)])
def test_tolerance(measured, expected, ok):
    assert ncu.matches(measured, expected) is ok


def test_metric_sets_default_from_the_family():
    from cudalab import catalog
    from cudalab.families import load

    for name, want in (("smem-square", "smem"), ("transpose", "smem"), ("copy", "memory")):
        spec = catalog.family(name)
        assert ncu.resolve_metrics(None, spec, load(spec.module)).name == want
    assert ncu.resolve_metrics("a.b,c").metrics == ("a.b", "c", ncu.DURATION)
    with pytest.raises(CudalabError, match="--metrics"):
        ncu.resolve_metrics("bad name")


def test_argv_profiles_every_kernel_in_one_process():
    argv = ncu.profile_argv("/opt/ncu", "/tmp/r", ["transpose_block", "transpose_naive", "transpose_block"], ["m1", "m2"])
    assert argv[:4] == ["/opt/ncu", "-o", "/tmp/r", "-f"]
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--kernel-name") + 1] == "regex:^(transpose_block|transpose_naive)$"
    assert argv[argv.index("--metrics") + 1] == "m1,m2" and "--launch-skip" not in argv
    assert ncu.import_argv("ncu", "r.ncu-rep") == ["ncu", "--import", "r.ncu-rep", "--csv", "--print-units", "base"]
    logged = ncu.profile_argv("/opt/ncu", "/tmp/r", ["k"], ["m1"], log="/tmp/x.log")
    assert logged[:6] == ["/opt/ncu", "--csv", "--print-units", "base", "--log-file", "/tmp/x.log"] and "-o" not in logged


def test_ncu_missing_message(invoke, monkeypatch, tmp_path):
    if Path("/usr/local/cuda/bin/ncu").exists():
        pytest.skip("ncu is installed in /usr/local/cuda/bin here")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.delenv("CUDALAB_NCU", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    with pytest.raises(ToolMissingError) as info:
        ncu.find_ncu()
    assert "/usr/local/cuda/bin/ncu" in str(info.value) and "Nsight Compute" in str(info.value)
    result = invoke("ncu", "smem-square")
    assert result.exit_code == 2 and "ncu (Nsight Compute) not found" in result.output


# --- the profile flow with a fake ncu ---------------------------------------------------------------

TRANSPOSE_REQ = RunRequest(family="transpose", n="4096")


def transpose_run(drop: str = "", **kw) -> FakeRun:
    """Every variant's planned launch, in run order; block and bankopt get their own wavefronts."""
    rows = planned_rows(TRANSPOSE_REQ)
    wf = {"block": 16860216, "bankopt": 555749}
    launches = []
    for r in rows:
        if r.kind != "kernel" or r.variant == drop or r.status == SKIPPED:
            continue
        k, g, b = r.extra["launches"][0]
        launches.append((k, g, b, smem_metrics(wf.get(r.variant, 524288), 564162, 524288)))
    return FakeRun(csv=ncu_csv(launches), **kw)


def test_one_ncu_process_for_the_whole_family(tmp_path):
    run = transpose_run()
    rep = ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=run)
    # one ncu process in all: the CSV comes in its log file, no second process reads a report back
    assert len(run.calls) == 1 and "--import" not in run.calls[0][0] and "--log-file" in run.calls[0][0]
    argv, kw = run.calls[0]
    assert argv[-4:-2] == ["-m", "cudalab.worker.child"] and kw["env"]["LC_ALL"] == "C" and "shell" not in kw
    assert "transpose_block|" in argv[argv.index("--kernel-name") + 1]
    by = {r.variant: r for r in rep.rows}
    assert "host" not in by  # host, driver and library rows have no kernel of cudalab's
    assert by["block"].per_request("ld") == pytest.approx(32.16, abs=0.01) and by["block"].verdict("ld")
    assert by["bankopt"].per_request("ld") == pytest.approx(1.06, abs=0.01) and by["bankopt"].verdict("ld")
    assert all(r.status == PASSED for r in rep.rows)
    assert "one process for" in rep.source


def test_missing_launch_in_ncu_output_is_missing_not_shifted():
    rep = ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=transpose_run(drop="block"))
    by = {r.variant: r for r in rep.rows}
    assert by["block"].status == MISSING and by["bankopt"].status == MISSING
    assert "cannot tell which is whose" in by["bankopt"].note and by["bankopt"].launch is None
    assert by["naive"].status == PASSED


def test_incorrect_child_row_is_incorrect():
    rows = lambda req: planned_rows(req, {"bankopt": (INCORRECT, "max error 5 > 0")})  # noqa: E731
    run = transpose_run()
    run.rows = rows
    rep = ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=run)
    row = next(r for r in rep.rows if r.variant == "bankopt")
    assert row.status == INCORRECT and "max error 5" in row.note and row.launch is not None and rep.bad


def test_child_that_wrote_nothing_or_refused():
    with pytest.raises(ToolFailedError, match="wrote no result"):
        ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=FakeRun(rows=lambda req: None, output="Segmentation fault", rc=139))
    refused = FakeRun(rows=lambda req: ChildResult(error="pycuda is not installed"), rc=2)
    with pytest.raises(ToolFailedError, match="refused: pycuda is not installed"):
        ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=refused)


def test_no_report_and_permission_errors():
    with pytest.raises(ncu.KernelNotProfiledError, match="saw no launch"):
        ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=transpose_run(report=False, output="==PROF== No kernels were profiled."))
    with pytest.raises(ncu.CounterPermissionError):
        ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=transpose_run(output="==ERROR== ERR_NVGPUCTRPERM"))


def test_export_then_import_matches_exactly(tmp_path):
    export = tmp_path / "t.csv"
    rep = ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=transpose_run(), export=export)
    text = export.read_text()
    assert text.startswith(f"{ncu.MARKER} request ") and f"{ncu.MARKER} variant " in text
    again = ncu.load_import(export, RunRequest(family="transpose"))
    assert "markers" in again.problem and "4096x4096" in again.problem
    assert [(r.variant, r.status, r.per_request("ld")) for r in again.rows] == \
        [(r.variant, r.status, r.per_request("ld")) for r in rep.rows]


def test_ncu_rep_export_keeps_the_launch_log_beside_it(tmp_path):
    export = tmp_path / "t.ncu-rep"
    run = transpose_run()
    ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=run, export=export)
    assert export.read_bytes() == b"NCU" and Path(str(export) + ".cudalab").read_text().startswith(ncu.MARKER)
    again = ncu.load_import(export, RunRequest(family="transpose", variants="block,bankopt"), ncu="/opt/ncu", run=run)
    assert [r.variant for r in again.rows] == ["block", "bankopt"] and "markers" in again.problem
    assert run.calls[-1][0][1:3] == ["--import", str(export)]


def test_add_ncu_merges_the_report_columns():
    req = RunRequest(family="transpose", n="4096", variants="block,bankopt")
    point = RunPoint(family="transpose", metric="bandwidth", problem={},
                     results=(Result("block", "kernel", PASSED), Result("bankopt", "kernel", PASSED)))
    out = ncu.add_ncu(point, req, ncu="/opt/ncu", run=transpose_run())
    block = out.results[0].extra
    assert block["ncu_ld_wpr"] == pytest.approx(32.16, abs=0.01) and block["ncu_ld_ok"] is True
    assert block["ncu_ms"] == pytest.approx(2304e-6) and "ncu_ld_conflicts" in block


# --- import --------------------------------------------------------------------------------------------

def test_import_derived_file_gives_each_variant_its_own_launch(invoke):
    res = invoke("ncu", "transpose", "--import", str(DERIVED_CSV))
    assert res.exit_code == 0, res.output
    rep = ncu.load_import(DERIVED_CSV, RunRequest(family="transpose"))
    by = {r.variant: r for r in rep.rows}
    assert by["block"].launch.launch_id == 0 and by["bankopt"].launch.launch_id == 1
    assert by["block"].status == PASSED and by["bankopt"].status == PASSED
    assert "size read from the file's launch shapes" in rep.problem
    assert by["naive"].status == MISSING and "no launch of transpose_naive" in by["naive"].note


def test_import_captured_transpose_file_old_double_launches(invoke):
    res = invoke("ncu", "transpose", "--import", str(TRANSPOSE_CSV))
    assert res.exit_code == 0, res.output
    assert "32.16 ✓" in res.output and "1.06 ✓" in res.output and "twice" in res.output
    assert "130,272" in res.output  # ns, the verified (second) block launch


def test_import_size_contradicting_the_file_is_refused(invoke):
    res = invoke("ncu", "transpose", "--import", str(TRANSPOSE_CSV), "--n", "1024")
    assert res.exit_code == 2 and "contradict" in res.output and len(res.output.strip().splitlines()) == 1


def test_import_copy_memory_grid_stride_from_the_file(invoke):
    res = invoke("ncu", "copy", "--import", str(COPY_CSV))
    assert res.exit_code == 0, res.output
    assert "DRAM % peak" in res.output and "36.4" in res.output and "copy_vec4" in res.output


def test_import_foreign_family_is_refused_in_one_line(invoke):
    res = invoke("ncu", "smem-square", "--import", str(COPY_CSV))
    assert res.exit_code == 2 and "copy_naive" in res.output and "copy's" in res.output


def square_file(tmp_path, block="32x32", variants=None) -> Path:
    from cudalab import catalog

    spec = catalog.family("smem-square")
    figures = {"setRowReadRow": (32, 32), "setColReadCol": (1024, 1024), "setRowReadCol": (1024, 32),
               "setRowReadColDyn": (1024, 32), "setRowReadColPad": (32, 32), "setRowReadColDynPad": (32, 32)}
    launches = [(v.kernel, "1", block, smem_metrics(*figures[v.kernel])) for v in spec.variants
                if v.kind == "kernel" and (variants is None or v.name in variants)]
    path = tmp_path / "square.csv"
    path.write_text("==PROF== Connected\n" + ncu_csv(launches))
    return path


def test_import_square_subset_finds_every_selected_variant(tmp_path):
    path = square_file(tmp_path)
    rep = ncu.load_import(path, RunRequest(family="smem-square", variants="row-col-pad,row-row"))
    assert [(r.variant, r.status) for r in rep.rows] == [("row-col-pad", PASSED), ("row-row", PASSED)]
    assert rep.rows[0].verdict("ld") and rep.rows[1].verdict("st")


def test_import_square_file_as_rect_is_refused(invoke, tmp_path):
    res = invoke("ncu", "smem-rect", "--import", str(square_file(tmp_path)))
    assert res.exit_code == 2 and "contradict smem-rect" in res.output and "smem-square" in res.output


def test_import_truncated_file_is_flagged_and_exits_1(invoke, tmp_path):
    text = TRANSPOSE_CSV.read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text[: len(text) - 8])
    res = invoke("ncu", "transpose", "--import", str(cut))
    assert res.exit_code == 1, res.output
    assert "cut off" in res.output
    rep = ncu.load_import(cut, RunRequest(family="transpose"))
    assert next(r for r in rep.rows if r.variant == "tiled-64x8").status == FAILED


def test_cli_import_forwards_family_options(invoke, tmp_path):
    # --ipad reaches the smem-rect expectations: with ipad 1 a 2-way load is expected
    path = tmp_path / "r.csv"
    path.write_text(ncu_csv([("setRowReadColPad", "1", "32x16", smem_metrics(64, 32))]))
    ok = invoke("ncu", "smem-rect", "--variant", "row-col-pad", "--import", str(path), "--ipad", "1")
    bad = invoke("ncu", "smem-rect", "--variant", "row-col-pad", "--import", str(path), "--strict")
    assert ok.exit_code == 0 and "2.00 ✓" in ok.output, ok.output
    assert bad.exit_code == 1 and "2.00 ✗ (expected 1)" in bad.output, bad.output


def test_cli_ncu_takes_the_family_problem_options(invoke):
    res = invoke("ncu", "smem-rect", "--help")
    assert res.exit_code == 0 and "--ipad" in res.output and "--metrics" in res.output and "--define" in res.output
    assert invoke("ncu", "--help").output.count("transpose") >= 1


def test_import_cli_without_pycuda_in_a_subprocess(invoke):
    code = ("import sys; from click.testing import CliRunner; from cudalab.cli import cli; "
            f"r = CliRunner().invoke(cli, ['ncu', 'transpose', '--import', {str(TRANSPOSE_CSV)!r}]); "
            "assert r.exit_code == 0, r.output; assert 'pycuda' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parent.parent,
                   env=dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent), PATH="/nonexistent"))


def test_import_falls_back_when_ncu_has_no_print_units(tmp_path):
    calls = []

    def run(argv, **kw):
        calls.append(argv)
        if "--print-units" in argv:
            return subprocess.CompletedProcess(argv, 1, "", "==ERROR== unrecognised option '--print-units'")
        return subprocess.CompletedProcess(argv, 0, DERIVED_CSV.read_text(), "")

    rep_path = tmp_path / "x.ncu-rep"
    rep_path.write_bytes(b"NCU")
    rep = ncu.load_import(rep_path, RunRequest(family="transpose", variants="block,bankopt"), ncu="/opt/ncu", run=run)
    assert [c[-1] for c in calls] == ["base", "--csv"] and rep.rows[0].duration_ns == pytest.approx(130270)


def test_cli_live_profile_then_import(invoke, monkeypatch, tmp_path):
    seen = []
    real = ncu.profile

    def profile(req, *a, **kw):
        seen.append(req)
        return real(req, *a, **kw, ncu="/opt/ncu", run=transpose_run())

    monkeypatch.setattr(ncu, "profile", profile)
    path = tmp_path / "t.csv"
    live = invoke("ncu", "transpose", "--n", "4096", "--variant", "block,bankopt", "--export", str(path), "--strict")
    assert live.exit_code == 0, live.output
    assert seen[0].n == "4096" and seen[0].variants == "block,bankopt" and seen[0].family == "transpose"
    assert "32.16 ✓" in live.output and "raw ncu CSV written" in live.output
    back = invoke("ncu", "transpose", "--import", str(path))
    assert back.exit_code == 0 and "32.16 ✓" in back.output and "markers" in back.output, back.output


def test_cli_family_options_reach_the_request(invoke, monkeypatch):
    seen = []
    monkeypatch.setattr(ncu, "profile", lambda req, *a, **kw: seen.append(req) or (_ for _ in ()).throw(
        ncu.KernelNotProfiledError("stop")))
    res = invoke("ncu", "smem-rect", "--ipad", "1", "--blocks", "4", "-D", "X=1")
    assert res.exit_code == 2 and dict(seen[0].options) == {"blocks": 4, "ipad": 1}
    assert seen[0].defines == (("X", "1"),)


def test_exported_file_cut_off_or_imported_as_another_family(invoke, tmp_path):
    export = tmp_path / "t.csv"
    ncu.profile(TRANSPOSE_REQ, ncu="/opt/ncu", run=transpose_run(), export=export)
    text = export.read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text[: text.rindex('"inst"')])  # the last launch loses its last metric mid-row
    res = invoke("ncu", "transpose", "--import", str(cut))
    assert res.exit_code == 1 and "cut off" in res.output, res.output
    other = invoke("ncu", "copy", "--import", str(export))
    assert other.exit_code == 2 and "exported by `cudalab ncu transpose`" in other.output


def test_family_table_shows_ncu_columns_with_marks():
    from cudalab import report

    point = RunPoint(family="transpose", metric="bandwidth", problem={}, results=(
        Result("block", "kernel", PASSED, extra={"ncu_ld_wpr": 32.16, "ncu_ld_ok": True, "ncu_ms": 0.000130272}),))
    cols = ncu.METRIC_SETS["smem"].instrument().present(point.results)  # what add_ncu gives the point
    con = report.console()
    with con.capture() as cap:
        con.print(report.results_table(point.results, "bandwidth", (), cols))
    assert "32.16 ✓" in cap.get() and "0.000130" in cap.get()


def test_a_run_table_with_ncu_ms_says_where_that_figure_comes_from():
    """The --ncu columns come from a second process under ncu, where some kernels run at another
    speed: the legend says so, and only when the columns are there."""
    from cudalab import report
    from cudalab.records.results import RunRecord

    def printed(extra):
        rows = (Result("naive", "kernel", PASSED, extra=extra),)
        rec = RunRecord(cudalab="x", command=(), started=0.0, device={},
                        points=(RunPoint("transpose", "bandwidth", {"dims": [64, 64]}, results=rows),))
        con = report.console()
        with con.capture() as cap:
            report.print_point(con, rec, rec.points[0])
        return cap.get()

    assert "ncu ms is from a second process under ncu" in printed({"ncu_ms": 4.57})
    assert "second process under ncu" not in printed({})


def test_ncu_package_imports_neither_click_nor_rich():
    code = "import sys, cudalab.ncu; print(sorted(m for m in ('click', 'rich', 'pycuda') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent).stdout
    assert out.strip() == "[]"
