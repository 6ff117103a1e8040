"""reduce without a GPU: catalog entries, nvcc builds of every define combination, launch rules,
the host pairwise sum, and the reference and tolerance logic."""

from __future__ import annotations

import importlib
import itertools
import sys

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import build, catalog
from cudalab.worker import executor as runner
from cudalab import launch as L
from cudalab.errors import CompileError, SizeError, UsageError
from cudalab.families.model import SetupContext

SPEC = catalog.family("reduce")
MOD = importlib.import_module("cudalab.families.reduce")  # helpers too, not only the contract
DTYPES = ("int32", "float32", "float64")

EXPECTED = [
    "cpu", "neighbored", "neighbored-less", "interleaved", "unrolling2", "unrolling4", "unrolling8",
    "unroll-warps8", "unroll-warps8-sync", "complete-unroll-warps8", "complete-unroll-warps8-sync",
    "complete-unroll", "complete-unroll-sync", "modern", "cub",
]


def _problem(n: int | str = "2^24", dtype: str = "float64"):
    return MOD.FAMILY.problem(str(n), None, dtype, {})


def _plan(name: str, n: int | str = "2^24", dtype: str = "float64", block: str | None = None, grid: str | None = None):
    return planning.plan_launch(SPEC.variant(name), MOD.FAMILY, _problem(n, dtype), block, grid, L.DeviceLimits())


# --- catalog --------------------------------------------------------------------------------------

def test_variants_in_order():
    assert SPEC.names() == EXPECTED
    assert SPEC.default_dtype == "float64"
    assert set(SPEC.dtypes) == set(DTYPES)


def test_legacy_rows_have_a_correct_twin():
    legacy = [v for v in SPEC.variants if v.legacy]
    assert {v.name for v in legacy} == {"unroll-warps8", "complete-unroll-warps8", "complete-unroll"}
    for v in legacy:
        twin = SPEC.variant(v.name + "-sync")
        assert not twin.legacy
        assert twin.source == v.source and twin.kernel == v.kernel + "_sync"
        assert (twin.per_thread, twin.divisible, twin.require, twin.defines) == (v.per_thread, v.divisible, v.require, v.defines)


def test_kernel_symbols_follow_the_family_name():
    for v in SPEC.variants:
        if v.kind == "kernel":
            assert v.kernel == "reduce_" + v.name.replace("-", "_")
            assert v.block == (512, 1, 1)
            assert v.block_pow2 or v.grid_stride


def test_kinds():
    kinds = {v.name: v.kind for v in SPEC.variants}
    assert kinds["cpu"] == "host" and kinds["cub"] == "library"
    assert "reference" in SPEC.variant("cub").description


def test_family_contract():
    for name in ("OPTIONS", "SIZE_HELP", "problem", "extent", "work", "device_bytes", "make_inputs",
                 "reference", "check", "setup", "defines", "EXTRA_COLUMNS"):
        assert callable(getattr(MOD.FAMILY, name)) or name.isupper(), name
    assert "pycuda" not in sys.modules


# --- nvcc: every source, every define combination the catalog and the defines() hook produce ---

def _define_sets():
    """(variant, dtype, block) → the -D list plan_launch produces, deduplicated per source file."""
    seen = {}
    for v in SPEC.variants:
        if v.kind != "kernel":
            continue
        blocks = ["64", "128", "256", "512", "1024"] if v.defines else ["512"]
        for dtype, block in itertools.product(DTYPES, blocks):
            lau = _plan(v.name, "2^20", dtype, block)
            key = (v.source, tuple(sorted(lau.defines)))
            seen.setdefault(key, v.name)
    return sorted(seen)


@pytest.mark.nvcc
@pytest.mark.parametrize("source,defines", _define_sets(), ids=lambda x: x if isinstance(x, str) else ",".join(f"{k}={v}" for k, v in x))
def test_compiles_for_sm90(source, defines):
    b = build.build(SPEC.directory / source, dict(defines), "sm_90")
    for v in SPEC.variants:
        if v.source == source:
            assert b.kernel(v.kernel) is not None, f"{v.kernel} missing from {source}"
    # No kernel spills registers to local memory.
    assert all(k.spill_stores == 0 and k.spill_loads == 0 for k in b.kernels), b.kernels


@pytest.mark.nvcc
def test_block_define_is_checked_at_compile_time():
    with pytest.raises(CompileError) as exc:
        build.build(SPEC.directory / "reduce.cu", {"ELEM_T": "float", "BLOCK": "96"}, "sm_90")
    assert "BLOCK must be a power of two" in exc.value.log


# --- launch rules -----------------------------------------------------------------------------------

