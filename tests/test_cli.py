"""The command line on a machine without a GPU: version, help, list, compile, the no-GPU path,
import hygiene (no pycuda at import), and atomic result files."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudalab import __version__, catalog, report
from cudalab.cli import cli

ROOT = Path(__file__).resolve().parent.parent
HAVE_PYCUDA = importlib.util.find_spec("pycuda") is not None


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return e


def test_version(invoke):
    res = invoke("--version")
    assert res.exit_code == 0 and __version__ in res.output and "cudalab" in res.output


def test_help_lists_fixed_commands_and_every_family(invoke):
    res = invoke("--help")
    assert res.exit_code == 0
    for name in ["list", "info", "compile", "sanitize", *catalog.load_catalog()]:
        assert f"  {name}" in res.output, name
    assert invoke("-h").output == res.output


def test_python_dash_m():
    proc = subprocess.run([sys.executable, "-m", "cudalab", "--version"], capture_output=True, text=True,
                          env=env(), cwd=ROOT)
    assert proc.returncode == 0 and __version__ in proc.stdout


@pytest.mark.parametrize("args", [["report", "tests/data/runs/nvidia-h200-transpose.json"], ["list", "transpose"]])
def test_a_terminal_that_cannot_show_unicode_gets_question_marks_not_a_traceback(args):
    proc = subprocess.run([sys.executable, "-m", "cudalab", *args], capture_output=True, env=env() | {"PYTHONIOENCODING": "ascii"},
                          cwd=ROOT)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr and proc.stdout.isascii() and b"transpose" in proc.stdout


def test_list_families(invoke):
    res = invoke("list")
    assert res.exit_code == 0
    for name, spec in catalog.load_catalog().items():
        assert name in res.output


def test_piped_tables_carry_no_padding_at_line_ends():
    # a real pipe (not click's runner): rich pads each table line to its widest cell
    out = subprocess.run([sys.executable, "-m", "cudalab", "list"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert "copy" in out and len(lines) > 5
    assert not [ln for ln in lines if ln != ln.rstrip()]


def test_list_transpose_shows_variants_and_rules(invoke):
    res = invoke("list", "transpose")
    assert res.exit_code == 0
    for v in catalog.family("transpose").variants:
        assert v.name in res.output
    assert "32x8" in res.output and "transpose_block" in res.output


@pytest.mark.nvcc
def test_compile_transpose_with_real_nvcc(invoke):
    res = invoke("compile", "transpose")
    assert res.exit_code == 0, res.output
    assert "registers" in res.output
    for v in catalog.family("transpose").variants:
        if v.kind == "kernel":
            assert v.name in res.output


def test_import_does_not_load_pycuda_even_building_every_family_command():
    code = (
        "import sys, click\n"
        "from cudalab.cli import cli\n"
        "ctx = click.Context(cli, info_name='cudalab')\n"
        "for name in cli.list_commands(ctx):\n"
        "    cmd = cli.get_command(ctx, name)\n"
        "    cmd.get_help(click.Context(cmd, info_name=name, parent=ctx))\n"
        "print('pycuda' in sys.modules, any(m.startswith('pycuda') for m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env(), cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]


@pytest.mark.skipif(HAVE_PYCUDA, reason="pycuda is installed here")
def test_family_command_without_gpu_is_one_clear_line():
    proc = subprocess.run([sys.executable, "-m", "cudalab", "transpose"], capture_output=True, text=True,
                          env=env(), cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cudalab: pycuda is not installed") and "pip install" in lines[0]


# --- no lost results ---------------------------------------------------------------------------

class Boom:
    """Serialises halfway, then fails (json.dumps calls default=str on it)."""

    def __str__(self):
        raise RuntimeError("disk full, say")


def test_atomic_write_keeps_the_old_file_when_serialisation_fails(tmp_path):
    path = tmp_path / "run.json"
    report.write_json(path, {"rows": [1, 2, 3]})
    before = path.read_text()
    with pytest.raises(RuntimeError, match="disk full"):
        report.write_json(path, {"rows": [4, 5], "bad": Boom()})
    assert path.read_text() == before
    assert json.loads(before) == {"rows": [1, 2, 3]}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left behind


def test_atomic_write_keeps_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "rows.csv"
    report.atomic_write(path, "old\n")

    def failing_replace(src, dst):
        raise OSError("rename failed")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        report.atomic_write(path, "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["rows.csv"]


def test_atomic_write_on_interrupt(tmp_path):
    path = tmp_path / "r.json"
    report.atomic_write(path, "{}\n")

    class Interrupt:
        def __str__(self):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        report.write_json(path, {"x": Interrupt()})
    assert path.read_text() == "{}\n" and len(list(tmp_path.iterdir())) == 1


# --- interrupted runs keep what was measured ------------------------------------------------------

@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_interrupted_run_keeps_rows_marks_incomplete_and_frees_the_gpu(fake_workers, tmp_path, signal_name):
    import signal as sig

    before = sig.getsignal(sig.SIGTERM)
    use = fake_workers({"shared": signal_name.lower()})  # the signal comes while the second row runs
    out = tmp_path / "partial.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "64", "--variant", "naive,shared", "--json", str(out)])
    assert res.exit_code == (130 if signal_name == "SIGINT" else 143), res.output
    assert "INCOMPLETE" in res.output and "naive" in res.output
    data = json.loads(out.read_text())
    assert data["schema_version"] == 2
    assert data["incomplete"] is True and [r["variant"] for r in data["points"][0]["results"]] == ["naive"]
    assert use.started[0].proc.poll() is not None  # the worker (and its GPU context) is gone
    assert sig.getsignal(sig.SIGTERM) is before  # the previous handler is back


def test_compile_takes_block_dtype_and_defines():
    res = CliRunner().invoke(cli, ["compile", "reduce", "--variant", "complete-unroll", "--dtype", "float32",
                                   "--block", "256"])
    assert res.exit_code == 0, res.output
    assert "BLOCK=256" in res.output and "ELEM_T=float" in res.output
    res = CliRunner().invoke(cli, ["compile", "transpose", "--variant", "tiled-32x8", "-D", "ROWS=4"])
    assert res.exit_code == 0 and "ROWS=4" in res.output, res.output
