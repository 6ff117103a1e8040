"""Every family's [[tune]] table: its space loads, the family's own configuration is one of its points
and meets its constraints, every valid point is a launch the planner accepts (no constraint lets
through a point the run would refuse), and each space is big enough to tune (the ground-truth spaces of
scripts/bench_tune.py big enough to measure exhaustively)."""

from __future__ import annotations

import pytest

from cudalab import catalog
from cudalab.errors import SizeError
from cudalab.families import load
from cudalab.plan import plan_launch
from cudalab.tuning.space import BLOCK
from cudalab.tuning.spaces import default_point, make_space

#: The issue's list: each of these variants has a [[tune]] table.
REQUIRED = {("matmul", "warptile"), ("matmul", "streamk"), ("gemm", "warptile"), ("hgemm", "wgmma"),
            ("transpose", "tiled-64x8"), ("reduce", "modern"), ("sort", "onesweep")}
#: The ground truth (scripts/bench_tune.py): measured exhaustively, so at least 200 valid points.
GROUND_TRUTH = {("matmul", "warptile"), ("transpose", "tiled-64x8"), ("reduce", "modern")}


def _tables():
    out = []
    for name in sorted(catalog.load_catalog()):
        spec = catalog.family(name)
        out += [(name, t.variant) for t in spec.tune]
    return out


def _space(family, variant):
    spec = catalog.family(family)
    fam = load(spec.module)
    v = spec.variant(variant)
    return spec, fam, v, make_space(spec, fam, v)


def test_the_required_tables_are_there():
    assert REQUIRED <= set(_tables())


@pytest.mark.parametrize("family, variant", _tables())
def test_a_table_is_a_space_its_default_is_in(family, variant):
    spec, fam, v, space = _space(family, variant)
    dflt = default_point(spec, fam, v, space)
    for d in space.dims:
        assert dflt[d.name] in d.values, f"{family}/{variant}: default {d.name}={dflt[d.name]} is not in {d.values}"
    assert space.allows(dflt) == "", f"{family}/{variant}: the default configuration breaks {space.allows(dflt)}"
    assert space.count_valid() >= (200 if (family, variant) in GROUND_TRUTH else 20)


@pytest.mark.parametrize("family, variant", _tables())
def test_every_valid_point_is_a_launch_the_planner_takes(family, variant):
    spec, fam, v, space = _space(family, variant)
    table = next(t for t in spec.tune if t.variant == variant)
    for point in space.valid_points():
        block = point.get(BLOCK)
        defines = tuple((d.name, point[d.name]) for d in space.dims if d.kind == "define")
        options = {d.name: point[d.name] for d in space.dims if d.kind == "option"}
        problem = fam.problem(table.n, table.shape, spec.default_dtype, options)
        try:
            lau = plan_launch(v, fam, problem, block, overrides=defines)
        except SizeError:  # a size the tile does not divide is the problem's, not the point's
            continue
        assert lau.block[0] * lau.block[1] * lau.block[2] <= 1024
