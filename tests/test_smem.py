"""smem-square and smem-rect without a GPU: every .cu compiled by the real nvcc for sm_90 with each
variant's defines, the kernels' index model against independent NumPy and against the expected
bank-conflict figures in family.toml, sizes, dynamic shared memory and the verification path."""

from __future__ import annotations


import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import build, catalog
from cudalab import launch as L
from cudalab.errors import UsageError
import importlib

from cudalab.families import load  # noqa: F401

FAMILIES = ["smem-square", "smem-rect"]
SYMBOLS = ["setRowReadRow", "setColReadCol", "setRowReadCol", "setRowReadColDyn", "setRowReadColPad",
           "setRowReadColDynPad"]


def fam(name):
    """The spec and the family's module (its helpers and PATTERNS too; the contract is ``.FAMILY``)."""
    spec = catalog.family(name)
    return spec, importlib.import_module(f"cudalab.families.{spec.module}")


def prob(name, **opts):
    spec, mod = fam(name)
    return mod.FAMILY.problem(opts.pop("n", None), None, "int32", {o.name: o.default for o in mod.FAMILY.OPTIONS} | opts)


@pytest.mark.nvcc
@pytest.mark.parametrize("family,ipad", [("smem-square", None), ("smem-rect", 2), ("smem-rect", 1), ("smem-rect", 0)])
def test_compiles_for_sm90_with_every_define_set(family, ipad):
    spec, mod = fam(family)
    p = prob(family, **({} if ipad is None else {"ipad": ipad}))
    for v in spec.variants:
        lau = planning.plan_launch(v, mod.FAMILY, p, None, None, L.DeviceLimits())
        res = {r.name: r for r in build.build(spec.directory / v.source, dict(lau.defines), "sm_90").kernels}
        assert v.kernel in res, f"{v.name}: {v.kernel} missing from {sorted(res)}"
        r = res[v.kernel]
        assert r.spill_stores == 0 and r.spill_loads == 0
        if lau.shared:  # dynamic variants have no static tile
            assert r.static_shared == 0
        else:
            assert r.static_shared > 0


def test_variants_and_symbols():
    for family in FAMILIES:
        spec, _ = fam(family)
        assert spec.names() == ["row-row", "col-col", "row-col", "row-col-dyn", "row-col-pad", "row-col-dyn-pad"]
        assert [v.kernel for v in spec.variants] == SYMBOLS
        assert spec.metric == "none" and spec.dtypes == ("int32",)


@pytest.mark.parametrize("family", FAMILIES)
def test_model_reproduces_declared_expectations(family):
    spec, mod = fam(family)
    p = prob(family)  # default options (rect: ipad 2, the value family.toml declares for)
    for v in spec.variants:
        model = mod.FAMILY.smem_expect(p, v) if family == "smem-rect" else \
            __import__("cudalab.families.smem_tile", fromlist=["x"]).model_wavefronts(
                mod.PATTERNS, v.kernel, 32, 32, 1)
        assert model == {k: float(x) for k, x in v.param("smem_expect").items()}, v.name


def test_design_figures():
    _, sq = fam("smem-square")
    _, rc = fam("smem-rect")
    want_sq = {"row-row": (1, 1), "col-col": (32, 32), "row-col": (32, 1), "row-col-dyn": (32, 1),
               "row-col-pad": (1, 1), "row-col-dyn-pad": (1, 1)}
    for name, (ld, st) in want_sq.items():
        assert catalog.family("smem-square").variant(name).param("smem_expect") == {"ld": ld, "st": st}
    spec = catalog.family("smem-rect")
    for ipad, pad_ld in ((2, 1.0), (1, 2.0), (0, 16.0)):
        p = prob("smem-rect", ipad=ipad)
        got = {v.name: rc.FAMILY.smem_expect(p, v) for v in spec.variants}
        assert got["row-row"] == {"ld": 1.0, "st": 1.0}
        assert got["col-col"] == {"ld": 16.0, "st": 16.0}
        assert got["row-col"] == got["row-col-dyn"] == {"ld": 16.0, "st": 1.0}
        assert got["row-col-pad"] == got["row-col-dyn-pad"] == {"ld": pad_ld, "st": 1.0}


def test_bank_model_basics():
    from cudalab.families.smem_tile import wavefronts_per_request

    assert wavefronts_per_request(np.arange(32)) == 1.0
    assert wavefronts_per_request(np.arange(32) * 32) == 32.0
    assert wavefronts_per_request(np.zeros(32, dtype=int)) == 1.0      # one word: a broadcast
    assert wavefronts_per_request(np.arange(32) * 2) == 2.0


