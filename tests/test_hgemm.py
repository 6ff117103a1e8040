"""hgemm without a GPU: the catalog, sizes and launch plans, bf16/fp16 rounding, the verification's
bounds (a kernel that drops the last K slice must come out wrong), the ncu tensor set, and every
kernel compiled by the real nvcc for sm_90 (and sm_90a) for both input types, mutant included."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import build_share
from cudalab import build, catalog, ncu
from cudalab import launch as L
from cudalab.errors import SizeError
from cudalab.families import hgemm as hg
from cudalab.families import load
from cudalab.families import matmul_sketch as sketch
from cudalab.families import product as prod
from cudalab.plan import variant_arch
from cudalab.plan import RunRequest, plan_launch, precheck

LIMITS = L.DeviceLimits()
needs_nvcc = pytest.mark.nvcc  # skipped where cudalab finds no nvcc (conftest)
KERNELS = ("wmma", "mma", "wgmma")


def setup_problem(n=None, shape=None, dtype=None):
    p = precheck(RunRequest(family="hgemm", n=n, shape=shape, dtype=dtype))
    return p.spec, p.family, p.problem, list(p.variants)


def plan(variant: str, n=None, shape=None, dtype=None):
    spec, module, problem, _ = setup_problem(n, shape, dtype)
    return plan_launch(spec.variant(variant), module, problem, None, None, LIMITS)


# --- catalog and plans ---------------------------------------------------------------------------

def test_the_ladder_is_listed_with_descriptions():
    spec = catalog.family("hgemm")
    assert spec.names() == ["host", "wmma", "mma", "wgmma", "cublas"]
    assert spec.dtypes == ("bfloat16", "float16") and spec.default_dtype == "bfloat16"
    assert spec.metric == "flops"
    for v in spec.variants:
        assert v.description
        if v.kind == "kernel":
            assert v.kernel.startswith("hgemm_")
    assert isinstance(load(spec.module), hg.Hgemm)


@pytest.mark.parametrize("dtype,np_dtype", [("bfloat16", np.uint16), ("float16", np.float16)])
def test_problem_holds_a_numpy_dtype_for_bf16(dtype, np_dtype):
    _, _, problem, _ = setup_problem(shape="300x200x100", dtype=dtype)
    assert problem.dims == (300, 200, 100) and problem.dtype == dtype
    assert problem.np_dtype == np.dtype(np_dtype) and problem.np_dtype.itemsize == 2


def test_work_counts_16_bit_inputs_and_fp32_output():
    _, module, problem, _ = setup_problem(shape="64x32x16")
    w = module.work(problem)
    assert w.flops == 2 * 64 * 32 * 16
    assert w.bytes == (64 * 32 + 32 * 16) * 2 + 64 * 16 * 4


@pytest.mark.parametrize("size,grids", [
    ({"n": "4096"}, {"wmma": (32, 32, 1), "mma": (16, 32, 1), "wgmma": (16, 32, 1)}),
    ({"n": "257"}, {"wmma": (3, 3, 1), "mma": (2, 3, 1)}),
    ({"shape": "1x1x1"}, {"wmma": (1, 1, 1), "mma": (1, 1, 1)}),
    ({"shape": "129x7x131"}, {"wmma": (2, 2, 1), "mma": (1, 2, 1)}),
    ({"shape": "136x72x200"}, {"wmma": (2, 2, 1), "mma": (1, 2, 1), "wgmma": (1, 2, 1)}),
])
def test_every_size_plans_tiles_covering_c(size, grids):
    for variant, grid in grids.items():
        lau = plan(variant, **size)
        assert lau.grid == grid and lau.block == ((384 if variant == "wgmma" else 256), 1, 1)
    assert plan("mma", n="256").shared == 4 * (128 * 64 + 64 * 256) * 2   # 192 KiB: opts in above 48 KiB
    # 4 stages of 48 KiB, 1 KiB to align them to the 128-byte swizzle's 1024-byte atoms, 8 mbarriers
    assert plan("wgmma", n="256").shared == 4 * 48 * 1024 + 1024 + 64


@pytest.mark.parametrize("size", [{"n": "257"}, {"shape": "64x7x64"}, {"shape": "64x64x100"}])
def test_wgmma_refuses_rows_tma_cannot_stride_naming_the_rule(size):
    with pytest.raises(SizeError, match="K and N must be multiples of 8"):
        plan("wgmma", **size)
    plan("mma", **size)    # the rung below takes any size


@pytest.mark.parametrize("dtype,flag", [("bfloat16", "1"), ("float16", "0")])
def test_dtype_reaches_the_kernels_as_a_define(dtype, flag):
    for variant in KERNELS:
        assert ("HG_BF16", flag) in plan(variant, n="256", dtype=dtype).defines


# --- rounding --------------------------------------------------------------------------------------

def test_bf16_rounds_to_nearest_even():
    one = 1.0
    ulp = 2.0**-7                  # bf16 spacing at 1
    x = np.array([one, one + ulp / 2, one + 3 * ulp / 2, one + ulp / 2 + 2**-20, -2.5, 0.0, 1e-3], np.float32)
    bits = hg.to_bf16_bits(x)
    assert bits[0] == 0x3F80
    assert bits[1] == 0x3F80       # a tie goes to the even neighbour (down)
    assert bits[2] == 0x3F82       # a tie goes to the even neighbour (up)
    assert bits[3] == 0x3F81       # just above the tie goes up
    back = hg.bf16_bits_to_float32(bits)
    assert back[4] == -2.5 and back[5] == 0.0
    assert abs(back[6] - 1e-3) <= 1e-3 * 2**-8


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_inputs_are_rounded_and_never_zero_matrices(dtype):
    _, module, problem, _ = setup_problem(shape="64x48x32", dtype=dtype)
    inputs = module.make_inputs(problem, np.random.default_rng(1))
    assert inputs["a"].shape == (64, 48) and inputs["b"].shape == (48, 32)
    assert inputs["a"].dtype == problem.np_dtype
    a = hg.as_float32(inputs["a"], dtype)
    assert np.all(np.abs(a) <= 1.0) and np.count_nonzero(a) > 0.9 * a.size and a.std() > 0.4
    # The values are exactly representable in the 16-bit type: rounding them again changes nothing.
    assert np.array_equal(hg.rounded(a, dtype), inputs["a"])


# --- verification ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def product():
    """A 192x1024x160 bf16 problem, its rounded inputs as float32, and the reference."""
    _, module, problem, _ = setup_problem(shape="192x1024x160")
    inputs = module.make_inputs(problem, np.random.default_rng(7))
    a, b = hg.as_float32(inputs["a"], "bfloat16"), hg.as_float32(inputs["b"], "bfloat16")
    return module, problem, inputs, a, b, module.reference(problem, inputs)


def test_reference_is_the_fp32_product_of_the_rounded_inputs(product):
    module, problem, inputs, a, b, ref = product
    assert ref.dtype == np.float32
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(ref - exact).max() < 1e-4


def test_another_summation_order_passes(product):
    module, problem, _, a, b, ref = product
    # fp32 sums of 16-product groups in another order, the way the tensor cores add them.
    k = a.shape[1]
    out = np.zeros(ref.shape, np.float32)
    for k0 in reversed(range(0, k, 16)):
        out += (a[:, k0:k0 + 16].astype(np.float64) @ b[k0:k0 + 16].astype(np.float64)).astype(np.float32)
    chk = module.check(problem, out, ref)
    assert chk.ok, chk


@pytest.mark.parametrize("dropped", [32, 16])
def test_dropping_the_last_k_slice_fails(product, dropped):
    module, problem, _, a, b, ref = product
    k = a.shape[1]
    out = a[:, :k - dropped] @ b[:k - dropped]
    chk = module.check(problem, out, ref)
    assert not chk.ok and chk.max_error > 20 * chk.tolerance, chk


def test_one_wrong_or_unwritten_element_fails(product):
    module, problem, _, a, b, ref = product
    out = ref.copy()
    out[191, 159] += 0.05 * math.sqrt(a.shape[1])     # a few tenths of rms|C|
    assert not module.check(problem, out, ref).ok
    out = ref.copy()
    out[0, 5] = np.nan                                 # the poison, never written
    chk = module.check(problem, out, ref)
    assert not chk.ok and "unwritten" in chk.detail


def test_bounds_grow_with_sqrt_k_and_are_8x_matmuls():
    fro_1k, elem_1k = hg.tolerances(1024)
    fro_4k, elem_4k = hg.tolerances(4096)
    assert math.isclose(fro_4k / fro_1k, 2.0) and math.isclose(elem_4k / elem_1k, 2.0)
    assert math.isclose(fro_4k, 8 * 1e-6 * 64)
    # A dropped K slice of 16 at K = 8192 (relative error sqrt(16/8192)) is far outside the bound.
    assert math.sqrt(16 / 8192) > 50 * hg.tolerances(8192)[0]


def test_large_products_use_the_sketch():
    _, module, problem, _ = setup_problem(shape="8192x8192x8193")
    assert sketch.sketched(problem.dims)
    assert "check" in prod.check_note(problem)
    _, _, small, _ = setup_problem(n="8192")
    assert not sketch.sketched(small.dims) and prod.check_note(small) == {}


def test_sketch_check_catches_a_dropped_k_slice():
    rng = np.random.default_rng(3)
    a = hg.as_float32(hg.rounded(rng.uniform(-1, 1, (96, 512)).astype(np.float32), "bfloat16"), "bfloat16")
    b = hg.as_float32(hg.rounded(rng.uniform(-1, 1, (512, 80)).astype(np.float32), "bfloat16"), "bfloat16")
    ref = sketch.reference(a, b)
    assert sketch.check(a @ b, ref, *hg.tolerances(512)).ok
    assert not sketch.check(a[:, :-32] @ b[:-32], ref, *hg.tolerances(512)).ok


# --- ncu -------------------------------------------------------------------------------------------

def test_tensor_metric_set():
    mset = ncu.resolve_metrics("tensor")
    assert mset.name == "tensor"
    assert "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" in mset.metrics
    assert "sm__inst_executed_pipe_tensor_op_hmma.sum" in mset.metrics
    assert ncu.DURATION in mset.metrics
    assert ncu.metrics.infer_metric_set(set(mset.metrics)).name == "tensor"


# --- nvcc ------------------------------------------------------------------------------------------

def source(variant: str) -> Path:
    spec = catalog.family("hgemm")
    return spec.directory / spec.variant(variant).source


@needs_nvcc
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_kernels_compile_without_spills(dtype):
    """Each rung as a run on an H100 or H200 builds it: wmma and mma for sm_90, wgmma for sm_90a (its
    plain sm_90 build is the stub of test_wgmma_is_real_only_in_the_sm90a_build; test_compile_all builds
    every variant for sm_90)."""
    for variant in KERNELS:
        lau = plan(variant, n="4096", dtype=dtype)
        arch = variant_arch(catalog.family("hgemm").variant(variant), "sm_90")
        assert arch == ("sm_90a" if variant == "wgmma" else "sm_90")
        res = build.build(source(variant), dict(lau.defines), arch)
        kernel = catalog.family("hgemm").variant(variant).kernel
        r = res.kernel(kernel)
        assert r is not None and r.registers <= 255
        assert r.spill_stores == 0 and r.spill_loads == 0 and r.stack_frame == 0, (variant, r)
        tmaps = (8,) if variant == "wgmma" else ()
        assert r.params == (8, 8, 8, 4, 4, 4) + tmaps


@needs_nvcc
def test_wgmma_is_real_only_in_the_sm90a_build():
    lau = plan("wgmma", n="4096")
    full = build.build(source("wgmma"), dict(lau.defines), "sm_90a").kernel("hgemm_wgmma")
    stub = build.build(source("wgmma"), dict(lau.defines), "sm_90").kernel("hgemm_wgmma")
    # 128 accumulators a consumer thread; the 384-thread block caps the kernel at 168 registers
    assert 128 < full.registers <= 168 and full.barriers >= 1
    assert stub.registers < 16      # __trap(): the plain sm_90 build has no wgmma


@needs_nvcc
def test_the_mutant_is_other_device_code():
    # nvcc -E, not two more builds (3.4 s of a 2-core CI's test loop): that the mutant compiles and
    # fails the check is tests/test_hgemm_gpu.py's.
    for variant in KERNELS:
        lau = plan(variant, n="256")
        arch = "sm_90a" if variant == "wgmma" else "sm_90"
        plain = build_share.device_digest(source(variant), dict(lau.defines), arch)
        mutant = build_share.device_digest(source(variant), {**dict(lau.defines), "HG_MUTATION": "1"}, arch)
        assert None not in (plain, mutant) and plain != mutant, variant


def test_the_tensor_set_names_its_columns_and_a_run_keeps_them():
    """The ladder's figures under their own names (tensor %, HMMA/GMMA instructions), not raw metric names."""
    from cudalab.ncu.metrics import TENSOR_GMMA_INST, TENSOR_HMMA_INST, TENSOR_HMMA_PCT

    mset = ncu.resolve_metrics("tensor")
    assert [f.header for f in mset.table()] == ["tensor pipe %", "HMMA inst", "GMMA inst", "DRAM % peak", "DRAM bytes",
                                                "ncu ns"]
    figures = {TENSOR_HMMA_PCT: 85.2, TENSOR_HMMA_INST: 0.0, TENSOR_GMMA_INST: 1.6e6}

    class Row:
        duration_ns = 1.4e6

        def value(self, name):
            return figures.get(name)

    kept = mset.values(Row())
    assert kept["ncu_tensor"] == 85.2 and kept["ncu_gmma"] == 1.6e6 and kept["ncu_ms"] == 1.4
    cols = mset.instrument().columns
    assert [c.header for c in cols][:3] == ["tensor %", "HMMA inst", "GMMA inst"]
    assert cols[0].cell(kept) == "85.2" and any("wgmma" in line for line in mset.instrument().legend)
