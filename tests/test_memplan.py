"""The memory plan on the CPU: peaks, what the machine has, the largest size, one-line refusals."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from cudalab import memplan
from cudalab.worker import gpu
from cudalab.cli import cli
from cudalab.errors import OutOfMemoryError
from cudalab.families import load

MEMINFO = "MemTotal:       131072000 kB\nMemFree:          1000000 kB\nMemAvailable:     2097152 kB\n"


def test_host_available_reads_memavailable():
    assert memplan.host_available(MEMINFO) == 2097152 * 1024
    assert memplan.host_available("MemTotal: 1 kB\n") is None


def test_largest_n_fits_and_the_next_does_not():
    fam = load("transpose")
    host = 4 << 30
    n = memplan.largest_n(fam, "float32", {}, None, host)
    assert n is not None
    fits = memplan.plan(fam, fam.problem(str(n), None, "float32", {}), None, host)
    over = memplan.plan(fam, fam.problem(str(n + 1), None, "float32", {}), None, host)
    assert fits.host_fits and not over.host_fits


def test_device_side_refused_unless_forced_host_side_always():
    fam = load("copy")
    p = memplan.plan(fam, fam.problem("16384", None, "float32", {}), device_free=1 << 30, host_free=64 << 30)
    with pytest.raises(OutOfMemoryError, match=r"GPU memory: needs .* GiB, 1\.0+ GiB of GPU memory free.*--force"):
        memplan.check(p, largest=8000)
    memplan.check(p, largest=8000, force=True)  # the device side may be overridden
    small_host = memplan.plan(fam, fam.problem("16384", None, "float32", {}), None, host_free=1 << 30)
    with pytest.raises(OutOfMemoryError, match="host memory"):
        memplan.check(small_host, largest=8000, force=True)  # never the host side


def test_a_host_with_little_memory_refuses_before_any_gpu_is_opened(monkeypatch):
    monkeypatch.setattr(memplan, "host_available", lambda meminfo=None: 2 << 30)

    def no_gpu(*a, **k):
        raise AssertionError("the GPU was opened")

    monkeypatch.setattr(gpu, "Device", no_gpu)
    res = CliRunner().invoke(cli, ["transpose", "--n", "32k", "--variant", "naive"])
    assert res.exit_code == 2, res.output
    line = res.output.strip().splitlines()[-1]
    assert line.startswith("cudalab: ") and "host memory" in line and "the largest --n that fits is" in line
    largest = int(line.rsplit(" ", 1)[1])
    assert 1000 < largest < 32768


def test_matmul_counts_its_float64_reference():
    mm = load("matmul")
    p = mm.problem("4096", None, "float32", {"tile": 32})
    assert mm.host_bytes(p) > 3 * mm.work(p).bytes  # the float64 product and the check's temporaries


def test_largest_n_of_a_family_that_refuses_small_sizes_is_found():
    """``cudalab info`` showed '–' for a family whose validate refuses --n 1 (a scalar option's rule)."""
    from cudalab.problems import Output, Problem, ProblemFamily, Work

    def validate(s):
        if s.n < 1000 or s.n % 8:
            raise ValueError(f"--n must be a multiple of 8 of at least 1000 (got {s.n})")

    fam = ProblemFamily(Problem(dims=("n",), default=1024, inputs=lambda s, r: {}, outputs=(Output("y", lambda s: (s.n,)),),
                                reference=lambda s, i: None, args=(), work=lambda s: Work(), validate=validate))
    n = memplan.largest_n(fam, "float32", {}, None, 4 << 30)
    assert n is not None and n >= 1024 and n % 8 == 0
