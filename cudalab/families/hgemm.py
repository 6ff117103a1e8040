"""hgemm family: tensor-core C = A·B with bf16 or fp16 inputs and fp32 accumulation and output
(row-major; A is M×K, B is K×N, C is M×N fp32), from wmma fragments through mma.sync pipelines to
Hopper's TMA-fed warp-group MMA (wgmma; ``params.arch = "sm_90a"``: the runner and ``cudalab compile``
build it for that target, :func:`cudalab.plan.variant_arch`).

Inputs. A and B are drawn uniform in [-1, 1) in float32 and rounded to the run's dtype (``--dtype
bfloat16`` or ``float16``, round to nearest even). NumPy has no bfloat16, so bf16 arrays are held as
their 16-bit patterns (``uint16``); the kernels read either as 16-bit elements.

Verification. The reference is the fp32 NumPy product of the *rounded* inputs, so input rounding is
no error: a product of two 16-bit floats is exact in fp32 and only the K-term sums round. Both the
kernel and the reference sum in fp32 (the tensor cores add each 16-product group into the fp32
accumulator, with their own internal rounding), so they differ by a few units of u·sqrt(K)·|C|
(u = 2⁻²⁴). The bounds are matmul's (:func:`cudalab.families.product.check_product`, relative
Frobenius 1e-6·sqrt(K), element 1e-5·sqrt(K) of rms|C|) taken for :data:`TERMS_PER_K` × K terms,
i.e. 8 times wider: room for two fp32 sums and the tensor cores' accumulation, while a dropped K slice
of 16 is off by sqrt(16/K) (0.06 at K = 4096, 200 times the bound) and a wrong tile by far more.
Above 8192³ multiply-adds the result is checked against matmul's sketch (exact sampled rows and
columns, Freivalds projections) of the same rounded inputs.
"""

from __future__ import annotations

import ctypes
import importlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from cudalab import hostwork
from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import GpuError, SizeError, SkipRow
from cudalab.families import Case, Check, Size, SetupContext, Work, product
from cudalab.families import matmul_sketch as sketch
from cudalab.families.base import Family

#: The check's bounds are matmul's for this many times K terms (sqrt(64) = 8 times matmul's).
TERMS_PER_K = 64

#: cuBLAS and CUDA enum values for cublasGemmEx (cublas_api.h, library_types.h).
CUBLAS_OP_N = 0
CUDA_R_32F = 0
CUDA_R_16F = 2
CUDA_R_16BF = 14
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1
_CUDA_TYPES = {"bfloat16": CUDA_R_16BF, "float16": CUDA_R_16F}


@dataclass(frozen=True)
class HalfSize(Size):
    """A Size whose dtype may be ``bfloat16``, which NumPy lacks: its arrays are ``uint16`` bit
    patterns, so :attr:`np_dtype` (sizes, itemsize) answers ``uint16`` for it."""

    @property
    def np_dtype(self) -> np.dtype:
        """float16, or uint16 for bfloat16's bit patterns."""
        return np.dtype(np.uint16) if self.dtype == "bfloat16" else np.dtype(self.dtype)


# --- inputs and answers ---------------------------------------------------------------------------

