"""Every kernel variant of every family builds (:func:`cudalab.build.build`, the path runs load) with
the real nvcc for sm_90 (sm_90a where the variant asks for it), with the defines its default launch gives it (no GPU needed). Define sets that
make the same device code (a source's own defaults passed again) share one build: build_share.py."""

from __future__ import annotations

import pytest

import build_share
from cudalab import plan as planning
from cudalab import catalog
from cudalab import launch as L
from cudalab.errors import UsageError
from cudalab.families import load
from cudalab.plan import variant_arch

pytestmark = pytest.mark.nvcc
#: The ladders whose rows' occupancy ncu's launch statistics were held against on an H200 (issue 59).
LADDERS = ("copy", "transpose", "reduce", "matmul")


def _cases():
    for spec in catalog.load_catalog().values():
        for v in spec.variants:
            if v.kind == "kernel":
                yield pytest.param(spec.name, v.name, id=f"{spec.name}/{v.name}")


@pytest.mark.parametrize("family, variant", list(_cases()))
def test_variant_compiles_for_sm90(family, variant):
    spec = catalog.family(family)
    module = load(spec.module)
    v = spec.variant(variant)
    problem = planning.make_problem(spec, module, planning.RunRequest(family=family))
    try:
        lau = planning.plan_launch(v, module, problem, None, None, L.DeviceLimits())
    except UsageError:  # e.g. a divisible variant at the family's default size cannot happen; say so
        pytest.fail(f"{family}/{variant} refuses its own family's default size")
    arch = variant_arch(v, "sm_90")  # wgmma is sm_90a code: its sm_90 build is an empty stub
    res = build_share.build(spec.directory / v.source, dict(lau.defines), arch)
    r = res.kernel(v.kernel)
    assert r is not None, f"{v.kernel} missing from {v.source}: has {[k.name for k in res.kernels]}"
    assert res.arch == arch
    assert r.registers > 0
    assert r.params and all(size in (1, 2, 4, 8) or size % 4 == 0 for size in r.params)
    assert r.spill_stores == 0 and r.spill_loads == 0, f"{family}/{variant} spills registers"
    if family in LADDERS:  # issue 59: every ladder row's theoretical occupancy names the limit that binds
        from cudalab.inspect.occupancy import BLOCKS, REGISTERS, SHARED, WARPS, occupancy

        occ = occupancy(arch, L.threads(lau.block), r.registers, r.static_shared + lau.shared)
        assert occ is not None and 0 < occ.pct <= 100 and occ.limiter, f"{family}/{variant}: {occ}"
        assert set(occ.limiter.split(", ")) <= {WARPS, REGISTERS, SHARED, BLOCKS}, occ.limiter
