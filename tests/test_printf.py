"""A kernel's printf is its row's (#47 item 15): the worker sends fd 1 to a private file while rows run,
each row takes what it printed (a faulted row too), the table shows a few lines under the row and the
JSON keeps the text. CPU only: the fake kernels print through C stdio, as the driver does."""

from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fake_watch
from cudalab import plan as planning
from cudalab.errors import GpuError
from cudalab.records.results import PASSED, Result
from cudalab.report.runtable import results_table
from cudalab.worker import rowout
from cudalab.worker import serve as S
from test_runcore import FAST, FakeDevice, good_copy

_LIBC = ctypes.CDLL(None)
_BUF = ctypes.create_string_buffer(1 << 16)  # C stdout's buffer while these tests run (it must outlive them)


@pytest.fixture(autouse=True)
def buffered_c_stdout():
    """C stdout fully buffered, as in a worker whose fd 1 is a pipe or a file (PYTHONUNBUFFERED, set here,
    makes it unbuffered): only a flush puts printf's lines on fd 1, so a row that forgets one misses them."""
    stdout = ctypes.c_void_p.in_dll(_LIBC, "stdout")
    _LIBC.fflush(None)
    _LIBC.setvbuf(stdout, _BUF, 0, len(_BUF))  # _IOFBF, with a buffer (glibc keeps an unbuffered stream's)
    yield
    _LIBC.fflush(None)
    _LIBC.setvbuf(stdout, None, 2, 0)  # _IONBF: our buffer is not C's to keep


def printing(lines: int, then=good_copy):
    """A kernel that prints ``lines`` lines through C stdio (buffered: only a flush puts them on fd 1)."""
    def kernel(*args):
        for i in range(lines):
            _LIBC.printf(b"line %d of the kernel\n", ctypes.c_int(i))
        return then(*args)
    return kernel


class Chan:
    def __init__(self):
        self.got = []

    def send(self, **msg):
        self.got.append(msg)

    def rows(self):
        return {e["row"]["variant"]: Result.from_dict(e["row"]) for e in self.got if e["ev"] == "row"}


def point(dev, variants="naive,shared"):
    req = planning.RunRequest(family="copy", variants=variants, n="64", protocol=FAST, seed=3, roofline=False)
    chan = Chan()
    S.Worker(chan, dev, None).point(0, planning.precheck(req).to_dict())
    return chan


def _fd1():
    st = os.fstat(1)
    return st.st_dev, st.st_ino


def test_each_row_keeps_what_its_kernel_printed_and_fd_1_comes_back():
    before = _fd1()
    chan = point(FakeDevice({"copy_naive": printing(7), "copy_shared": good_copy}))
    rows = chan.rows()
    assert _fd1() == before  # the worker's fd 1 is its own again
    assert rows["naive"].status == PASSED
    text = rows["naive"].extra["stdout"]
    lines = text.splitlines()
    # every launch of the row printed its 7 lines, in order (warm-up, two verified launches, the samples)
    assert len(lines) >= 14 and len(lines) % 7 == 0 and lines[:2] == ["line 0 of the kernel", "line 1 of the kernel"]
    assert "stdout" not in rows["shared"].extra  # the next row printed nothing: none of the first's output


def test_a_row_that_faults_keeps_what_it_printed_before_the_worker_is_lost():
    class Faulting(FakeDevice):
        faulted = False

        def synchronize(self):  # a sticky error: every call after the fault fails
            if self.faulted:
                raise GpuError("an illegal memory access was encountered")

    dev = Faulting({})

    def crash(*args):
        for i in range(3):
            _LIBC.printf(b"before the fault %d\n", ctypes.c_int(i))
        dev.faulted = True
        raise GpuError("an illegal memory access was encountered")

    dev.kernels = {"copy_naive": crash, "copy_shared": good_copy}
    chan = Chan()
    req = planning.RunRequest(family="copy", variants="naive,shared", n="64", protocol=FAST, seed=3, roofline=False)
    with pytest.raises(S.ContextLost):
        S.Worker(chan, dev, None).point(0, planning.precheck(req).to_dict())
    row = chan.rows()["naive"]
    assert row.status.value == "failed"
    assert row.extra["stdout"].splitlines()[:3] == [f"before the fault {i}" for i in range(3)]


def test_output_past_the_limit_is_counted_not_kept():
    with rowout.RowOutput(limit=100) as cap:
        os.write(1, b"x" * 1000)
        row = cap.attach(Result(variant="v", kind="kernel", status=PASSED))
        assert cap.attach(row) is row  # nothing printed since: the row stays as it was
    assert row.extra["stdout"] == "x" * 100 and row.extra["stdout_dropped"] == 900


