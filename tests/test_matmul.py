"""matmul, gemm and gemv without a GPU: catalogs, launch plans, sizes, verification math, and every
kernel compiled by the real nvcc for sm_90 with each define set its family.toml produces."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import build_share
from cudalab import catalog
from cudalab import launch as L
from cudalab.errors import SizeError, UsageError
from cudalab.families import Size, load, product
from cudalab.families.model import SetupContext
from cudalab.plan import RunRequest, plan_launch, precheck

FAMILIES = ("matmul", "gemm", "gemv")
LIMITS = L.DeviceLimits()


def plan(family: str, variant: str, n=None, shape=None, options=(), block=None):
    _plan = precheck(RunRequest(family=family, n=n, shape=shape, options=tuple(options)))
    spec, module, problem, _ = _plan.spec, _plan.family, _plan.problem, list(_plan.variants)
    return plan_launch(spec.variant(variant), module, problem, block, None, LIMITS)


# --- catalog ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("family", FAMILIES)
def test_catalog_loads(family):
    spec = catalog.family(family)
    module = load(spec.module)
    for name in ("OPTIONS", "SIZE_HELP", "problem", "extent", "work", "device_bytes", "make_inputs",
                 "reference", "check", "setup"):
        assert hasattr(module, name), f"{family} module lacks {name}"
    kinds = {v.kind for v in spec.variants}
    assert {"kernel", "library"} <= kinds
    for v in spec.variants:
        assert v.description
        if v.kind == "kernel":
            assert v.kernel.startswith(f"{family}_"), v.kernel


def test_matmul_ladder():
    names = catalog.family("matmul").names()
    assert names[:4] == ["host", "naive", "tiled", "tiled-any"]
    assert {"regblock", "dbuf", "async", "warptile", "streamk", "cublas"} <= set(names)
    assert catalog.family("gemv").names() == ["host", "naive", "coalesced", "warp-row", "block-row", "cublas"]


# --- launch plans ------------------------------------------------------------------------------------

def test_tiled_refuses_n_not_multiple_of_tile():
    with pytest.raises(SizeError, match="multiples of its tile 32"):
        plan("matmul", "tiled", n="33", options=(("tile", 32),))


def test_tiled_refuses_k_not_multiple_of_tile():
    with pytest.raises(SizeError, match=r"M, N and K that are multiples of its tile 32.*K=48"):
        plan("matmul", "tiled", shape="64x48x64", options=(("tile", 32),))


def test_tiled_accepts_multiples():
    lau = plan("matmul", "tiled", shape="64x96x128", options=(("tile", 32),))
    assert lau.block == (32, 32, 1) and lau.grid == (4, 2, 1) and dict(lau.defines)["TILE"] == "32"


def test_tiled_any_nine_by_three():
    lau = plan("matmul", "tiled-any", n="9", options=(("tile", 3),))
    assert lau.block == (3, 3, 1) and lau.grid == (3, 3, 1)


def test_tiled_nine_by_three_is_divisible():
    lau = plan("matmul", "tiled", n="9", options=(("tile", 3),))
    assert lau.block == (3, 3, 1) and lau.grid == (3, 3, 1) and dict(lau.defines)["TILE"] == "3"


def test_tiled_any_covers_ragged_sizes():
    lau = plan("matmul", "tiled-any", shape="123x456x78", options=(("tile", 32),))
    assert lau.grid == (3, 4, 1)  # ceil(78/32) columns of C, ceil(123/32) rows


def test_tiled_block_is_the_tile():
    with pytest.raises(UsageError, match="compiled for block 32x32"):
        plan("matmul", "tiled", n="64", options=(("tile", 32),), block="16x16")


@pytest.mark.parametrize("tile", ["0", "33"])
def test_tile_option_range(tile):
    with pytest.raises(UsageError, match="--tile"):
        precheck(RunRequest(family="matmul", n="64", options=(("tile", int(tile)),)))


@pytest.mark.parametrize("variant", ["regblock", "dbuf"])
@pytest.mark.parametrize("shape,grid", [("1x1x1", (1, 1, 1)), ("4096x4096x4096", (32, 32, 1)),
                                        ("129x7x257", (3, 2, 1))])
def test_regblock_grids(variant, shape, grid):
    lau = plan("matmul", variant, shape=shape)
    assert lau.block == (256, 1, 1) and lau.tile[:2] == (128, 128) and lau.grid == grid


@pytest.mark.parametrize("shape,grid", [("4096x4096x4096", (132, 1, 1)), ("1000x1025x777", (32, 1, 1)),
                                        ("1x1x1", (1, 1, 1))])
def test_streamk_grid_is_persistent(shape, grid):
    """One block an SM (the waits need every block resident), fewer where there are fewer tiles."""
    lau = plan("matmul", "streamk", shape=shape)
    assert lau.block == (256, 1, 1) and lau.tile[:2] == (256, 128) and lau.grid == grid
    assert lau.shared == plan("matmul", "warptile", shape=shape).shared


def test_gemv_warp_row_grid():
    lau = plan("gemv", "warp-row", n="8192")
    assert lau.block == (32, 8, 1) and lau.grid == (1, 1024, 1)
    lau = plan("gemv", "warp-row", shape="3x4097")
    assert lau.grid == (1, 1, 1)


def test_gemv_one_thread_per_row_grid():
    assert plan("gemv", "naive", shape="1000x777").grid == (4, 1, 1)


def test_shapes():
    mm = load("matmul")
    assert mm.problem("9", None, "float32", {"tile": 3}).dims == (9, 9, 9)
    assert mm.problem(None, "123x456x78", "float32", {}).dims == (123, 456, 78)
    assert mm.problem(None, None, "float32", {}).dims == (4096, 4096, 4096)
    with pytest.raises(UsageError):
        mm.problem("9", "9x9x9", "float32", {})
    with pytest.raises(UsageError):
        mm.problem(None, "9x9", "float32", {})
    gv = load("gemv")
    assert gv.problem(None, None, "float32", {}).dims == (8192, 8192)
    assert gv.problem(None, "3x4097", "float32", {}).dims == (3, 4097)
    with pytest.raises(UsageError):
        load("gemm").problem("8", None, "float32", {"alpha": float("nan")})


def test_work():
    mm = load("matmul")
    w = mm.work(Size(dims=(2, 3, 4), dtype="float32"))
    assert w.flops == 2 * 2 * 3 * 4 and w.bytes == (6 + 12 + 8) * 4
    gv = load("gemv")
    assert gv.work(Size(dims=(5, 7), dtype="float32")).bytes == (35 + 7 + 5) * 4
    assert gv.work(Size(dims=(5, 7), dtype="float32", options=(("beta", 0.5),))).bytes == (35 + 7 + 10) * 4


def test_host_row_refuses_large():
    mm = load("matmul")
    spec = catalog.family("matmul")
    big = Size(dims=(8192, 8192, 8192), dtype="float32")
    with pytest.raises(SizeError, match="skipped above 4096"):
        mm.setup(SetupContext(spec.variant("host"), None, big, {}, None))


# --- verification math ---------------------------------------------------------------------------

def test_tolerance_grows_with_sqrt_k():
    f1, e1 = product.tolerances(1)
    f4, e4 = product.tolerances(4096)
    assert math.isclose(f4 / f1, 64) and math.isclose(e4 / e1, 64)


@pytest.mark.parametrize("shape", [(1, 1, 1), (64, 300, 50), (128, 4096, 32)])
def test_fp32_product_passes(shape):
    """A float32 product (as a GPU kernel computes it) is well inside the bound."""
    mm = load("matmul")
    prob = Size(dims=shape, dtype="float32")
    inputs = mm.make_inputs(prob, np.random.default_rng(0))
    ref = mm.reference(prob, inputs)
    out = inputs["a"] @ inputs["b"]
    chk = mm.check(prob, out, ref)
    assert chk.ok and chk.max_error < chk.tolerance / 4, chk


def test_naive_fp32_loop_passes():
    """Sequential fp32 accumulation (the naive kernel's order) also passes at K = 4096."""
    rng = np.random.default_rng(1)
    k = 4096
    a = rng.uniform(-1, 1, (4, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, 3)).astype(np.float32)
    acc = np.zeros((4, 3), np.float32)
    for i in range(k):
        acc = (acc + np.outer(a[:, i], b[i, :]).astype(np.float32)).astype(np.float32)
    mm = load("matmul")
    prob = Size(dims=(4, k, 3), dtype="float32")
    assert mm.check(prob, acc, a.astype(np.float64) @ b.astype(np.float64)).ok


def test_one_wrong_element_fails():
    mm = load("matmul")
    prob = Size(dims=(512, 256, 512), dtype="float32")
    inputs = mm.make_inputs(prob, np.random.default_rng(2))
    ref = mm.reference(prob, inputs)
    out = ref.astype(np.float32)
    rms = np.sqrt(np.mean(ref**2))
    out[511, 3] += 0.005 * rms  # too small for the Frobenius test over 512x512 elements
    chk = mm.check(prob, out, ref)
    assert not chk.ok and chk.max_error > chk.tolerance and "element (511, 3)" in chk.detail


def test_missing_k_tile_fails():
    mm = load("matmul")
    prob = Size(dims=(64, 96, 64), dtype="float32")
    inputs = mm.make_inputs(prob, np.random.default_rng(3))
    ref = mm.reference(prob, inputs)
    partial = inputs["a"][:, :64] @ inputs["b"][:64, :]  # the last K tile forgotten
    chk = mm.check(prob, partial, ref)
    assert not chk.ok and chk.max_error > 0.1


def test_poison_fails():
    mm = load("matmul")
    prob = Size(dims=(8, 8, 8), dtype="float32")
    ref = np.ones((8, 8))
    out = np.ones((8, 8), np.float32)
    out[7, 7] = np.nan
    chk = mm.check(prob, out, ref)
    assert not chk.ok and "unwritten" in chk.detail
    assert not mm.check(prob, np.ones((8, 7), np.float32), ref).ok


def test_gemm_and_gemv_references():
    gm = load("gemm")
    prob = Size(dims=(5, 6, 7), dtype="float32", options=(("alpha", 1.5), ("beta", 0.5)))
    inp = gm.make_inputs(prob, np.random.default_rng(4))
    want = 1.5 * inp["a"].astype(float) @ inp["b"].astype(float) + 0.5 * inp["c"]
    assert np.allclose(gm.reference(prob, inp), want)
    assert gm.check(prob, (1.5 * (inp["a"] @ inp["b"]) + 0.5 * inp["c"]).astype(np.float32), want).ok
    gv = load("gemv")
    prob = Size(dims=(9, 4097), dtype="float32", options=(("alpha", -2.0), ("beta", 1.0)))
    inp = gv.make_inputs(prob, np.random.default_rng(5))
    ref = gv.reference(prob, inp)
    assert ref.shape == (9,)
    assert gv.check(prob, (-2 * (inp["a"] @ inp["x"]) + inp["y"]).astype(np.float32), ref).ok
    assert not gv.check(prob, (-2 * (inp["a"] @ inp["x"])).astype(np.float32), ref).ok  # beta forgotten


def test_inputs_are_never_zero_matrices():
    for fam, dims in (("matmul", (3, 4, 5)), ("gemm", (3, 4, 5)), ("gemv", (3, 4))):
        inputs = load(fam).make_inputs(Size(dims=dims, dtype="float32"), np.random.default_rng(6))
        for arr in inputs.values():
            assert arr.dtype == np.float32 and np.count_nonzero(arr) == arr.size


def test_show():
    mm = load("matmul")
    prob = Size(dims=(9, 9, 9), dtype="float32", options=(("tile", 3),))
    inputs = mm.make_inputs(prob, np.random.default_rng(7))
    text = mm.show(prob, inputs, inputs["a"] @ inputs["b"])
    assert "A (9x9) =" in text and "B (9x9) =" in text and "result (9x9) =" in text
    assert "up to 16" in mm.show(Size(dims=(64, 64, 64), dtype="float32"), {}, None)


# --- nvcc --------------------------------------------------------------------------------------------

needs_nvcc = pytest.mark.nvcc


def define_sets() -> list[tuple[str, str, tuple[tuple[str, str], ...], tuple[str, ...]]]:
    """(family, source, defines, kernels) for every define set the family.toml files produce,
    planned as the runner does (tiles 32, 16, 3 for the tiled kernels)."""
    sets: dict[tuple, set[str]] = {}
    for fam in FAMILIES:
        spec = catalog.family(fam)
        module = load(spec.module)
        for tile in (32, 16, 3):
            opts = {"tile": tile} if fam == "matmul" else {}
            size = f"{tile * 4}"
            prob = module.problem(size, None, "float32", opts)
            for v in spec.variants:
                if v.kind != "kernel":
                    continue
                lau = plan_launch(v, module, prob, None, None, LIMITS)
                sets.setdefault((fam, v.source, tuple(sorted(lau.defines))), set()).add(v.kernel)
    return [(f, s, d, tuple(sorted(k))) for (f, s, d), k in sorted(sets.items())]


def ptxas(path: Path, defines, tmp_path: Path) -> dict[str, dict[str, int]]:
    """Build for sm_90 as a run does and return per kernel: registers, spill stores/loads, stack, smem
    (define sets of the same device code share a build: build_share.py)."""
    return {k.name: {"regs": k.registers, "spill_st": k.spill_stores, "spill_ld": k.spill_loads,
                     "stack": k.stack_frame, "smem": k.static_shared}
            for k in build_share.build(path, dict(defines), "sm_90").kernels}


@needs_nvcc
@pytest.mark.parametrize("family,source,defines,kernels", define_sets(),
                         ids=lambda x: x if isinstance(x, str) else ",".join(f"{k}={v}" for k, v in x) if x and isinstance(x[0], tuple) else None)
def test_kernels_compile(tmp_path, family, source, defines, kernels):
    path = catalog.family(family).directory / source
    info = ptxas(path, defines, tmp_path)
    for k in kernels:
        assert k in info, f"{k} not in {source} (is it extern \"C\"?)"
        assert info[k]["regs"] <= 255
        assert info[k]["spill_st"] == 0 and info[k]["spill_ld"] == 0, (k, info[k])


@needs_nvcc
@pytest.mark.parametrize("family,kernel", [("matmul", "matmul_dbuf"), ("matmul", "matmul_regblock"),
                                           ("gemm", "gemm_dbuf"), ("gemm", "gemm_regblock"),
                                           ("gemv", "gemv_warp_row")])
def test_best_kernels_fit(tmp_path, family, kernel):
    """The register-blocked kernels must fit 2 blocks of 256 threads per SM (<= 128 registers) with no
    spills; warp-row must leave room for full occupancy."""
    spec = catalog.family(family)
    v = next(v for v in spec.variants if v.kernel == kernel)
    info = ptxas(spec.directory / v.source, dict(v.defines).items(), tmp_path)[kernel]
    assert info["spill_st"] == 0 and info["spill_ld"] == 0 and info["stack"] == 0, info
    assert info["regs"] <= (128 if family != "gemv" else 64), info
    if family != "gemv":
        assert info["smem"] <= 48 * 1024, info  # static: two 128x8 + 128x8 buffers
