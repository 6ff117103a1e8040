"""gemm family: fp32 Z = α·A·B + β·C (row-major; A is M×K, B is K×N, C and Z are M×N).

The kernels are the matmul family's best rungs with an α/β epilogue. Z is a separate output, so
every timed launch does the same work and C survives for the next sample; with β = 0, C is not
read (the BLAS convention). Verification is matmul's (errors bounded by a multiple of sqrt(K),
see :mod:`cudalab.families.product`) against α·(A·B) + β·C computed in float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cudalab import hostwork
from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import UsageError
from cudalab.families import Case, Check, FamilyOption, Size, SetupContext, Work, product
from cudalab.families.base import Family


def scalars(problem: Size) -> tuple[float, float]:
    """(α, β), defaults 1 and 0."""
    return float(problem.opt("alpha", 1.0)), float(problem.opt("beta", 0.0))


def _cublas_case(ctx, variant: VariantSpec, d_a, d_b, d_c, d_z, alpha: float, beta: float) -> Case:
    """cuBLAS SGEMM through ``cupy.cublas.gemm``, which updates its output in place.

    cuBLAS is column-major: a row-major M×N array is its N×M transpose there, so the row-major
    Z = α·A·B + β·C is computed as the column-major Zᵀ = α·Bᵀ·Aᵀ + β·Cᵀ, every operand
    F-contiguous (no copies). The in-place output gets C back before every launch (untimed reset);
    with β = 0 it is not read, so it is poisoned like the kernels' outputs.
    """
    cupy = product.cupy_module(variant)
    av, bv, zv = d_a.cupy(), d_b.cupy(), d_z.cupy()
    notes: dict[str, Any] = {}
    sgemm = product.cublas_function("gemm")
    if sgemm is not None:
        def run() -> None:
            sgemm("N", "N", bv.T, av.T, out=zv.T, alpha=alpha, beta=beta)
        notes["reference"] = "cupy.cublas.gemm (cuBLAS SGEMM, alpha and beta inside)"
    else:  # an old CuPy: not one sgemm call, and labelled so
        cv = d_c.cupy()

        def run() -> None:
            cupy.add(alpha * cupy.matmul(av, bv), beta * cv, out=zv)
        notes["reference"] = "cupy.matmul + elementwise (this CuPy has no cupy.cublas.gemm)"
    in_place = sgemm is not None and beta != 0.0
    return Case(
        run=run, result=d_z.download, close=d_z.free,
        reset=(lambda: d_z.copy_from(d_c)) if in_place else (lambda: None),
        poison=(lambda byte=0xFF: None) if in_place else d_z.poison,
        notes=notes,
    )


class Gemm(Family):
    """fp32 Z = α·A·B + β·C: the product helpers' sizes, check and show; its own inputs, reference and setup."""

    OPTIONS: tuple[FamilyOption, ...] = (
        FamilyOption("alpha", float, 1.0, "alpha in Z = alpha*A.B + beta*C"),
        FamilyOption("beta", float, 0.0, "beta in Z = alpha*A.B + beta*C (0: C is not read)"),
    )
    SIZE_HELP = product.SIZE_HELP
    SHOW = True
    SIGNATURE = """\
void KERNEL(const float *A,    // M x K, row-major
            const float *B,    // K x N, row-major
            const float *C,    // M x N, row-major (not read when beta = 0)
            float *Z,          // M x N output, row-major: Z = alpha A.B + beta C
            int M,             // rows of A, C and Z
            int N,             // columns of B, C and Z
            int K,             // columns of A, rows of B
            float alpha,       // --alpha
            float beta)        // --beta
// grid: tiles of block x per_thread (or tile=) over Z, (N, M): blockIdx.x walks its columns"""

    def host_bytes(self, problem: Size) -> int:
        """As matmul's with its full float64 reference (gemm has no sketch check), plus C."""
        m, _, n = problem.dims
        return product.full_host_bytes(problem) + m * n * 4

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """Parse ``--n N`` or ``--shape MxKxN`` into (M, K, N), keeping α and β.

        Raises:
            UsageError: as matmul's sizes, or an α/β that is not a finite number.
        """
        for name in ("alpha", "beta"):
            value = options.get(name)
            if value is not None and not np.isfinite(float(value)):
                raise UsageError(f"--{name} must be a finite number (got {value})")
        return product.mkn_problem(n, shape, dtype, options)

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """Z's columns along x, its rows along y."""
        m, _, n = problem.dims
        return (n, m, 1)

    def work(self, problem: Size) -> Work:
        """2·M·N·K FLOPs (the epilogue's 3·M·N is noise); A, B, Z moved once, C too when β ≠ 0."""
        m, k, n = problem.dims
        _, beta = scalars(problem)
        return Work(bytes=(m * k + k * n + m * n * (2 if beta else 1)) * 4, flops=2 * m * n * k)

    def device_bytes(self, problem: Size) -> int:
        """A, B, C (shared) plus one Z, with slack for cuBLAS's workspace."""
        m, k, n = problem.dims
        return (m * k + k * n + 2 * m * n) * 4 + (64 << 20)

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A, B and C uniform in [-1, 1)."""
        m, k, n = problem.dims
        return {
            "a": hostwork.uniform(rng, (m, k), np.float32),
            "b": hostwork.uniform(rng, (k, n), np.float32),
            "c": hostwork.uniform(rng, (m, n), np.float32),
        }

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """α·(A·B) + β·C in float64."""
        alpha, beta = scalars(problem)
        f64 = np.float64
        return alpha * (inputs["a"].astype(f64) @ inputs["b"].astype(f64)) + beta * inputs["c"].astype(f64)

    def check(self, problem: Size, result: np.ndarray, ref: np.ndarray) -> Check:
        """matmul's bounds for K-term sums."""
        return product.check_product(result, ref, problem.dims[1])

    def show(self, problem: Size, inputs: dict[str, np.ndarray], result: np.ndarray | None) -> str:
        """Print the inputs and the result of a small problem (``--show``)."""
        return product.show(problem, inputs, result)

    def setup(self, ctx: SetupContext) -> Case:
        """Build the case for one gemm variant."""
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        m, k, n = problem.dims
        alpha, beta = scalars(problem)
        if variant.kind == "host":
            product.refuse_large_host(problem, variant)
            a, b, c = inputs["a"], inputs["b"], inputs["c"]
            a32, b32 = np.float32(alpha), np.float32(beta)
            return product.host_case(lambda: a32 * (a @ b) + b32 * c)
        d_a, d_b, d_c = product.upload(ctx, inputs, "a", "b", "c")
        d_z = ctx.device.empty((m, n), np.float32)
        if variant.kind == "library":
            try:
                return _cublas_case(ctx, variant, d_a, d_b, d_c, d_z, alpha, beta)
            except Exception:
                d_z.free()
                raise
        kern = ctx.kernel()
        args: tuple[Any, ...] = (d_a, d_b, d_c, d_z, np.int32(m), np.int32(n), np.int32(k),
                                 np.float32(alpha), np.float32(beta))
        return Case(
            run=lambda: kern.launch(launch.grid, launch.block, args, launch.shared),
            result=d_z.download, poison=d_z.poison, close=d_z.free,
            notes={"registers": kern.num_regs},
        )


FAMILY = Gemm()
