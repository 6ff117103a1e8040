"""cudalab sanitize without a GPU: output parsing, planning, judging, and the command end to end
against a stand-in compute-sanitizer (a script that prints what the real one prints)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudalab import catalog
from cudalab import sanitize as S
from cudalab.cli import cli
from cudalab import plan as planning
from cudalab.execute.toolchild import ChildRun
from cudalab.worker.protocol import ChildResult
from cudalab.errors import ToolFailedError, ToolMissingError, UsageError
from cudalab.records.results import INCORRECT, Result
from cudalab.plan import RunRequest
from fake_tools import FakeRun

# --- captured-style outputs (format of compute-sanitizer 2025.x) -----------------------------------

MEMCHECK_OOB = """\
========= COMPUTE-SANITIZER
cudalab transpose
size 33x33 · dtype float32
========= Invalid __global__ write of size 4 bytes
=========     at transpose_naive+0x1b0 in /work/cuda_src/transpose/transpose.cu:12
=========     by thread (1,0,0) in block (1,0,0)
=========     Address 0x7f1c4e000484 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f1c4e000000 of size 1156 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========
========= Invalid __global__ write of size 4 bytes
=========     at transpose_naive+0x1b0 in /work/cuda_src/transpose/transpose.cu:12
=========     by thread (2,0,0) in block (1,0,0)
=========
========= Target application returned an error
========= ERROR SUMMARY: 2 errors
"""

MEMCHECK_CLEAN = """\
========= COMPUTE-SANITIZER
cudalab transpose
========= ERROR SUMMARY: 0 errors
"""

RACECHECK_RACE = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at reduce_unroll_warps8+0x3c0 in reduce.cu:88
=========     and Read access at reduce_unroll_warps8+0x3a0 in reduce.cu:88 [124 hazards]
=========
========= Warning: Race reported between Write access at reduce_unroll_warps8+0x400 in reduce.cu:90
=========     and Write access at reduce_unroll_warps8+0x400 in reduce.cu:90 [4 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""

RACECHECK_CLEAN = """\
========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""

SYNCCHECK = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at copy_shared_seed+0x2f0 in copy.cu:40
=========     by thread (0,31,0) in block (1,1,0)
=========
========= ERROR SUMMARY: 1 error
"""

INITCHECK = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at reduce_neighbored+0x90
=========     by thread (5,0,0) in block (0,0,0)
=========     Address 0x7f00000000a0
=========
========= ERROR SUMMARY: 1 error
"""


def test_parse_memcheck_counts_and_first_report():
    p = S.parse_output(MEMCHECK_OOB, "memcheck")
    assert p.errors == 2
    assert p.reports[0] == "Invalid __global__ write of size 4 bytes"
    assert len(p.reports) == 2  # 'Target application returned an error' is not a report
    assert p.first == "Invalid __global__ write of size 4 bytes (transpose.cu:12)"


def test_parse_clean_outputs():
    assert S.parse_output(MEMCHECK_CLEAN, "memcheck") == S.Parsed(errors=0)
    assert S.parse_output(RACECHECK_CLEAN, "racecheck") == S.Parsed(errors=0)


def test_parse_racecheck_errors_and_warnings():
    p = S.parse_output(RACECHECK_RACE, "racecheck")
    assert (p.errors, p.warnings) == (1, 1)
    assert p.reports[0].startswith("Error: Race reported between Write access at reduce_unroll_warps8")
    assert p.reports[1].startswith("Warning: Race reported")


def test_parse_racecheck_ignores_error_summary_when_it_has_its_own():
    text = RACECHECK_CLEAN + "========= ERROR SUMMARY: 3 errors\n"
    assert S.parse_output(text, "racecheck").errors == 0


def test_parse_synccheck_and_initcheck():
    s = S.parse_output(SYNCCHECK, "synccheck")
    assert s.errors == 1 and s.first == "Barrier error detected. Divergent thread(s) in block (copy.cu:40)"
    i = S.parse_output(INITCHECK, "initcheck")
    assert i.errors == 1 and i.first == "Uninitialized __global__ memory read of size 4 bytes (reduce_neighbored+0x90)"


def test_parse_without_summary_is_unknown():
    assert S.parse_output("Traceback (most recent call last):\nboom\n", "memcheck").errors is None
    assert S.parse_output("", "racecheck").errors is None


# --- argv, tools, sizes ----------------------------------------------------------------------------