def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest, ties to even; finite inputs) and return the bit patterns."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bit patterns (exact)."""
    return (np.ascontiguousarray(bits, np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values rounded to ``dtype``, stored as the kernels read them (uint16 bits for bf16)."""
    return to_bf16_bits(x) if dtype == "bfloat16" else x.astype(np.float16)


def as_float32(arr: np.ndarray, dtype: str) -> np.ndarray:
    """The exact float32 values of an input array of ``dtype``."""
    return bf16_bits_to_float32(arr) if dtype == "bfloat16" else np.asarray(arr, np.float16).astype(np.float32)


def tolerances(k: int) -> tuple[float, float]:
    """(relative Frobenius bound, element bound in units of rms|C|) for fp32 sums of k products
    on the tensor cores: matmul's for :data:`TERMS_PER_K` · k terms."""
    return product.tolerances(TERMS_PER_K * max(1, k))


# --- sm_90a and TMA (the wgmma rung) -----------------------------------------------------------------

#: TMA boxes of the wgmma kernel (hgemm_wgmma.cu): A in 128 x 64 boxes (rows x K), B in 64 x 64
#: (K rows x 64 columns); 64 16-bit elements = the 128-byte swizzle span.
TMA_BOX_M, TMA_BOX_K, TMA_BOX_N = 128, 64, 64
#: cuda.h enum values for cuTensorMapEncodeTiled.
CU_TENSOR_MAP_DATA_TYPE_UINT16 = 1
CU_TENSOR_MAP_SWIZZLE_128B = 3
CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2


def tensor_map_2d(ptr: int, rows: int, cols: int, box_cols: int, box_rows: int) -> bytes:
    """The 128-byte CUtensorMap of a row-major rows x cols matrix of 16-bit elements at device
    address ``ptr``, read in box_rows x box_cols boxes with the 128-byte swizzle; outside the matrix
    TMA reads zeros. Encoded by the driver (``cuTensorMapEncodeTiled``, through ctypes: PyCUDA has no
    binding); the bits are the same whether the elements are bf16 or fp16.

    Raises:
        GpuError: the driver library is missing or refuses the map (its CUresult).
    """
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        fn = lib.cuTensorMapEncodeTiled
    except (OSError, AttributeError) as exc:
        raise GpuError(f"cuTensorMapEncodeTiled is not available from the driver: {exc}") from None
    c_p = ctypes.c_void_p
    fn.argtypes = [c_p, ctypes.c_int, ctypes.c_uint32, c_p, c_p, c_p, c_p, c_p, ctypes.c_int, ctypes.c_int,
                   ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    buf = ctypes.create_string_buffer(256)              # the map must be 64-byte aligned
    addr = ctypes.addressof(buf)
    addr += (-addr) % 64
    dims = (ctypes.c_uint64 * 2)(cols, rows)            # innermost first
    strides = (ctypes.c_uint64 * 1)(cols * 2)           # bytes between rows
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    elem = (ctypes.c_uint32 * 2)(1, 1)
    rc = fn(c_p(addr), CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, c_p(ptr), dims, strides, box, elem, 0,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0)
    if rc != 0:
        raise GpuError(f"cuTensorMapEncodeTiled refused a {rows}x{cols} map with {box_rows}x{box_cols} boxes (CUresult {rc})")
    return ctypes.string_at(addr, 128)


def cublas_module(variant: VariantSpec):
    """CuPy's raw cuBLAS bindings that have ``gemmEx``.

    Raises:
        SkipRow: CuPy (or its gemmEx binding) is missing: the row is skipped, saying so.
    """
    product.cupy_module(variant)
    for name in ("cupy_backends.cuda.libs.cublas", "cupy.cuda.cublas"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "gemmEx"):
            return module
    raise SkipRow(f"{variant.name}: this CuPy has no cuBLAS gemmEx binding; reference row skipped")


def _cublas_case(variant: VariantSpec, problem: Size, d_a, d_b, d_c) -> Case:
    """cuBLAS GemmEx with 16-bit inputs, fp32 output and CUBLAS_COMPUTE_32F, one call a launch.

    cuBLAS is column-major: the row-major C = A·B is computed as the column-major Cᵀ = Bᵀ·Aᵀ, every
    operand as it lies (no copies). α = 1 and β = 0 are host scalars (CuPy's handle keeps the host
    pointer mode); the call runs on CuPy's current stream, the default one the events time.
    """
    import cupy  # noqa: PLC0415  (cublas_module checked that it imports)

    cublas = cublas_module(variant)
    m, k, n = problem.dims
    handle = cupy.cuda.device.get_cublas_handle()
    dtype = _CUDA_TYPES[problem.dtype]
    alpha, beta = np.ones(1, np.float32), np.zeros(1, np.float32)
    pa, pb, pc = int(d_a.ptr), int(d_b.ptr), int(d_c.ptr)

    def run() -> None:
        cublas.gemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, alpha.ctypes.data, pb, dtype, n, pa, dtype, k,
                      beta.ctypes.data, pc, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)

    return Case(
        run=run, result=d_c.download, poison=d_c.poison, close=d_c.free,
        notes={"reference": "cublasGemmEx (CUBLAS_COMPUTE_32F) through CuPy", **product.check_note(problem)},
    )


class Hgemm(Family):
    """Tensor-core C = A·B: bf16 or fp16 in, fp32 accumulation and out."""

    SIZE_TYPE = HalfSize  # bfloat16 sizes answer uint16 for their NumPy type

    SIZE_HELP = product.SIZE_HELP
    #: A multiple of every tile (128x128, 128x256), and a size that is not one in any dimension with
    #: whole 16-byte rows (K, N multiples of 8), so the asynchronous copies' zero fill runs too.
    SANITIZE_SIZES = ({"n": "256"}, {"shape": "136x72x200"})
    SIGNATURE = """\
void KERNEL(const unsigned short *A,  // M x K, row-major, 16-bit elements: bf16 or fp16 (HG_BF16 = 1 or 0)
            const unsigned short *B,  // K x N, row-major, same type
            float *C,                 // M x N output, row-major, fp32: C = A.B
            int M,                    // rows of A and C
            int N,                    // columns of B and C
            int K)                    // columns of A, rows of B
// grid: tiles of block x per_thread (or tile=) over C, (N, M): blockIdx.x walks its columns
// (the built-in wgmma kernel takes one more pointer: the TMA tensor maps of A and B)"""

    def host_bytes(self, problem: Size) -> int:
        """The 16-bit inputs, their float32 values (reference and host row), the fp32 reference and
        result, and the check's float64 temporaries; sketched: inputs, float32 values, two results
        and the sketch."""
        m, k, n = problem.dims
        ab16, ab32, c = (m * k + k * n) * 2, (m * k + k * n) * 4, m * n * 4
        if sketch.sketched(problem.dims):
            return ab16 + ab32 + 2 * c + sketch.host_bytes(problem.dims)
        return ab16 + ab32 + 2 * c + 2 * 2 * c

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """Parse ``--n N`` or ``--shape MxKxN`` into (M, K, N), as matmul's sizes.

        Raises:
            UsageError: both given, a malformed size, or a matrix too large for the kernels' int sizes.
        """
        p = product.mkn_problem(n, shape, dtype, options)
        return HalfSize(dims=p.dims, dtype=p.dtype, options=p.options)

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """C's columns along x, its rows along y (every kernel handles partial tiles).

        Raises:
            SizeError: for the TMA kernels (``params.tma``), when K or N is not a multiple of 8: a tensor
                map's row stride must be a multiple of 16 bytes.
        """
        m, k, n = problem.dims
        if variant.param("tma") and (k % 8 or n % 8):
            raise SizeError(f"{variant.name} loads its tiles with TMA, whose row strides must be multiples of 16 bytes: "
                            f"K and N must be multiples of 8 (got K={k}, N={n}); use mma, which takes any size")
        return (n, m, 1)

    def work(self, problem: Size) -> Work:
        """2·M·N·K FLOPs; A and B (2 bytes an element) read once, C (4 bytes) written once."""
        m, k, n = problem.dims
        return Work(bytes=(m * k + k * n) * 2 + m * n * 4, flops=2 * m * n * k)

    def device_bytes(self, problem: Size) -> int:
        """A and B (shared by the variants) plus one C, with slack for cuBLAS's workspace."""
        m, k, n = problem.dims
        return (m * k + k * n) * 2 + m * n * 4 + (64 << 20)

    def defines(self, problem: Size, variant: VariantSpec) -> dict[str, str]:
        """HG_BF16: 1 for bfloat16 inputs, 0 for float16."""
        return {"HG_BF16": "1" if problem.dtype == "bfloat16" else "0"}

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A and B uniform in [-1, 1), rounded to the run's 16-bit type."""
        m, k, n = problem.dims
        return {
            "a": rounded(hostwork.uniform(rng, (m, k), np.float32), problem.dtype),
            "b": rounded(hostwork.uniform(rng, (k, n), np.float32), problem.dtype),
        }

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray | sketch.Sketch:
        """The fp32 NumPy product of the rounded inputs; above the sketch limit, matmul's sketch of it."""
        a = as_float32(inputs["a"], problem.dtype)
        b = as_float32(inputs["b"], problem.dtype)
        if sketch.sketched(problem.dims):
            return sketch.reference(a, b)
        return a @ b

    def check(self, problem: Size, result: np.ndarray, ref: np.ndarray | sketch.Sketch) -> Check:
        """Relative Frobenius and element errors within K-scaled bounds (see the module docstring)."""
        k = problem.dims[1]
        if isinstance(ref, sketch.Sketch):
            return sketch.check(np.asarray(result), ref, *tolerances(k))
        return product.check_product(result, ref, TERMS_PER_K * max(1, k))

    def setup(self, ctx: SetupContext) -> Case:
        """Build the case for one hgemm variant."""
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        m, k, n = problem.dims
        if variant.kind == "host":
            product.refuse_large_host(problem, variant)
            a = as_float32(inputs["a"], problem.dtype)
            b = as_float32(inputs["b"], problem.dtype)
            return product.host_case(lambda: a @ b)
        d_a, d_b = product.upload(ctx, inputs, "a", "b")
        d_c = ctx.device.empty((m, n), np.float32)
        if variant.kind == "library":
            try:
                return _cublas_case(variant, problem, d_a, d_b, d_c)
            except Exception:
                d_c.free()
                raise
        arch = variant.param("arch")
        kern = ctx.kernel()  # built for params.arch (sm_90a for wgmma) by the runner
        args: tuple[Any, ...] = (d_a, d_b, d_c, np.int32(m), np.int32(n), np.int32(k))
        close = d_c.free
        if variant.param("tma"):
            try:
                maps = tensor_map_2d(int(d_a.ptr), m, k, TMA_BOX_K, TMA_BOX_M) + tensor_map_2d(int(d_b.ptr), k, n, TMA_BOX_N, TMA_BOX_K)
                d_maps = ctx.device.to_device(np.frombuffer(maps, np.uint8))
            except Exception:
                d_c.free()
                raise
            args += (d_maps,)

            def close() -> None:
                d_c.free()
                d_maps.free()
        return Case(
            run=lambda: kern.launch(launch.grid, launch.block, args, launch.shared),
            result=d_c.download, poison=d_c.poison, close=close,
            notes={"registers": kern.num_regs, **({"arch": arch} if arch else {}), **product.check_note(problem)},
        )


FAMILY = Hgemm()

