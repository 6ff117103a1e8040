"""What a command costs before the GPU does anything (issues 28 and 32): the catalog is parsed once a
process, ``cudalab --help`` and ``cudalab list`` import neither NumPy, pycuda, rich nor a family module,
and ``cudalab.run`` and the command line build their runs through one path."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import cudalab
from cudalab.catalog import folder
from cudalab import catalog, report
from cudalab.session import sweep
from cudalab.cli import basic, cli, plain

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def parses(monkeypatch):
    """Counts ``tomllib.loads`` calls of the catalog by text (each family.toml's text is its own), from a
    cold start: nothing parsed before in this process."""
    seen: collections.Counter = collections.Counter()

    def loads(text: str) -> dict:
        seen[text] += 1
        return tomllib.loads(text)

    catalog.clear_cache()
    monkeypatch.delenv("CUDALAB_PATH", raising=False)
    monkeypatch.delenv("CUDALAB_SRC", raising=False)
    monkeypatch.setattr(folder, "tomllib", SimpleNamespace(loads=loads, TOMLDecodeError=tomllib.TOMLDecodeError))
    yield seen
    catalog.clear_cache()


def test_each_family_toml_is_parsed_once_per_process(parses, fake_workers, tmp_path):
    fake_workers({})
    out = tmp_path / "run.json"
    # the parent's side of a single-variant run: command line, precheck, workers, rows, record, table
    res = CliRunner().invoke(cli, ["transpose", "--variant", "bankopt", "--n", "256", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "bankopt" in json.loads(out.read_text())["points"][0]["results"][0]["variant"]
    for args in (["list"], ["list", "transpose"], ["--help"], ["transpose", "--help"]):
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 0, res.output
    files = sorted(catalog.src_root().glob("*/family.toml"))
    assert len(files) >= 10 and len(parses) == len(files)
    assert set(parses.values()) == {1}, {t.splitlines()[1]: n for t, n in parses.items() if n > 1}


def test_an_edited_family_toml_is_parsed_again(parses, tmp_path):
    root = tmp_path / "src"
    (root / "copy").mkdir(parents=True)
    toml = (catalog.src_root() / "copy" / "family.toml").read_text()
    for cu in (catalog.src_root() / "copy").glob("*.cu"):
        (root / "copy" / cu.name).write_text(cu.read_text())
    (root / "copy" / "family.toml").write_text(toml)
    assert catalog.load_catalog(root)["copy"].description == catalog.load_catalog(root)["copy"].description
    assert sum(parses.values()) == 1
    (root / "copy" / "family.toml").write_text(toml.replace('description = "', 'description = "edited: ', 1))
    assert catalog.load_catalog(root)["copy"].description.startswith("edited: ")
    assert sum(parses.values()) == 2
    for cu in (root / "copy").glob("*.cu"):  # the text unchanged, a kernel gone: refused as a fresh read would be
        cu.unlink()
    assert "copy" not in catalog.load_catalog(root) and "not found" in catalog.load_catalog(root).broken_reason("copy")


def test_one_command_reads_its_catalog_once(monkeypatch):
    reads = []
    real = catalog._read_catalog
    monkeypatch.setattr(catalog, "_read_catalog", lambda root: reads.append(root) or real(root))
    with catalog.held():
        a, b = catalog.load_catalog(), catalog.load_catalog()
        catalog.family("transpose")
    assert a is b and len(reads) == 1
    catalog.load_catalog()  # outside a command: the folders are looked at again
    assert len(reads) == 2


def test_a_run_reads_the_host_facts_once_not_once_a_row(fake_workers, tmp_path, monkeypatch):
    from cudalab.records import machine

    calls = []
    real = machine.facts
    monkeypatch.setattr(machine, "facts", lambda: calls.append(1) or real())  # git and package versions: ~20 ms
    fake_workers({})
    out = tmp_path / "run.json"
    res = CliRunner().invoke(cli, ["reduce", "--n", "1k", "--variant", "interleaved,unrolling2,unrolling4",
                                   "--json", str(out), "--csv", str(tmp_path / "run.csv")])
    assert res.exit_code == 0, res.output
    rec = json.loads(out.read_text())
    assert len(rec["points"][0]["results"]) == 3 and rec["machine"]["python"]
    assert len(calls) == 1


# --- cudalab.run and the command line: one path ------------------------------------------------------

def test_the_api_and_the_command_line_build_the_same_requests(monkeypatch):
    got = []

    def execute(plans, total, executor):
        got.append(([p.request for p in plans], total, [s.device for s in executor.session.slots],
                    executor.session.timeout))
        return sweep.Executed([], True, {}, 130)

    monkeypatch.setattr(sweep, "execute", execute)
    # --exclusive and --lock-clocks: no worker starts before execute (it asks NVML first)
    res = CliRunner().invoke(cli, [
        "matmul", "--variant", "naive,tiled", "--n", "64,96", "--block", "16x16", "--dtype", "float32", "--seed", "7",
        "--budget", "0.2", "--min-samples", "4", "--hot", "--no-roofline", "--energy", "--exclusive",
        "--lock-clocks", "1200", "--force", "-D", "X=1,2", "--tile", "8,16", "--timeout", "5", "--quiet"])
    assert res.exit_code == 130, res.output
    rec = cudalab.run("matmul", ["naive", "tiled"], n=[64, 96], block=(16, 16), dtype="float32", seed=7, budget=0.2,
                      min_samples=4, hot=True, roofline=False, energy=True, exclusive=True, lock_clocks=1200,
                      force=True, defines={"X": [1, 2]}, tile=[8, 16], timeout=5)
    assert rec.points == () and len(got) == 2
    assert got[0] == got[1]
    reqs = got[0][0]
    assert len(reqs) == 8 and {r.n for r in reqs} == {"64", "96"} and {dict(r.options)["tile"] for r in reqs} == {8, 16}
    r = reqs[0]
    assert (r.protocol.energy_s, r.exclusive, r.lock_clocks, r.force, r.roofline, r.protocol.flush_l2) == \
        (1.0, True, 1200, True, False, False)
    assert dict(r.defines)["X"] in ("1", "2") and r.seed == 7 and got[0][2:] == ([0], 5.0)
    assert got[0][1] == 8 * 2  # rows in all: the plans' variants


def test_the_api_refuses_an_option_the_family_lacks_as_the_command_line_does():
    with pytest.raises(cudalab.UsageError, match="no option 'tiles'; valid: tile, example"):
        cudalab.run("matmul", n=64, tiles=8)
    with pytest.raises(cudalab.UsageError, match="-D"):
        cudalab.run("transpose", n=64, defines={"BAD NAME": 1})


# --- fast commands -------------------------------------------------------------------------------------

#: Modules `cudalab --help` and `cudalab list` must not import: each costs 40-200 ms a command.
HEAVY = ("numpy", "pycuda", "rich", "cudalab.families", "cudalab.worker.executor", "cudalab.report", "cudalab.execute.local.drive",
         "cudalab.session.run", "cudalab.session.sweep",
         "importlib.metadata")


@pytest.mark.parametrize("args", [["--help"], ["list"], ["ncu", "--help"]])
def test_help_and_list_import_nothing_heavy(args, tmp_path):
    # only what the command imports: a site hook of this Python's own (a .pth) is not the command's doing
    code = ("import atexit, json, sys\n"
            "before = set(sys.modules)\n"
            f"atexit.register(lambda: open({str(tmp_path / 'mods.json')!r}, 'w').write(json.dumps(sorted(set(sys.modules) - before))))\n"
            f"sys.argv = ['cudalab', *{args!r}]\n"
            "from cudalab.main import main\n"
            "main()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDALAB_PATH", "CUDALAB_SRC")}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "transpose" in proc.stdout
    mods = json.loads((tmp_path / "mods.json").read_text())
    heavy = [m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert not heavy, heavy


@pytest.mark.parametrize("width", [40, 72, 100, 160, 400])
def test_the_plain_list_table_is_the_report_grids(width):
    rows, _ = basic.list_rows(catalog.load_catalog())
    want = report.simple_table(list(basic.LIST_COLUMNS), rows, title=basic.LIST_TITLE, wrap=basic.LIST_WRAP)
    assert plain.render(basic.LIST_COLUMNS, rows, width, basic.LIST_TITLE, basic.LIST_WRAP) == want.render_text(width)
    odd = [("a", "1", "x – y ✓ z"), ("bb", "2,048", "wrapped words here and there"), ("c", "–", "")]
    want = report.simple_table(["name", "n", "note"], odd).render_text(width)
    assert plain.render(["name", "n", "note"], odd, width) == want


def test_plain_tables_are_bold_on_a_terminal_only():
    text = plain.render(["a", "b"], [("1", "x")], 80, color=True)
    assert "\x1b[1ma\x1b[0m" in text and "\x1b" not in plain.render(["a", "b"], [("1", "x")], 80)