def test_prefix_argv_is_a_list_without_shell():
    argv = S.prefix_argv("/opt/cs", "racecheck", 5)
    assert argv == ["/opt/cs", "--tool", "racecheck", "--error-exitcode", "99", "--print-limit", "5"]


def test_tools_for():
    assert S.tools_for("all") == S.TOOLS
    assert S.tools_for("memcheck,racecheck") == ("memcheck", "racecheck")
    with pytest.raises(UsageError, match="unknown sanitizer tool"):
        S.tools_for("leakcheck")


def test_sizes_from_the_family_hook_or_the_command_line():
    assert S.sizes_for(RunRequest(family="reduce")) == ({"n": "8192"}, {"n": "8191"})
    assert S.sizes_for(RunRequest(family="transpose")) == ({"n": "64"}, {"n": "33"})
    assert S.sizes_for(RunRequest(family="transpose", n="128,100")) == ({"n": "128"}, {"n": "100"})
    assert S.sizes_for(RunRequest(family="transpose", shape="64x32")) == ({"shape": "64x32"},)


def test_find_sanitizer_missing_says_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if Path("/usr/local/cuda/bin/compute-sanitizer").exists():
        pytest.skip("a real compute-sanitizer is installed")
    with pytest.raises(ToolMissingError, match="compute-sanitizer not found"):
        S.find_sanitizer()


# --- a family tree of our own: a divisible variant and a legacy one --------------------------------

EXTRA_VARIANTS = """

[[variant]]
name = "tiled-div"
source = "transpose.cu"
kernel = "transpose_tiled"
block = "32x8"
tile = ["block_x", "block_x"]
divisible = true
defines = { TILE = "block_x", ROWS = "block_y" }
description = "test only: refuses sizes that are not multiples of its tile"

[[variant]]
name = "old"
source = "transpose.cu"
kernel = "transpose_naive"
block = "32x32"
legacy = "test only: a faithful textbook bug"
description = "test only: a legacy variant"
"""


@pytest.fixture
def tree(family_tree):
    """A cuda_src with the transpose family plus a divisible and a legacy variant (module transpose)."""
    root = family_tree("transpose")
    toml = root / "transpose" / "family.toml"
    toml.write_text(toml.read_text() + EXTRA_VARIANTS)
    return root


def test_plan_skips_divisible_variant_at_the_odd_size(tree):
    jobs = S.plan(RunRequest(family="transpose", variants="naive,tiled-div"), tools=("memcheck",))
    by = {(j.variant, j.size): j for j in jobs}
    assert set(by) == {("naive", "64"), ("naive", "33"), ("tiled-div", "64"), ("tiled-div", "33")}
    assert not by["naive", "33"].skip and not by["tiled-div", "64"].skip
    assert "multiples of its tile" in by["tiled-div", "33"].skip
    assert [(j.variant, j.size) for j in jobs] == [("naive", "64"), ("naive", "33"), ("tiled-div", "64"),
                                                  ("tiled-div", "33")]
    assert by["naive", "33"].request.profile and by["naive", "33"].request.n == "33"


def test_plan_runs_only_kernels_and_refuses_bad_sizes(tree):
    jobs = S.plan(RunRequest(family="transpose"), tools=S.TOOLS)
    assert {j.variant for j in jobs} == {v.name for v in catalog.family("transpose").variants if v.kind == "kernel"}
    assert len(jobs) == len({j.variant for j in jobs}) * 2 * 4
    with pytest.raises(UsageError, match="must be positive"):
        S.plan(RunRequest(family="transpose", variants="naive", n="0"))
    with pytest.raises(UsageError, match="no kernel variant"):
        S.plan(RunRequest(family="transpose", variants="host"))


def test_plan_carries_family_options():
    jobs = S.plan(RunRequest(family="smem-rect", variants="row-col-pad", options=(("blocks", 1), ("ipad", 1))),
                  tools=("memcheck",))
    assert dict(jobs[0].request.options)["ipad"] == 1 and [j.size for j in jobs] == ["64", "33"]


# --- judging one run -------------------------------------------------------------------------------

JOB = S.Job(RunRequest(family="transpose", variants="naive", n="33", profile=True), "memcheck",
            plan=planning.precheck(RunRequest(family="transpose", variants="naive", n="33", profile=True)))


def done(rc: int, output: str, status=S.PASSED, reason: str = "", error: str = "", result: bool = True) -> ChildRun:
    rows = (Result("naive", "kernel", status, reason=reason),) if not error else ()
    return ChildRun(rc, output, ChildResult(rows, error) if result else None)


