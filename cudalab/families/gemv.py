"""gemv family: fp32 z = α·A·x + β·y (A is M×N row-major, x has N elements, y and z M).

A memory-bound pass over A: the rate is GB/s of the necessary bytes, (M·N + N + M)·4 (A and x
read, z written; y adds M·4 when β ≠ 0, since only then is it read), as a % of the copy roofline.
z is a separate output, so every timed launch does the same work. Verification is matmul's
with N-term sums (bounds grow with sqrt(N), see :mod:`cudalab.families.product`).
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

DEFAULT_N = 8192


def scalars(problem: Size) -> tuple[float, float]:
    """(α, β), defaults 1 and 0."""
    return float(problem.opt("alpha", 1.0)), float(problem.opt("beta", 0.0))


def _cublas_case(variant: VariantSpec, d_a, d_x, d_y, d_z, alpha: float, beta: float) -> Case:
    """cuBLAS SGEMV through ``cupy.cublas.gemv``, which updates its output vector in place.

    The row-major A is the column-major N×M matrix Aᵀ, so the call is gemv('T') on that
    F-contiguous view: no copy. z gets y back before every launch (untimed) when β ≠ 0.
    """
    cupy = product.cupy_module(variant)
    av, xv, zv = d_a.cupy(), d_x.cupy(), d_z.cupy()
    sgemv = product.cublas_function("gemv")
    notes: dict[str, Any] = {}
    if sgemv is not None:
        def run() -> None:
            sgemv("T", alpha, av.T, xv, beta, zv)
        notes["reference"] = "cupy.cublas.gemv (cuBLAS SGEMV)"
    else:
        yv = d_y.cupy()

        def run() -> None:
            cupy.add(alpha * cupy.matmul(av, xv), beta * yv, out=zv)
        notes["reference"] = "cupy.matmul + elementwise (this CuPy has no cupy.cublas.gemv)"
    in_place = sgemv is not None and beta != 0.0
    return Case(
        run=run, result=d_z.download, close=d_z.free,
        reset=(lambda: d_z.copy_from(d_y)) if in_place else (lambda: None),
        poison=(lambda byte=0xFF: None) if in_place else d_z.poison,
        notes=notes,
    )


class Gemv(Family):
    """fp32 y = α·A·x + β·y."""

    OPTIONS: tuple[FamilyOption, ...] = (
        FamilyOption("alpha", float, 1.0, "alpha in z = alpha*A.x + beta*y"),
        FamilyOption("beta", float, 0.0, "beta in z = alpha*A.x + beta*y (0: y is not read)"),
    )
    SIZE_HELP = "square matrix (--n 8192) or --shape MxN for an M x N matrix; default 8192"
    SIGNATURE = """\
void KERNEL(const float *A,    // M x N, row-major
            const float *x,    // N elements
            const float *y,    // M elements (not read when beta = 0)
            float *z,          // M elements output: z = alpha A.x + beta y
            int M,             // rows of A
            int N,             // columns of A
            float alpha,       // --alpha
            float beta)        // --beta
// grid: tiles of block x per_thread over the M rows along x (one thread a row)"""

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """Parse ``--n N`` (N×N) or ``--shape MxN`` into (M, N).

        Raises:
            UsageError: both given, a malformed size, a matrix beyond int indexing, a non-finite α/β.
        """
        if n and shape:
            raise UsageError("give --n or --shape, not both")
        dims = L.parse_shape(shape, 2) if shape else (L.parse_size(n, "--n"),) * 2 if n else (DEFAULT_N, DEFAULT_N)
        if dims[0] * dims[1] >= 2**31:
            raise UsageError(f"{dims[0]}x{dims[1]}: a matrix of 2^31 elements or more is beyond the kernels' int sizes")
        for name in ("alpha", "beta"):
            value = options.get(name)
            if value is not None and not np.isfinite(float(value)):
                raise UsageError(f"--{name} must be a finite number (got {value})")
        return Size(dims=tuple(dims), dtype=dtype, options=tuple(sorted(options.items())))

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """Rows along x (one thread a row); for warp-row, 32 lanes along x and the rows along y."""
        m, _ = problem.dims
        return (32, m, 1) if variant.param("warp_per_row") else (m, 1, 1)

    def work(self, problem: Size) -> Work:
        """A and x read, z written (y read too when β ≠ 0); 2·M·N FLOPs."""
        m, n = problem.dims
        _, beta = scalars(problem)
        return Work(bytes=(m * n + n + m + (m if beta else 0)) * 4, flops=2 * m * n, written=m * 4)

    def device_bytes(self, problem: Size) -> int:
        """A and Aᵀ (coalesced reads the transposed copy), the vectors, and slack."""
        m, n = problem.dims
        return (2 * m * n + n + 3 * m) * 4 + (16 << 20)

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A, x and y uniform in [-1, 1)."""
        m, n = problem.dims
        return {
            "a": hostwork.uniform(rng, (m, n), np.float32),
            "x": hostwork.uniform(rng, n, np.float32),
            "y": hostwork.uniform(rng, m, np.float32),
        }

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """α·(A·x) + β·y in float64."""
        alpha, beta = scalars(problem)
        f64 = np.float64
        return alpha * (inputs["a"].astype(f64) @ inputs["x"].astype(f64)) + beta * inputs["y"].astype(f64)

    def check(self, problem: Size, result: np.ndarray, ref: np.ndarray) -> Check:
        """Bounds for N-term sums (matmul's)."""
        return product.check_product(result, ref, problem.dims[1])

    def setup(self, ctx: SetupContext) -> Case:
        """Build the case for one gemv variant."""
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        m, n = problem.dims
        alpha, beta = scalars(problem)
        if variant.kind == "host":
            a, x, y = inputs["a"], inputs["x"], inputs["y"]
            a32, b32 = np.float32(alpha), np.float32(beta)
            return product.host_case(lambda: a32 * (a @ x) + b32 * y)
        d_a, d_x, d_y = product.upload(ctx, inputs, "a", "x", "y")
        d_z = ctx.device.empty((m,), np.float32)
        if variant.kind == "library":
            try:
                return _cublas_case(variant, d_a, d_x, d_y, d_z, alpha, beta)
            except Exception:
                d_z.free()
                raise
        matrix = d_a
        notes: dict[str, Any] = {}
        if variant.param("transposed_input"):
            # The layout is the point of this variant: it reads Aᵀ (A column-major), transposed
            # once on the host and uploaded untimed, shared with any later variant.
            matrix = ctx.shared("at", lambda: ctx.device.to_device(np.ascontiguousarray(inputs["a"].T)))
            notes["input"] = "A transposed (column-major), uploaded untimed"
        kern = ctx.kernel()
        notes["registers"] = kern.num_regs
        args = (matrix, d_x, d_y, d_z, np.int32(m), np.int32(n), np.float32(alpha), np.float32(beta))
        return Case(
            run=lambda: kern.launch(launch.grid, launch.block, args, launch.shared),
            result=d_z.download, poison=d_z.poison, close=d_z.free, notes=notes,
        )


FAMILY = Gemv()
