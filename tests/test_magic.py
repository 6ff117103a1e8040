"""The notebook magics and the run record's notebook display, on the CPU: the cell's kernels found and
turned into ``--add`` rows, the magic line parsed, the cell run on the fake GPU (tests/fake_watch.py) in
an IPython shell, and the example notebook executed headless by nbclient on that fake GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import fake_watch
from cudalab import magic
from cudalab.errors import UsageError
from cudalab.records.results import RunRecord, load_record

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "data" / "runs" / "nvidia-h200-transpose.json"
CELL = """// tiled through __shared__ memory
extern "C" __global__ void my_transpose(float *out, const float *in, int rows, int cols, int pin, int pout)
{ out[0] = in[0]; }
"""


def test_the_cells_extern_c_global_kernels_are_found():
    src = """
    // extern "C" __global__ void commented_out(float *x) {}
    /* extern "C" __global__ void also_commented(float *x) {} */
    extern "C" __global__ void a(float *x) {}
    extern "C" __global__ __launch_bounds__(256) void b(float *x) {}
    extern "C" __launch_bounds__(128, 2) __global__ void c(float *x) {}
    __global__ void mangled(float *x) {}
    extern "C" __device__ void helper(float *x) {}
    extern "C" __global__ void
        d (float *x) {}
    extern "C" __global__ void a(float *x);
    """
    assert magic.cell_kernels(src) == ["a", "b", "c", "d"]


def test_the_magic_line_its_output_name_and_kernel_options():
    args, out, opts = magic.parse_line("transpose --n 4096 --variant bankopt @block=32x8,tile=32x32 -o rec")
    assert args == ["transpose", "--n", "4096", "--variant", "bankopt"] and out == "rec"
    assert opts == ["block=32x8,tile=32x32"]
    assert magic.parse_line("reduce -ored")[1] == "red"
    with pytest.raises(UsageError, match="needs a variable name"):
        magic.parse_line("transpose -o")
    # a value that is no Python name is the command's own -o (roofline's chart file), passed on
    assert magic.parse_line("roofline run.json -o chart.svg") == (["roofline", "run.json", "-o", "chart.svg"], None, [])
    assert magic.parse_line("roofline a.json --out c.html -o rec")[:2] == (["roofline", "a.json", "--out", "c.html"],
                                                                           "rec")
    with pytest.raises(UsageError, match="No closing quotation"):
        magic.parse_line("transpose --n '4096")


def test_each_kernel_becomes_an_add_with_the_lines_options_and_its_own():
    p = Path("/tmp/cell.cu")
    assert magic.add_texts(p, ["a", "b"], ["block=32x8", "b:tile=32x32,grid=sm:4"]) == [
        "/tmp/cell.cu:a@block=32x8", "/tmp/cell.cu:b@block=32x8,tile=32x32,grid=sm:4"]
    assert magic.add_texts(p, ["a"], []) == ["/tmp/cell.cu:a"]
    assert magic.add_texts(p, ["a"], ["grid=sm:4"]) == ["/tmp/cell.cu:a@grid=sm:4"]  # ':' in a value is no kernel
    with pytest.raises(UsageError, match="'zz', which is not a kernel of the cell"):
        magic.add_texts(p, ["a"], ["zz:block=32"])


def test_a_cell_is_saved_once_under_its_hash():
    a, b = magic.cell_file(CELL), magic.cell_file(CELL)
    assert a == b and a.read_text() == CELL and a.name.startswith("my_transpose-")
    assert magic.cell_file(CELL + "\n") != a


def test_the_record_shows_as_its_tables_in_a_notebook():
    rec = load_record(RUN)
    html = rec._repr_html_()
    assert html.startswith("<pre") and "vec4-band" in html and "color: #008000" in html  # ✓ passed, in green
    assert "&lt; 1%" in html  # escaped
    shown = []

    class Printer:
        def text(self, t):
            shown.append(t)

    rec._repr_pretty_(Printer(), False)
    assert "vec4-band" in shown[0] and "±" in shown[0]
    assert len(shown[0]) < 5000  # the table, not every raw sample


@pytest.fixture
def shell(monkeypatch, inline_worker, tmp_path):
    IPython = pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    fake_watch.install(monkeypatch.setattr)
    monkeypatch.chdir(tmp_path)
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "cudalab")
    assert IPython is not None
    return sh


def test_a_cell_runs_its_kernel_beside_the_family_and_keeps_the_record(shell, capsys):
    shell.run_cell_magic("cudalab", "transpose --n 64 --variant naive @block=32x8,tile=32x32 -o rec", CELL)
    rec = shell.user_ns["rec"]
    assert isinstance(rec, RunRecord)
    rows = {r.variant: r for r in rec.points[0].results}
    assert rows["+my_transpose"].status.value == "passed" and rows["+my_transpose"].block == "32x8"
    assert rows["+my_transpose"].median_ms == pytest.approx(0.4) and rows["naive"].median_ms == pytest.approx(1.0)
    assert rec.command[:2] == ("cudalab", "transpose")  # what was run, as it is recorded
    out = capsys.readouterr().out
    assert "+my_transpose" in out and "2.50×" in out  # shown once, as the record's table
    assert out.count("+my_transpose  32x8") == 1


def test_a_cell_whose_kernel_does_not_compile_is_a_row_with_nvccs_log(shell, capsys):
    shell.run_cell_magic("cudalab", "transpose --n 64 --variant naive -o bad", CELL.replace("memory", "memory, a typo"))
    rows = {r.variant: r for r in shell.user_ns["bad"].points[0].results}
    assert rows["+my_transpose"].status.value == "failed" and rows["naive"].status.value == "passed"
    assert 'error: expected a ";"' in capsys.readouterr().err


def test_line_magics_run_any_command_and_refuse_in_one_line(shell, capsys):
    shell.run_line_magic("cudalab", "list transpose")
    assert "Your own kernel" in capsys.readouterr().out
    shell.run_line_magic("cudalab", "transpose --n 64 --variant naive -o r2")
    assert shell.user_ns["r2"].points[0].results[0].variant == "naive"
    capsys.readouterr()
    for line, fragment in [("", "needs a command"), ("watch transpose", "run it in a terminal"),
                           ("transpose --n 64 --json", "--json needs a file name"),
                           ("list -o x", "makes none"), ("transpose --n lots", "--n 'lots'"),
                           ("nosuch", "No such command")]:
        shell.run_line_magic("cudalab", line)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("cudalab: ") and fragment in err[0], (line, err)
    shell.run_cell_magic("cudalab", "transpose --n 64", "__global__ void k(float *x) {}")
    assert "defines no extern \"C\" __global__ kernel" in capsys.readouterr().err
    shell.run_cell_magic("cudalab", "list", CELL)
    assert "'list' is no family" in capsys.readouterr().err


def test_the_example_notebook_runs_headless(tmp_path):
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    import nbformat

    out = tmp_path / "executed.ipynb"
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "run_notebook.py"),
                          str(ROOT / "docs" / "notebook" / "cudalab-magic.ipynb"), str(out), "--fake",
                          "--cwd", str(tmp_path), "--timeout", "120"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    nb = nbformat.read(out, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source == "%load_ext cudalab"  # the fake's set-up cell is not kept
    cell = next(c for c in code if c.source.startswith("%%cudalab transpose"))
    html = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
    assert "+my_transpose" in html and "bankopt" in html
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]


def test_without_a_gpu_a_cell_shows_the_error_never_the_old_json_nor_binds_it(shell, capsys, fake_workers, tmp_path):
    fake_workers({"_open": "error"})
    old = tmp_path / "old.json"
    old.write_bytes(RUN.read_bytes())
    shell.user_ns.pop("rec", None)
    shell.run_cell_magic("cudalab", f"transpose --n 64 --variant naive --json {old} -o rec", CELL)
    out = capsys.readouterr()
    assert "no CUDA GPU found (fake)" in out.err
    assert "vec4-band" not in out.out + out.err  # old.json's table is not shown
    assert "rec" not in shell.user_ns
    assert old.read_bytes() == RUN.read_bytes()
    shell.run_line_magic("cudalab", f"transpose --n 64 --variant naive --json={old} -o rec")
    assert "vec4-band" not in capsys.readouterr().out and "rec" not in shell.user_ns