def test_judge_findings_clean_and_failures():
    assert S.judge(JOB, done(99, MEMCHECK_OOB)).status == S.FINDINGS
    assert S.judge(JOB, done(99, MEMCHECK_OOB)).findings == 2
    assert S.judge(JOB, done(0, MEMCHECK_CLEAN)).status == S.PASSED
    assert S.judge(JOB, done(99, "========= ERROR SUMMARY: 0 errors\n")).status == S.FINDINGS
    # a clean summary from a child that crashed (no result file) is a failure, not a clean run
    crashed = S.judge(JOB, done(-11, MEMCHECK_CLEAN, result=False))
    assert crashed.status == S.FAILED and "wrote no result (exit -11)" in crashed.reason
    wrong = S.judge(JOB, done(0, MEMCHECK_CLEAN, INCORRECT, "max error nan > 0"))
    assert wrong.status == S.FAILED and "incorrect: max error nan" in wrong.reason
    nogpu = S.judge(JOB, done(2, MEMCHECK_CLEAN, error="pycuda is not installed or cannot load"))
    assert nogpu.status == S.FAILED and nogpu.reason == "pycuda is not installed or cannot load"
    nosum = S.judge(JOB, done(0, "========= Error: Device not supported\n"))
    assert nosum.status == S.FAILED and nosum.findings is None and "no sanitizer summary" in nosum.reason


def test_judge_child_side_skip_comes_from_the_result_rows():
    row = S.judge(JOB, done(0, MEMCHECK_CLEAN, S.SKIPPED, "300000 bytes of shared memory per block"))
    assert row.status == S.SKIPPED and "shared memory" in row.reason
    # the child's printed text is never read for its verdict
    text = MEMCHECK_CLEAN + "  transpose/naive: skipped whatever\n"
    assert S.judge(JOB, done(0, text)).status == S.PASSED


def test_legacy_findings_do_not_count():
    job = S.Job(RunRequest(family="reduce", variants="unroll-warps8", n="64"), "racecheck", legacy="why")
    row = S.judge(job, done(99, RACECHECK_RACE))
    assert row.status == S.FINDINGS and not row.counts and S.failing([row]) == []
    assert S.judge(S.Job(job.request, "racecheck"), done(99, RACECHECK_RACE)).counts


def test_never_ran():
    rows = [S.Row("a", "", "memcheck", "64", S.SKIPPED), S.Row("a", "", "memcheck", "33", S.SKIPPED),
            S.Row("b", "", "memcheck", "64", S.SKIPPED), S.Row("b", "", "memcheck", "33", S.PASSED)]
    assert S.never_ran(rows) == ["a"]


# --- sanitize() with a fake subprocess runner over the child protocol --------------------------------

def fake_run(outcomes, rows=None):
    """outcomes maps (variant, tool, size) to (returncode, output); the child's result file is written."""
    def output(req, argv):
        tool = argv[argv.index("--tool") + 1]
        default = (0, RACECHECK_CLEAN if tool == "racecheck" else MEMCHECK_CLEAN)
        rc, out = outcomes.get((req.variants, tool, req.n), default)
        run.rc = rc
        return out

    class Run(FakeRun):
        def __call__(self, argv, **kw):
            res = super().__call__(argv, **kw)
            res.returncode = self.rc
            return res

    run = Run(rows=rows, output=output)
    return run


def test_sanitize_rows_logs_and_environment(tree, tmp_path):
    run = fake_run({("naive", "memcheck", "33"): (99, MEMCHECK_OOB)})
    seen = []
    rows = S.sanitize(RunRequest(family="transpose", variants="naive,tiled-div,old"), ("memcheck", "racecheck"),
                      log_dir=tmp_path / "logs", on_row=seen.append, run=run, sanitizer="/fake/compute-sanitizer")
    assert seen == rows and len(rows) == 3 * 2 * 2
    key = {(r.variant, r.tool, r.size): r for r in rows}
    assert key["naive", "memcheck", "33"].status == S.FINDINGS
    assert key["naive", "memcheck", "64"].status == S.PASSED
    assert key["tiled-div", "racecheck", "33"].status == S.SKIPPED
    assert key["old", "memcheck", "64"].legacy
    assert [r.variant for r in S.failing(rows)] == ["naive"]
    assert len(run.calls) == 10  # 2 skipped runs never started a subprocess
    argv, kw = run.calls[0]
    assert "shell" not in kw and isinstance(argv, list) and argv[-4:-2] == ["-m", "cudalab.worker.child"]
    assert kw["env"]["CUDALAB_SRC"] == str(tree)
    assert kw["env"]["PYTHONPATH"].split(os.pathsep)[0] == str(Path(S.__file__).resolve().parent.parent.parent)
    log = Path(key["naive", "memcheck", "33"].log)
    assert log.read_text().startswith("$ /fake/compute-sanitizer --tool memcheck")
    assert "Invalid __global__ write" in log.read_text()
    assert not key["tiled-div", "racecheck", "33"].log


