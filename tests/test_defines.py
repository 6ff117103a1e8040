"""-D values and family.toml expressions: evaluated safely, refused before any GPU work in one line
(CPU only; nvcc not needed)."""

from __future__ import annotations

import pytest

from cudalab import plan as planning
from cudalab import catalog
from cudalab.build.defines import parse_defines
from cudalab.errors import CatalogError, UsageError
from cudalab.catalog.expr import evaluate


@pytest.mark.parametrize("text, fragment", [
    ("1/0", "division by zero"), ("1%0", "division by zero"), ("block_y // (block_x - 32)", "division by zero"),
    ("2**2**40", "exponent"), ("2**-1", "exponent"), ("99999999999999999999", "64 bits"),
    ("(" * 300 + "1" + ")" * 300, "not valid"), ("9" * 5000, "longer than 1000"),
])
def test_evaluate_refuses_in_one_line_never_raises_python_errors(text, fragment):
    with pytest.raises(CatalogError, match=fragment) as exc:
        evaluate(text, {"block_x": 32, "block_y": 8})
    assert len(str(exc.value)) < 200 and "\n" not in str(exc.value)


def test_evaluate_still_does_integer_arithmetic():
    assert evaluate("(block_x + 1) * block_y / 2 % 7 ** 2", {"block_x": 32, "block_y": 8}) == 132 % 49


@pytest.mark.parametrize("define, fragment", [
    ("ROWS=0", "-D ROWS=0: tiled-32x8's ROWS is block_y, a tile size or loop stride; it must be at least 1"),
    ("ROWS=-8", "must be at least 1"), ("ROWS=0u", "must be at least 1"), ("TILE=1-1", "must be at least 1"),
    ("TILE=0x0", "must be at least 1"),
    ("X=1/0", "-D X=1/0: division by zero"),  # a macro no kernel uses is still evaluated safely
    ("TILE=1%0", "division by zero"), ("ROWS=8,0", "must be at least 1"),
])
def test_defines_the_kernels_cannot_run_are_refused_with_the_rule(define, fragment):
    with pytest.raises(UsageError) as exc:
        parse_defines((define,), catalog.family("transpose"))
    assert fragment in str(exc.value)


def test_defines_that_can_run_pass():
    spec = catalog.family("transpose")
    assert parse_defines(("ROWS=4", "TILE=64", "X=float", "ROWS=block_y / 2", "UNROLL=2,4"), spec)
    smem = catalog.family("smem-square")
    assert parse_defines(("IPAD=0",), smem) == (("IPAD", "0"),)  # padding may be 0, not negative
    with pytest.raises(UsageError, match="IPAD=-1: .* a count or padding .* at least 0"):
        parse_defines(("IPAD=-1",), smem)


@pytest.mark.parametrize("args, fragment", [
    (["compile", "transpose", "-D", "ROWS=0"], "ROWS is block_y, a tile size or loop stride"),
    (["compile", "transpose", "-D", "X=1/0"], "-D X=1/0: division by zero"),
    (["transpose", "-D", "ROWS=0", "--n", "64"], "it must be at least 1"),
    (["transpose", "-D", "TILE=1%0"], "division by zero"),
    (["ncu", "transpose", "-D", "ROWS=0"], "it must be at least 1"),
    (["sanitize", "transpose", "-D", "ROWS=-1"], "it must be at least 1"),
    (["transpose", "--budget", "nan"], "Invalid value for '--budget': 'nan' must be a positive number"),
    (["transpose", "--budget", "inf"], "must be a positive number of seconds"),
    (["transpose", "--seed", "-1"], "Invalid value for '--seed': -1 is not in the range"),
    (["transpose", "--bogus"], "No such option '--bogus' (see 'cli transpose --help')"),
    (["report"], "Missing argument 'RUN.json'"),
])
def test_refused_while_parsing_in_one_line(invoke, one_line_exit_2, no_gpu, args, fragment):
    one_line_exit_2(invoke(args), fragment)


def test_an_override_that_is_zero_for_one_launch_is_refused_by_the_planner():
    """-D ROWS=block_y-8 passes the parser (it names the launch) but is 0 at block 32x8: the planner, which
    every run, the Python API and compile go through, refuses it before anything is built."""
    from cudalab import launch as L
    from cudalab.worker import executor as runner
    from cudalab.families import load

    spec = catalog.family("transpose")
    fam = load(spec.module)
    problem = planning.make_problem(spec, fam, planning.RunRequest(family="transpose"))
    v = spec.variant("tiled-32x8")
    with pytest.raises(UsageError, match=r"-D ROWS=0 for this launch: tiled-32x8's ROWS is block_y.* at least 1"):
        planning.plan_launch(v, fam, problem, None, None, L.DeviceLimits(), (("ROWS", "block_y - 8"),))
    ok = planning.plan_launch(v, fam, problem, None, None, L.DeviceLimits(), (("ROWS", "block_y / 2"),))
    assert dict(ok.defines)["ROWS"] == "4"
    naive = spec.variant("naive")  # a variant without ROWS takes the macro and ignores it
    assert planning.plan_launch(naive, fam, problem, None, None, L.DeviceLimits(), (("ROWS", "0"),))