def test_the_table_shows_five_lines_under_the_row_and_counts_the_rest():
    text = "".join(f"line {i}\n" for i in range(2560))
    rows = [Result(variant="loud", kind="kernel", status=PASSED, extra={"stdout": text, "stdout_dropped": 12}),
            Result(variant="quiet", kind="kernel", status=PASSED, extra={"stdout": "\x1b[2Jhi\n"})]
    shown = results_table(rows, "bandwidth", wide=False).render_text(200).splitlines()
    loud = next(i for i, ln in enumerate(shown) if ln.startswith(" loud"))
    assert shown[loud + 1].strip() == "┆ printed 2,560 lines:"
    assert [ln.strip() for ln in shown[loud + 2:loud + 7]] == [f"┆ line {i}" for i in range(5)]
    assert shown[loud + 7].strip() == "┆ … 2,555 more lines: see --json"
    assert "12 bytes more" in shown[loud + 8]
    assert shown[loud + 9].startswith(" quiet")
    assert "┆ \\x1b[2Jhi" in shown[loud + 11]  # a kernel's printf is text cudalab did not write


@pytest.fixture
def fake_gpu(monkeypatch, inline_worker, tmp_path):
    fake_watch.install(monkeypatch.setattr)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_run_shows_a_kernels_2560_lines_capped_and_saves_them_all(fake_gpu, invoke, capfd):
    (fake_gpu / "loud.cu").write_text(
        '// PRINTF_LINES 2560\n#include <cstdio>\nextern "C" __global__ void loud(float *out, const float *in, int rows, '
        'int cols, int pin, int pout) { printf("%d\\n", threadIdx.x); }\n')
    res = invoke("transpose", "--n", "64", "--variant", "naive", "--add", "loud.cu:loud@block=32x8,tile=32x32",
                 "--json", "out.json")
    terminal = res.output + capfd.readouterr().out  # what the command printed and what reached fd 1
    assert res.exit_code == 0, terminal
    assert terminal.count("says hi") == 5, terminal  # the first lines under the row, not 2,560 of them
    assert "more lines: see --json" in terminal
    saved = json.loads((fake_gpu / "out.json").read_text())
    row = next(r for p in saved["points"] for r in p["results"] if r["variant"] == "+loud")
    lines = row["extra"]["stdout"].splitlines()
    assert len(lines) >= 2560 and len(lines) % 2560 == 0  # every launch's 2,560 lines, none lost
    assert lines[:2] == ["thread 0 says hi", "thread 1 says hi"] and lines[2559] == "last line"
    naive = next(r for p in saved["points"] for r in p["results"] if r["variant"] == "naive")
    assert "stdout" not in naive["extra"]


EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "my_printf.cu"


def test_the_printf_example_compiles(tmp_path):
    """docs/examples/my_printf.cu builds with the tile its command line gives (nvcc, no GPU)."""
    from cudalab.build import toolkit

    try:
        nvcc = toolkit.find_cuda_tool("nvcc", "nvcc", "")
    except Exception:
        pytest.skip("no nvcc")
    res = subprocess.run([nvcc, "-cubin", "-arch", "sm_90", "-DTILE_X=32", "-DTILE_Y=32", "-o",
                          str(tmp_path / "p.cubin"), str(EXAMPLE)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.gpu
def test_a_kernels_2560_lines_are_capped_on_the_terminal_and_all_in_the_json(tmp_path):
    """On a GPU, through a real worker: each launch of the example prints 2,560 lines; the terminal shows five
    of them under the row, the JSON holds every launch's 2,560."""
    out = tmp_path / "printf.json"
    res = subprocess.run([sys.executable, "-m", "cudalab", "transpose", "--n", "1024", "--variant", "naive",
                          "--add", f"{EXAMPLE}:my_printf@block=32x8,tile=32x32", "--min-samples", "1",
                          "--budget", "0.001", "--no-roofline", "--json", str(out)],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ, COLUMNS="160"))
    terminal = res.stdout + res.stderr
    assert res.returncode == 0, terminal
    printed = [ln for ln in terminal.splitlines() if re.fullmatch(r"\s*┆ \d+ \d+", ln)]
    assert len(printed) == 5, terminal
    assert "more lines: see --json" in terminal
    row = next(r for p in json.loads(out.read_text())["points"] for r in p["results"] if r["variant"] == "+my_printf")
    assert row["status"] == "passed", row["reason"]
    lines = row["extra"]["stdout"].splitlines()
    assert "stdout_dropped" not in row["extra"], row["extra"].get("stdout_dropped")
    assert len(lines) >= 2560 and len(lines) % 2560 == 0, len(lines)
    assert sorted(set(lines)) == sorted(f"{b} {t}" for b in range(10) for t in range(256))
    print(f"printf: {len(lines)} lines in the JSON ({len(lines) // 2560} launches); the terminal showed 5")