def test_sanitize_timeout_is_a_failed_row(tree):
    def run(argv, **kw):
        raise subprocess.TimeoutExpired(argv, kw["timeout"], output=b"========= COMPUTE-SANITIZER\n")

    rows = S.sanitize(RunRequest(family="transpose", variants="naive"), ("memcheck",), run=run, sanitizer="cs",
                      timeout_s=5)
    assert [r.status for r in rows] == [S.FAILED, S.FAILED] and rows[0].reason == "timed out after 5 s"


def test_sanitize_every_run_refused_is_one_message(tree):
    run = fake_run({}, rows=lambda req: ChildResult(error="pycuda is not installed or cannot load"))
    with pytest.raises(ToolFailedError, match="every sanitizer run failed: pycuda is not installed"):
        S.sanitize(RunRequest(family="transpose", variants="naive,block"), ("memcheck",), run=run, sanitizer="cs")


def test_sanitize_unstartable_tool(tree):
    def run(argv, **kw):
        raise FileNotFoundError(2, "No such file", argv[0])

    with pytest.raises(ToolFailedError, match="could not start /x/cs"):
        S.sanitize(RunRequest(family="transpose", variants="naive"), ("memcheck",), run=run, sanitizer="/x/cs")


# --- the command, end to end, with the fake runner -------------------------------------------------

@pytest.fixture
def fake_tool(monkeypatch):
    """Route cudalab sanitize's runs through fake_run; returns a function that sets the canned reports."""
    state = {"outcomes": {}}
    real = S.sanitize

    def sanitize(*a, **kw):
        return real(*a, **kw, run=fake_run(state["outcomes"]), sanitizer="/fake/compute-sanitizer")

    monkeypatch.setattr(S, "sanitize", sanitize)

    def set_plan(plan: dict) -> None:
        state["outcomes"] = plan

    return set_plan


def test_cli_clean_run_exits_0(invoke, tree, fake_tool, tmp_path):
    res = invoke("sanitize", "transpose", "--variant", "naive,tiled-div", "--tool", "memcheck",
                 "--json", str(tmp_path / "rows.json"))
    assert res.exit_code == 0, res.output
    assert "naive" in res.output and "passed" in res.output and "skipped" in res.output
    data = json.loads((tmp_path / "rows.json").read_text())
    assert {r["status"] for r in data["rows"]} == {"passed", "skipped"}


def test_cli_finding_in_non_legacy_variant_exits_1(invoke, tree, fake_tool, tmp_path):
    fake_tool({("naive", "memcheck", "33"): (99, MEMCHECK_OOB)})
    res = invoke("sanitize", "transpose", "--variant", "naive", "--tool", "memcheck", "--log", str(tmp_path / "l"))
    assert res.exit_code == 1, res.output
    assert "Invalid __global__ write of size 4 bytes" in res.output and "findings" in res.output
    logs = sorted(p.name for p in (tmp_path / "l").iterdir())
    assert logs == ["transpose-naive-memcheck-33.log", "transpose-naive-memcheck-64.log"]


def test_cli_finding_in_legacy_variant_only_is_shown_not_failed(invoke, tree, fake_tool):
    fake_tool({("old", "racecheck", "64"): (99, RACECHECK_RACE)})
    res = invoke("sanitize", "transpose", "--variant", "old,naive", "--tool", "racecheck")
    assert res.exit_code == 0, res.output
    assert "legacy" in res.output and "Race reported" in res.output


def test_cli_sizes_from_the_command_line(invoke, tree, fake_tool):
    res = invoke("sanitize", "transpose", "--variant", "naive", "--tool", "synccheck", "--n", "128,100")
    assert res.exit_code == 0, res.output
    assert "128" in res.output and "100" in res.output and " 33 " not in res.output


def test_cli_takes_the_family_problem_options(invoke):
    res = CliRunner().invoke(cli, ["sanitize", "smem-rect", "--help"])
    assert res.exit_code == 0 and "--ipad" in res.output and "--print-limit" in res.output