def test_expected_out_square_independent():
    spec, mod = fam("smem-square")
    p = prob("smem-square", blocks=3)
    g = np.arange(3 * 1024).reshape(3, 32, 32)
    assert np.array_equal(mod.expected_out(p, spec.variant("row-row")), g)
    assert np.array_equal(mod.expected_out(p, spec.variant("col-col")), g)
    for name in ("row-col", "row-col-dyn", "row-col-pad", "row-col-dyn-pad"):
        # out[b, y, x] = tile[x][y] = the index thread (x, y) stored: the block's transpose
        assert np.array_equal(mod.expected_out(p, spec.variant(name)), g.transpose(0, 2, 1)), name


def test_expected_out_rect_independent():
    spec, mod = fam("smem-rect")
    for ipad in (2, 1, 0):
        p = prob("smem-rect", blocks=2, ipad=ipad)
        out = np.empty((2, 16, 32), dtype=np.int64)
        for b in range(2):
            for ty in range(16):
                for tx in range(32):
                    idx = ty * 32 + tx
                    irow, icol = idx // 16, idx % 16
                    out[b, ty, tx] = b * 512 + icol * 32 + irow   # tile[icol][irow] holds what (irow, icol) stored
        for name in ("row-col", "row-col-dyn", "row-col-pad", "row-col-dyn-pad"):
            assert np.array_equal(mod.expected_out(p, spec.variant(name)), out), (name, ipad)
        g = np.arange(2 * 512).reshape(2, 16, 32)
        for name in ("row-row", "col-col"):
            assert np.array_equal(mod.expected_out(p, spec.variant(name)), g)


@pytest.mark.parametrize("family", FAMILIES)
def test_verification_path(family):
    from cudalab.families.smem_tile import read_permutation, unpermute

    spec, mod = fam(family)
    p = prob(family, blocks=4)
    ref = mod.FAMILY.reference(p, mod.FAMILY.make_inputs(p, np.random.default_rng(0)))
    for v in spec.variants:
        _, by, bx = p.dims
        ipad = p.opt("ipad", 1)
        perm = read_permutation(mod.PATTERNS, v.kernel, bx, by, ipad)
        good = mod.expected_out(p, v)
        assert mod.FAMILY.check(p, unpermute(good, perm), ref).ok, v.name
        bad = good.copy()
        bad[1, 0, 0], bad[1, 0, 1] = bad[1, 0, 1], bad[1, 0, 0]
        assert not mod.FAMILY.check(p, unpermute(bad, perm), ref).ok
        unwritten = good.copy()
        unwritten[3, -1, -1] = -1  # the poison (0xFF bytes) as int32
        assert not mod.FAMILY.check(p, unpermute(unwritten, perm), ref).ok


def test_sizes_and_launch():
    spec, mod = fam("smem-square")
    assert prob("smem-square").dims == (1, 32, 32)
    assert prob("smem-square", n="1k").dims == (1024, 32, 32)
    assert prob("smem-square", blocks=8).dims == (8, 32, 32)
    with pytest.raises(UsageError, match="disagree"):
        prob("smem-square", n="4", blocks=8)
    with pytest.raises(UsageError, match="--shape"):
        mod.FAMILY.problem(None, "4x4", "int32", {"blocks": 1})
    with pytest.raises(UsageError, match="too many"):
        prob("smem-square", blocks=2**21)
    with pytest.raises(UsageError, match="ipad"):
        prob("smem-rect", ipad=-1)
    p = prob("smem-square", blocks=5)
    lims = L.DeviceLimits()
    shared = {v.name: planning.plan_launch(v, mod.FAMILY, p, None, None, lims) for v in spec.variants}
    assert shared["row-row"].grid == (5, 1, 1) and shared["row-row"].block == (32, 32, 1)
    assert shared["row-row"].shared == 0
    assert shared["row-col-dyn"].shared == 32 * 32 * 4
    assert shared["row-col-dyn-pad"].shared == 33 * 32 * 4
    rspec, rmod = fam("smem-rect")
    rp = prob("smem-rect", ipad=1)
    rl = {v.name: planning.plan_launch(v, rmod.FAMILY, rp, None, None, lims) for v in rspec.variants}
    assert rl["row-col-dyn-pad"].shared == 33 * 16 * 4 and ("IPAD", "1") in rl["row-col-pad"].defines
    assert rl["row-row"].grid == (1, 1, 1) and rl["row-row"].block == (32, 16, 1)
    with pytest.raises(UsageError, match="compiled for block"):
        planning.plan_launch(rspec.variant("row-row"), rmod.FAMILY, rp, "32x32", None, lims)
