"""The architecture as tests (docs/architecture.md draws it): the import contracts in pyproject.toml, no import
circles, a small top level, one plan per point, and no pycuda nor GPU-worker engine in the user's process for
any command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
from click.testing import CliRunner

from cudalab.cli import cli
from cudalab.records.results import load_record
from cudalab.session import sweep

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
RUNS = TESTS / "data" / "runs"


# --- the import contracts ---------------------------------------------------------------------------

def lint(root: Path, tmp: Path) -> subprocess.CompletedProcess:
    """lint-imports on the cudalab package under ``root`` (found first on the path) with the repository's
    contracts, in a fresh process (the import system finds the copy, not this checkout)."""
    code = ("import sys; from importlinter import cli; "
            f"sys.exit(cli.lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True, no_logo=True))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_hold(tmp_path):
    res = lint(ROOT, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "8 kept, 0 broken" in res.stdout


@pytest.mark.parametrize("module, line", [
    ("session/sweep.py", "import pycuda.driver  # a parent that loads the CUDA driver"),
    ("report/core.py", "from cudalab import ncu  # the tables knowing a tool"),
    ("families/copy.py", "from cudalab.worker import gpu  # a family reaching past its context"),
    ("plan.py", "import click  # a command-line library below the command line"),
    ("execute/local/drive.py", "from cudalab.session import sweep  # an engine reaching up into the run"),
    ("execute/dask/engine.py", "from cudalab.tuning import runs  # an engine reaching up into a campaign"),
    ("session/sweep.py", "from cudalab.execute.dask import engine  # the session picking an engine itself"),
    ("cli/family.py", "from cudalab.execute.dask.cluster import parse_cluster  # a command reading --cluster"),
    # issue 58: tune's Runs/ClusterRuns picked the engine themselves; the campaign runs on the interface now
    ("tuning/runs.py", "from cudalab.execute.dask.cluster import Cluster  # a campaign driving Dask itself"),
    ("tuning/prepare.py", "from cudalab.execute.dask.cluster import parse_cluster  # a campaign reading --cluster"),
    ("tuning/loops.py", "from cudalab.execute.local.drive import Session  # a campaign driving local workers itself"),
])
def test_a_forbidden_import_breaks_a_contract(tmp_path, module, line):
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "cudalab", copy / "cudalab", ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / "cudalab" / module
    path.write_text(path.read_text() + f"\n\ndef _bad():\n    {line}\n")  # inside a function: still an import
    res = lint(copy, tmp_path)
    assert res.returncode == 1 and "BROKEN" in res.stdout, res.stdout + res.stderr


def _worker_modules() -> list[str]:
    return sorted(f"cudalab.worker.{f.stem}" for f in (ROOT / "cudalab" / "worker").glob("*.py")
                  if f.stem not in ("__init__", "protocol")) + ["cudalab.worker"]


def test_the_parents_contract_forbids_every_worker_module_but_the_protocol(tmp_path):
    # issue 58: the contract listed worker modules one by one, and graphs, rowout and the package itself were
    # missing (planted imports of them read "kept"); one planted file imports all of them, each must be named
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "cudalab", copy / "cudalab", ignore=shutil.ignore_patterns("__pycache__"))
    mods = _worker_modules()
    (copy / "cudalab" / "session" / "planted.py").write_text("".join(f"import {m}\n" for m in mods))
    res = lint(copy, tmp_path)
    assert res.returncode == 1
    broken = {m for m in mods if f"cudalab.session.planted -> {m} " in res.stdout + " "
              or f"cudalab.session.planted -> {m}\n" in res.stdout}
    assert broken == set(mods), (set(mods) - broken, res.stdout[-3000:])
    (copy / "cudalab" / "session" / "planted.py").write_text("from cudalab.worker import protocol\n")
    assert lint(copy, tmp_path).returncode == 0  # the protocol is the one that crosses


# --- the shape of the package -------------------------------------------------------------------------

def test_no_import_circles_lazy_ones_included():
    """Tarjan's strongly connected components of the import graph (imports inside functions count; imports
    only a type checker reads do not run, so they do not)."""
    g = grimp.build_graph("cudalab", exclude_type_checking_imports=True, cache_dir=None)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.find_modules_directly_imported_by(v):
            if w not in g.modules or not w.startswith("cudalab"):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for m in sorted(g.modules):
        if m.startswith("cudalab") and m not in index:
            visit(m)
    assert not circles, circles


def test_the_top_level_has_at_most_20_modules():
    top = sorted(p.name for p in (ROOT / "cudalab").glob("*.py"))
    assert len(top) <= 20, top


# --- one plan per point ----------------------------------------------------------------------------

def test_each_point_is_planned_once_in_the_parent_and_never_in_the_worker(fake_workers, monkeypatch, tmp_path):
    fake_workers({})
    monkeypatch.setenv("FAKE_WORKER_NO_PLANNING", "1")  # the fake worker cannot plan: precheck is gone there
    calls = []
    real = sweep.precheck
    monkeypatch.setattr(sweep, "precheck", lambda req, strict=True: calls.append(req) or real(req, strict))
    out = tmp_path / "r.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "64,96", "--block", "32x8,16x16", "--variant", "naive,block",
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    rec = load_record(out)
    statuses = [r.status.value for _, r in rec.rows()]
    assert len(rec.points) == 4 and statuses.count("passed") >= 4 and set(statuses) <= {"passed", "skipped"}, statuses
    assert len(calls) == 4 and len({(r.n, r.block) for r in calls}) == 4


# --- the user's process, command by command -------------------------------------------------------

#: What each command's process sets up before it runs (fake workers, a fake NVML, a fake ncu or sanitizer).
PRELUDE = """
import atexit, json, os, signal, sys, threading
out, argv, setup = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from cudalab.execute.local import process as W
if setup != "gpu":  # the real workers and the real NVML on a GPU machine
    W.worker_argv = lambda device, fd, energy=False: [sys.executable, os.path.join({tests!r}, "fake_worker_main.py"),
                                                      "--fd", str(fd), "--device", str(device)]