def test_cli_warns_when_a_variant_never_ran(invoke, tree, fake_tool):
    res = CliRunner().invoke(cli, ["sanitize", "transpose", "--variant", "tiled-div", "--tool", "memcheck",
                                   "--n", "33"])
    assert res.exit_code == 0
    assert "tiled-div was skipped at every size" in res.output


def test_cli_missing_sanitizer_exit_2(invoke, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if Path("/usr/local/cuda/bin/compute-sanitizer").exists():
        pytest.skip("a real compute-sanitizer is installed in /usr/local/cuda")
    res = CliRunner().invoke(cli, ["sanitize", "transpose"])
    assert res.exit_code == 2
    assert "compute-sanitizer not found (looked on PATH, " in res.output
    assert "Traceback" not in res.output


def test_real_child_without_pycuda_is_a_one_line_refusal(tree):
    """The real child, bare (no tool): on a machine without pycuda it writes its refusal to the result file."""
    from cudalab.execute import toolchild as child

    try:
        import pycuda  # noqa: F401
    except ImportError:
        got = child.run_child(JOB.plan, [], 120)
        assert got.returncode == 2 and got.result is not None and "pycuda is not installed" in got.result.error
        row = S.judge(JOB, ChildRun(got.returncode, got.output + MEMCHECK_CLEAN, got.result))
        assert row.status == S.FAILED and "pycuda is not installed" in row.reason
    else:
        pytest.skip("pycuda is installed here")


def test_sanitize_package_imports_neither_click_nor_rich():
    code = "import sys, cudalab.sanitize; print(sorted(m for m in ('click', 'rich', 'pycuda') if m in sys.modules))"
    from cudalab.execute.toolchild import child_env

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=child_env()).stdout
    assert out.strip() == "[]"


def test_cli_interrupt_keeps_the_rows_so_far(invoke, tree, monkeypatch, tmp_path):
    calls = {"n": 0}
    inner = fake_run({})

    def run(argv, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return inner(argv, **kw)

    real = S.sanitize
    monkeypatch.setattr(S, "sanitize", lambda *a, **kw: real(*a, **kw, run=run, sanitizer="cs"))
    res = CliRunner().invoke(cli, ["sanitize", "transpose", "--variant", "naive", "--tool", "memcheck",
                                   "--json", str(tmp_path / "r.json")])
    assert res.exit_code == 130, res.output
    assert "INCOMPLETE" in res.output and "passed" in res.output
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["incomplete"] and len(data["rows"]) == 1


def test_plan_runs_add_kernels_alone_beside_the_built_ins():
    """An --add kernel is sanitized too: its own jobs, each running it alone (--variant none)."""
    from cudalab.catalog import user
    from cudalab.sanitize import driver

    k = user.parse_adds(("docs/examples/my_transpose.cu:my_transpose@block=32x8,tile=32x32",))
    req = RunRequest(family="transpose", variants="naive", n="64", add=tuple(k))
    jobs = driver.plan(req, ("memcheck",))
    assert [j.variant for j in jobs] == ["naive", "+my_transpose"]
    assert jobs[1].request.variants == "none" and [a.name for a in jobs[1].request.add] == ["+my_transpose"]
    assert not jobs[0].request.add


def test_sanitize_devices_spread_the_runs_one_per_gpu_at_a_time(tree):
    """--devices: each run goes to a GPU not busy with another, every GPU is used, rows keep the plan's order."""
    import threading
    import time

    busy: set[int] = set()
    seen: list[int] = []
    overlap: list[int] = []
    lock = threading.Lock()
    base = fake_run({})

    def run(argv, **kw):
        req = planning.Plan.from_dict(json.loads(Path(argv[-2]).read_text())).request
        with lock:
            if req.device in busy:
                overlap.append(req.device)
            busy.add(req.device)
            seen.append(req.device)
        time.sleep(0.05)
        res = base(argv, **kw)
        with lock:
            busy.discard(req.device)
        return res

    rows = S.sanitize(RunRequest(family="transpose", variants="naive,block"), ("memcheck", "racecheck"), run=run,
                      sanitizer="cs", devices=[0, 1])
    assert not overlap and set(seen) == {0, 1} and len(seen) == 8
    assert [(r.variant, r.tool, r.size) for r in rows] == [
        (j.variant, j.tool, j.size) for j in S.plan(RunRequest(family="transpose", variants="naive,block"),
                                                   ("memcheck", "racecheck"))]
