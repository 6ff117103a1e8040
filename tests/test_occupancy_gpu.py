"""Theoretical occupancy (cudalab.inspect.occupancy, from the build alone) against Nsight Compute's, for
every built-in kernel variant on the GPU here (``cudalab ncu FAMILY --metrics occupancy``).

ncu's ``sm__maximum_warps_per_active_cycle_pct`` must equal cudalab's figure, and its block limits by
warps, registers and the block cap must equal cudalab's. Its shared-memory limit is compared only where
cudalab says shared memory binds: ncu reckons it against the carveout the driver chose for the launch
(often smaller than the SM's largest), which by design never lowers occupancy. Variants that launch
several kernels are compared on the combined figure only where all their launches are the variant's
kernel. Every difference is listed in one failure message.
"""

from __future__ import annotations

import pytest

from cudalab import catalog, ncu
from cudalab import launch as L
from cudalab.families import load
from cudalab.inspect import occupancy, variant
from cudalab.ncu import metrics as M
from cudalab.plan import RunRequest, make_problem, plan_launch, variant_arch
from cudalab.records.results import PASSED

pytestmark = pytest.mark.ncu

FAMILIES = sorted(catalog.load_catalog())


def theoretical(spec, fam, arch: str) -> dict[str, occupancy.Occupancy | str]:
    """cudalab's occupancy of each kernel variant at the family's default size, as compile computes it."""
    problem = make_problem(spec, fam, RunRequest(family=spec.name))
    out: dict[str, occupancy.Occupancy | str] = {}
    for v in spec.variants:
        if v.kind != "kernel":
            continue
        try:
            lau = plan_launch(v, fam, problem, None, None, L.DeviceLimits(), ())
            code = variant.load([v], [lau], spec.directory, [variant_arch(v, arch)])[0]
        except Exception as exc:  # a variant for another GPU generation, or a size rule: not compared
            out[v.name] = f"not compared: {exc}"
            continue
        out[v.name] = code.occupancy or f"not compared: no limits for {arch}"
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_occupancy_equals_ncus(family):
    spec = catalog.family(family)
    fam = load(spec.module)
    arch = occupancy.default_arch()
    ours = theoretical(spec, fam, arch)
    names = ",".join(n for n, o in ours.items() if not isinstance(o, str))
    if not names:
        pytest.skip(f"{family}: no kernel variant to compare on {arch}")
    rep = ncu.profile(RunRequest(family=family, variants=names), "occupancy")
    problems, notes = [], []
    for row in rep.rows:
        occ = ours.get(row.variant)
        if not isinstance(occ, occupancy.Occupancy):
            continue
        if row.status != PASSED or row.launch is None:
            problems.append(f"{family}/{row.variant}: ncu row {row.status} {row.note}")
            continue
        if row.launches > 1:
            notes.append(f"{family}/{row.variant}: {row.launches} launches combined; compared the theoretical % only")
        got = row.value(M.OCC_THEORETICAL)
        if got is None or abs(got - occ.pct) > 0.01:
            problems.append(f"{family}/{row.variant}: ncu {got}% theoretical, cudalab {occ.pct:.2f}% ({occ.limiter}; "
                            f"limits {occ.limits})")
        if row.launches == 1:
            for metric, name in ((M.OCC_LIMIT_WARPS, occupancy.WARPS), (M.OCC_LIMIT_REGISTERS, occupancy.REGISTERS),
                                 (M.OCC_LIMIT_BLOCKS, occupancy.BLOCKS), (M.OCC_LIMIT_SHARED, occupancy.SHARED)):
                theirs, mine = row.value(metric), occ.limits.get(name)
                if name == occupancy.SHARED and name not in occ.limiter:
                    continue  # against the driver's carveout: see the module docstring
                if theirs is not None and mine is not None and int(theirs) != mine:
                    problems.append(f"{family}/{row.variant}: {metric} = {theirs:g}, cudalab {mine}")
    print("\n".join(notes))
    assert not problems, "\n".join(problems)
