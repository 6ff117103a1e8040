"""``cudalab matmul --example``: the course's 9x9 exercise (no GPU needed for the problem and inputs)."""

from __future__ import annotations

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import launch as L
from cudalab.catalog import family
from cudalab.errors import UsageError
from cudalab.families import load

MOD = load("matmul")


def test_example_problem_forces_n9_tile3():
    p = MOD.problem(None, None, "float32", {"tile": 32, "example": True})
    assert p.dims == (9, 9, 9) and p.opt("tile") == 3 and p.opt("example") is True
    assert MOD.problem("9", None, "float32", {"tile": 3, "example": True}) == p
    with pytest.raises(UsageError, match="--example"):
        MOD.problem("16", None, "float32", {"tile": 32, "example": True})
    with pytest.raises(UsageError, match="--example"):
        MOD.problem(None, "9x9x9", "float32", {"tile": 32, "example": True})
    with pytest.raises(UsageError, match="tile"):
        MOD.problem(None, None, "float32", {"tile": 8, "example": True})
    assert MOD.problem("9", None, "float32", {"tile": 32, "example": False}).opt("tile") == 32


def test_example_inputs_and_show():
    p = MOD.problem(None, None, "float32", {"tile": 32, "example": True})
    inp = MOD.make_inputs(p, np.random.default_rng())
    i, j = np.indices((9, 9))
    assert np.array_equal(inp["a"], 9 * i + j) and np.array_equal(inp["b"], 2 * (9 * i + j))
    assert inp["a"].dtype == np.float32
    ref = MOD.reference(p, inp)
    assert ref[0, 0] == 2 * sum(k * 9 * k for k in range(9))
    text = MOD.show(p, inp, None)
    assert "A (9x9)" in text and "B (9x9)" in text and "NumPy A @ B" in text
    assert "result (9x9)" in MOD.show(p, {}, ref.astype(np.float32))


def test_example_runs_tiled_with_3x3_blocks():
    spec = family("matmul")
    p = MOD.problem(None, None, "float32", {"tile": 32, "example": True})
    for v in spec.variants:
        if v.kind == "kernel" and v.param("block_from_tile"):
            lau = planning.plan_launch(v, MOD, p, None, None, L.DeviceLimits())
            assert lau.block == (3, 3, 1) and lau.grid == (3, 3, 1)


def test_example_flag_keeps_outputs_for_show():
    from cudalab.cli.options import requests_from

    spec = family("matmul")
    kw = {"variants": None, "n": None, "shape": None, "dtype": None, "grid": None, "block": None, "seed": None,
          "device": 0, "defines": (), "tile": 32, "example": True, "budget": 0.5, "min_samples": 10,
          "hot": False, "no_roofline": False}
    req = requests_from(spec, MOD, kw)[0]
    assert req.keep_outputs and dict(req.options)["example"] is True