if setup == "nvml":
    import fake_nvml
    sys.modules["pynvml"] = fake_nvml.FakeNVML()
elif setup == "ncu":
    import fake_tools
    from cudalab import ncu
    real = ncu.profile
    def profile(req, *a, **kw):
        rows = fake_tools.planned_rows(req)
        launches = [(*r.extra["launches"][0], {{"gpu__time_duration.sum": ("ns", "1000")}}) for r in rows
                    if r.kind == "kernel" and "launches" in r.extra]
        return real(req, *a, **kw, ncu="/opt/ncu", run=fake_tools.FakeRun(csv=fake_tools.ncu_csv(launches)))
    ncu.profile = profile
elif setup == "sanitize":
    import fake_tools
    from cudalab.sanitize import driver
    real = driver.sanitize
    clean = "========= COMPUTE-SANITIZER\\n========= ERROR SUMMARY: 0 errors\\n"
    driver.sanitize = lambda *a, **kw: real(*a, **kw, run=fake_tools.FakeRun(output=clean), sanitizer="/fake/cs")
    import cudalab.sanitize as S
    S.sanitize = driver.sanitize
elif setup == "watch":
    threading.Timer(4.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
sys.argv = ["cudalab", *argv]
from cudalab.main import main
main()
"""

COMMANDS = {
    "family run": (["transpose", "--n", "64", "--variant", "naive,block"], "", (0,)),
    "--exclusive": (["transpose", "--n", "64", "--variant", "naive", "--exclusive"], "nvml", (0,)),
    "--lock-clocks": (["transpose", "--n", "64", "--variant", "naive", "--lock-clocks", "1500"], "nvml", (0,)),
    "ncu FAMILY": (["ncu", "transpose", "--n", "64", "--variant", "block,bankopt", "--metrics", "time"], "ncu", (0, 1)),
    "sanitize FAMILY": (["sanitize", "transpose", "--n", "64", "--variant", "naive", "--tool", "memcheck"], "sanitize", (0,)),
    "watch": (["watch", "transpose", "--n", "64", "--variant", "naive", "--poll"], "watch", (0, 130)),
    "report": (["report", str(RUNS / "nvidia-h200-transpose.json")], "", (0,)),
    "compare": (["compare", str(RUNS / "nvidia-h200-transpose.json"),
                 str(RUNS / "nvidia-h100-80gb-hbm3-transpose.json")], "", (0, 1)),
    "list": (["list", "transpose"], "", (0,)),
    "compile": (["compile", "transpose", "--variant", "naive"], "", (0,)),
}


#: The same, on a GPU machine: real workers and the real NVML (root may lock clocks there).
GPU_COMMANDS = {
    "--exclusive on a GPU": (["transpose", "--n", "1024", "--variant", "naive,block", "--exclusive"], "gpu", (0,)),
    "--lock-clocks on a GPU": (["transpose", "--n", "1024", "--variant", "naive,block", "--lock-clocks", "1500"], "gpu",
                               (0,)),
}


@pytest.mark.parametrize("name", list(COMMANDS) + [pytest.param(n, marks=pytest.mark.gpu) for n in GPU_COMMANDS])
def test_no_command_loads_pycuda_or_the_worker_engine_in_the_users_process(name, tmp_path, request):
    if name == "--exclusive on a GPU":
        request.getfixturevalue("gpu_alone")  # --exclusive refuses a GPU other test processes compute on
    argv, setup, codes = {**COMMANDS, **GPU_COMMANDS}[name]
    out = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k not in ("CUDALAB_PATH", "CUDALAB_SRC")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TESTS), env.get("PYTHONPATH", "")])
    env["FAKE_WORKER"] = "{}"
    env["COLUMNS"] = "160"
    proc = subprocess.run([sys.executable, "-c", PRELUDE.format(tests=str(TESTS)), str(out), json.dumps(argv), setup],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
                          start_new_session=True)  # its signals (watch's Ctrl-C) stay in its own group
    assert proc.returncode in codes, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    modules = json.loads(out.read_text())
    engine = [m for m in modules if m == "pycuda" or m.startswith("pycuda.")
              or (m.startswith("cudalab.worker.") and m != "cudalab.worker.protocol")]
    assert not engine, engine
    if name in ("family run", "--exclusive", "--lock-clocks", *GPU_COMMANDS):  # the workers did run the points
        assert "passed" in proc.stdout or "✓" in proc.stdout, proc.stdout


# --- one Problem, one size type ------------------------------------------------------------------------

def test_one_size_type_for_both_forms_and_the_old_name_warns():
    import cudalab
    from cudalab import families
    from cudalab.families import Size
    from cudalab.families import model

    assert cudalab.Size is Size and cudalab.Problem is not Size  # cudalab.Problem: the simple form's problem
    with pytest.warns(DeprecationWarning, match="cudalab.families.Size"):
        old = families.Problem
    with pytest.warns(DeprecationWarning):
        assert model.Problem is Size
    s = old(dims=(3, 5), dtype="float32", options=(("bins", 7),))  # the advanced form's old call still works
    assert s == Size(dims=(3, 5), dtype="float32", options=(("bins", 7),)) and s.label == "3x5"
    named = Size(("rows", "cols"), (3, 5), "float32", (("bins", 7),))  # the simple form's, positional
    assert (named.rows, named["cols"], named.bins, named.elements) == (3, 5, 7, 15)
    assert Size.from_dict(dict(named.to_dict(), names=list(named.names))) == named


@pytest.mark.parametrize("family", ["copy", "transpose", "reduce", "matmul", "gemm", "gemv", "hgemm", "sort",
                                    "search", "smem-square", "smem-rect"])
def test_a_plan_reads_back_as_the_same_plan_in_the_worker(family):
    """What the worker gets is what the parent planned: the same request, rows and size, of the family's own
    size type (hgemm's bfloat16 size answers uint16; read back as a plain Size it broke every hgemm row)."""
    from cudalab import plan as planning

    dtypes = {"hgemm": "bfloat16"}
    p = planning.precheck(planning.RunRequest(family=family, dtype=dtypes.get(family)), strict=False)
    back = planning.Plan.from_dict(json.loads(json.dumps(p.to_dict())))
    assert back == p and type(back.problem) is type(p.problem)
    assert back.problem.np_dtype == p.problem.np_dtype