def test_default_grids_follow_the_book():
    n = 2**24
    assert _plan("neighbored").grid == (n // 512, 1, 1)
    assert _plan("unrolling2").grid == (n // 1024, 1, 1)
    assert _plan("unrolling4").grid == (n // 2048, 1, 1)
    for name in ("unrolling8", "unroll-warps8", "complete-unroll", "complete-unroll-sync"):
        assert _plan(name).grid == (n // 4096, 1, 1)
    assert _plan("modern").grid == (132 * 4, 1, 1)
    assert _plan("modern", n=1000).grid == (1, 1, 1)    # no more blocks than tiles


@pytest.mark.parametrize("dtype,ctype", [("int32", "int"), ("float32", "float"), ("float64", "double")])
def test_element_type_define(dtype, ctype):
    assert dict(_plan("interleaved", dtype=dtype).defines)["ELEM_T"] == ctype


def test_block_define_tracks_the_block():
    for block in ("64", "256", "1024"):
        assert dict(_plan("complete-unroll", block=block).defines)["BLOCK"] == block


@pytest.mark.parametrize("name", [v.name for v in SPEC.variants if v.divisible])
def test_divisible_variants_refuse_other_sizes(name):
    v = SPEC.variant(name)
    tile = 512 * v.per_thread[0]
    _plan(name, n=tile * 3)
    with pytest.raises(SizeError, match=r"multiples of its tile") as exc:
        _plan(name, n=tile * 3 + 1)
    assert str(tile) in str(exc.value) and name in str(exc.value)


@pytest.mark.parametrize("name", ["neighbored", "neighbored-less", "interleaved", "modern"])
def test_tail_handling_variants_take_any_size(name):
    for n in (1, 5, 1000003, 2**20 + 1):
        lau = _plan(name, n=n)
        assert lau.grid[0] * lau.tile[0] >= n


def test_power_of_two_blocks_only():
    with pytest.raises(UsageError, match="power-of-two"):
        _plan("interleaved", block="384")


def test_last_warp_needs_64_threads():
    for name in ("unroll-warps8-sync", "complete-unroll"):
        with pytest.raises(UsageError, match="threads >= 64"):
            _plan(name, n=32 * 8, block="32")


def test_modern_needs_whole_warps():
    _plan("modern", block="96")
    with pytest.raises(UsageError, match="threads % 32"):
        _plan("modern", block="100")


def test_precheck_keeps_going_when_some_variants_refuse():
    req = planning.RunRequest(family="reduce", n="1000003")
    _plan = planning.precheck(req)
    _, _, problem, variants = _plan.spec, _plan.family, _plan.problem, list(_plan.variants)
    assert problem.dims == (1000003,) and len(variants) == len(EXPECTED)


def test_precheck_refuses_when_every_chosen_variant_refuses():
    req = planning.RunRequest(family="reduce", n="1000003", variants="unrolling8,unroll-warps8")
    with pytest.raises(SizeError, match="multiples of its tile"):
        planning.precheck(req)


# --- problem, work ---------------------------------------------------------------------------------

def test_problem_parsing():
    assert _problem().dims == (2**24,)
    assert MOD.FAMILY.problem(None, None, "float64", {}).dims == (16_777_216,)
    assert _problem("16M").dims == (2**24,)
    with pytest.raises(UsageError, match="--n"):
        MOD.FAMILY.problem(None, "4x4", "float64", {})
    with pytest.raises(UsageError, match="32-bit"):
        _problem(2**31 + 1)


def test_work_and_memory():
    p = _problem(2**24, "float64")
    assert MOD.FAMILY.work(p).bytes == 2**24 * 8
    assert MOD.FAMILY.extent(p, SPEC.variant("modern")) == (2**24, 1, 1)
    assert MOD.FAMILY.device_bytes(p) >= 2 * 2**24 * 8 + (2**24 // 512) * 8


# --- host sum, reference, tolerance -------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 1000, 1023, 1025, 2**16, 1000003])
@pytest.mark.parametrize("dtype", DTYPES)
def test_pairwise_sum_matches_numpy(n, dtype):
    rng = np.random.default_rng(n)
    p = _problem(n, dtype)
    x = MOD.FAMILY.make_inputs(p, rng)["x"]
    assert x.dtype == np.dtype(dtype) and x.shape == (n,) and np.all(x != 0)
    got = MOD.pairwise_sum(x.copy())
    ref = MOD.FAMILY.reference(p, {"x": x})
    assert MOD.FAMILY.check(p, np.array([got], dtype=dtype), ref).ok
    if dtype != "float32":
        assert float(got) == pytest.approx(float(np.sum(x, dtype=np.float64)), rel=1e-12)


def test_pairwise_sum_is_in_place_and_wraps_ints():
    a = np.array([2**31 - 1, 1, 5], dtype=np.int32)
    assert MOD.pairwise_sum(a) == np.int32(-(2**31) + 5)
    b = np.arange(1, 9, dtype=np.float64)
    assert MOD.pairwise_sum(b) == 36 and b[0] == 36    # destroyed: the sum lands in b[0]


def test_float_inputs_are_positive_so_the_relative_bound_holds():
    for dtype in ("float32", "float64"):
        x = MOD.FAMILY.make_inputs(_problem(10000, dtype), np.random.default_rng(0))["x"]
        assert x.min() >= 0.5 and x.max() < 1.5


def test_int_inputs_are_small_positive_and_cannot_wrap():
    # Positive: no dropped block can sum to 0 and no partial can equal a poison (-1, 0x7F7F7F7F).
    x = MOD.FAMILY.make_inputs(_problem(100000, "int32"), np.random.default_rng(0))["x"]
    assert x.dtype == np.int32 and x.min() >= 1 and x.max() <= 100 and x.min() < x.max()
    assert MOD.int_limit(2**31) == 1 and MOD.int_limit(2**24) == 100
    assert MOD.int_limit(2**26) * 2**26 < 2**31


def test_tolerance():
    u32, u64 = np.finfo(np.float32).eps / 2, np.finfo(np.float64).eps / 2
    assert MOD.tolerance(_problem(2**24, "int32")) == 0
    assert MOD.tolerance(_problem(2**24, "float32")) == pytest.approx((48 + 256 + 2) * u32)
    assert MOD.tolerance(_problem(2**24, "float64")) == pytest.approx((48 + 256 + 2) * u64)
    assert MOD.tolerance(_problem(1, "float64")) == pytest.approx(3 * u64)
    # Monotone in n: bigger sums get (slightly) more room.
    t = [MOD.tolerance(_problem(n, "float32")) for n in (2**10, 2**20, 2**24, 2**28)]
    assert t == sorted(t)


def test_check_floats():
    p = _problem(2**24, "float32")
    ref = np.array([16777216.0])
    tol = MOD.tolerance(p)
    assert MOD.FAMILY.check(p, np.array([ref[0] * (1 + tol / 2)], np.float32), ref).ok
    assert not MOD.FAMILY.check(p, np.array([ref[0] * (1 + 3 * tol)], np.float32), ref).ok
    assert not MOD.FAMILY.check(p, np.array([np.nan], np.float32), ref).ok
    p64 = _problem(2**24, "float64")
    # One element (about 1) lost out of 2^24 fails in float64.
    assert not MOD.FAMILY.check(p64, np.array([ref[0] - 0.5]), ref).ok


def test_check_ints_exact_modulo_2_32():
    p = _problem(10, "int32")
    ref = MOD.FAMILY.reference(p, {"x": np.array([2**30] * 4 + [1] * 6, dtype=np.int32)})
    assert ref.dtype == np.int32 and ref[0] == 6    # 2^32 + 6 wraps to 6, as the GPU's int adds do
    assert MOD.FAMILY.check(p, np.array([6], np.int32), ref).ok
    assert not MOD.FAMILY.check(p, np.array([7], np.int32), ref).ok


def test_finish_adds_partials_wide_and_poison_shows():
    p = _problem(100, "float32")
    out = MOD.finish(p, np.array([1e8, 1.0, -1e8, 1.0], np.float32))
    assert out.dtype == np.float32 and out[0] == 2.0
    poisoned = np.full(3, 0xFF, np.uint8).repeat(4).view(np.float32)
    assert np.isnan(MOD.finish(p, poisoned)[0])
    pi = _problem(100, "int32")
    assert MOD.finish(pi, np.array([2**31 - 1, 2**31 - 1, 2], np.int32))[0] == 0


# --- setup without a GPU: the host row runs end to end ----------------------------------------------------

def test_host_case_restores_its_input():
    p = _problem(1000, "float64")
    x = MOD.FAMILY.make_inputs(p, np.random.default_rng(3))
    ctx = runner.Context(device=None, rng=np.random.default_rng(0))
    case = MOD.FAMILY.setup(SetupContext(SPEC.variant("cpu"), None, p, x, ctx))
    ref = MOD.FAMILY.reference(p, x)
    values = []
    for _ in range(3):
        case.reset()
        case.run()
        values.append(case.result()[0])
    assert len(set(values)) == 1 and MOD.FAMILY.check(p, case.result(), ref).ok
    case.reset()
    assert MOD.FAMILY.check(p, np.array([case.to_result()]), ref).ok
    assert case.timer == "host"
