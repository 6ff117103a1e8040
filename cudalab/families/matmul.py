"""matmul family: fp32 C = A·B (row-major, A is M×K, B is K×N), from the naive kernel to
register-blocked tiles near cuBLAS.

Verification is :func:`cudalab.families.product.check_product`: the float64 product of the float32
inputs as the reference, relative Frobenius and element errors within bounds that grow with sqrt(K)
(the rationale is in :mod:`cudalab.families.product`); above 8192³ multiply-adds, a sketch
(:mod:`cudalab.families.matmul_sketch`). The product helpers gemm, gemv and hgemm share live in
:mod:`cudalab.families.product`.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from cudalab import hostwork
from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import SizeError, SkipRow, UsageError
from cudalab.families import Case, Check, FamilyOption, Size, SetupContext, Work, product
from cudalab.families import matmul_sketch as sketch
from cudalab.families.base import Family

MAX_TILE = 32  # tiled and tiled-any: a TILE×TILE block has at most 1024 threads
EXAMPLE_N, EXAMPLE_TILE = 9, 3


def example_problem(n: str | None, shape: str | None, options: dict) -> Size:
    """``--example``: the course's 9×9 exercise with tile 3 (refuses another size or tile).

    Raises:
        UsageError: --shape, an --n other than 9 or a --tile other than the default or 3.
    """
    if shape or (n and L.parse_size(n, "--n") != EXAMPLE_N):
        raise UsageError(f"--example is the {EXAMPLE_N}x{EXAMPLE_N} exercise: leave out --n / --shape")
    if options.get("tile") not in (None, 32, EXAMPLE_TILE):
        raise UsageError(f"--example runs tile {EXAMPLE_TILE}: leave out --tile")
    opts = dict(options, tile=EXAMPLE_TILE, example=True)
    return Size(dims=(EXAMPLE_N,) * 3, dtype="float32", options=tuple(sorted(opts.items())))


def example_inputs() -> dict[str, np.ndarray]:
    """The exercise's matrices: A[i][j] = 9i + j (0..80) and B = 2A."""
    a = np.arange(EXAMPLE_N * EXAMPLE_N, dtype=np.float32).reshape(EXAMPLE_N, EXAMPLE_N)
    return {"a": a, "b": 2 * a}


def tile_option(problem: Size) -> int:
    """The --tile value (32 when the run has none)."""
    return int(problem.opt("tile", 32) or 32)


class Matmul(Family):
    """fp32 C = A·B."""

    OPTIONS: tuple[FamilyOption, ...] = (
        FamilyOption("tile", int, 32, f"tile width of tiled and tiled-any: blocks of TILE x TILE threads (1..{MAX_TILE})"),
        FamilyOption("example", bool, False, "the course's 9x9 exercise: n 9, tile 3, A[i][j] = 9i + j, B = 2A; "
                     "shows A, B, each result and NumPy's"),
    )
    SIZE_HELP = product.SIZE_HELP
    SHOW = True
    SIGNATURE = """\
void KERNEL(const float *A,    // M x K, row-major
            const float *B,    // K x N, row-major
            float *C,          // M x N output, row-major: C = A.B
            int M,             // rows of A and C
            int N,             // columns of B and C
            int K)             // columns of A, rows of B
// grid: tiles of block x per_thread (or tile=) over C, (N, M): blockIdx.x walks its columns"""

    def host_bytes(self, problem: Size) -> int:
        """A and B, their float64 copies while the float64 reference is computed, the reference, the
        result, and the check's float64 temporaries (result, difference); sketched: A and B, the two
        poisoned results and the sketch."""
        m, k, n = problem.dims
        ab, c = (m * k + k * n) * 4, m * n * 4
        if sketch.sketched(problem.dims):
            return ab + 2 * c + sketch.host_bytes(problem.dims)
        return product.full_host_bytes(problem)

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """Parse ``--n N`` (N×N times N×N) or ``--shape MxKxN`` into dims (M, K, N); ``--example``: the 9×9 exercise.

        Raises:
            UsageError: both given, a malformed size, a tile outside 1..32, or a matrix too large to index.
        """
        if options.get("example") and not (n and shape):
            return example_problem(n, shape, options)
        p = product.mkn_problem(n, shape, dtype, options)
        tile = options.get("tile")
        if tile is not None and not 1 <= int(tile) <= MAX_TILE:
            raise UsageError(f"--tile must be between 1 and {MAX_TILE} (a TILE x TILE block); got {tile}")
        return p

    def default_block(self, variant: VariantSpec, problem: Size) -> L.Dim3:
        """tiled and tiled-any run TILE×TILE threads (``--tile``); the others their family.toml block."""
        if variant.param("block_from_tile"):
            t = tile_option(problem)
            return (t, t, 1)
        return variant.block

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """C's columns along x, its rows along y.

        Raises:
            SizeError: for kernels without a bounds-checked k loop (``tiled``), when M, N or K is not a
                multiple of the tile. M and N are also checked by the runner's ``divisible`` rule; K is
                not a grid axis, so it is checked here.
        """
        m, k, n = problem.dims
        if variant.param("k_multiple_of_tile"):
            t = tile_option(problem)
            if m % t or k % t or n % t:
                raise SizeError(
                    f"{variant.name} handles only M, N and K that are multiples of its tile {t} "
                    f"(no bounds checks); got M={m}, K={k}, N={n}: use tiled-any, or a size such as {max(t, (m // t) * t)}"
                )
        return (n, m, 1)

    def work(self, problem: Size) -> Work:
        """2·M·N·K FLOPs; A, B and C each moved once."""
        m, k, n = problem.dims
        return Work(bytes=(m * k + k * n + m * n) * 4, flops=2 * m * n * k)

    def device_bytes(self, problem: Size) -> int:
        """A and B (shared by the variants) plus one C, with slack for cuBLAS's workspace."""
        m, k, n = problem.dims
        return (m * k + k * n + m * n) * 4 + (64 << 20)

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A and B uniform in [-1, 1): no structure a wrong index could hide behind (``--example``: its own)."""
        if problem.opt("example"):
            return example_inputs()
        m, k, n = problem.dims
        return {
            "a": hostwork.uniform(rng, (m, k), np.float32),
            "b": hostwork.uniform(rng, (k, n), np.float32),
        }

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray | sketch.Sketch:
        """The float64 product of the float32 inputs (exact inputs, so only the kernel's rounding shows);
        above :data:`~cudalab.families.matmul_sketch.FULL_LIMIT` multiply-adds, its sketch."""
        if sketch.sketched(problem.dims):
            return sketch.reference(inputs["a"], inputs["b"])
        return inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)

    def check(self, problem: Size, result: np.ndarray, ref: np.ndarray | sketch.Sketch) -> Check:
        """Relative Frobenius and element errors within bounds that grow with sqrt(K) (or the sketch's tests)."""
        if isinstance(ref, sketch.Sketch):
            return sketch.check(np.asarray(result), ref, *product.tolerances(problem.dims[1]))
        return product.check_product(result, ref, problem.dims[1])

    def show(self, problem: Size, inputs: dict[str, np.ndarray], result: np.ndarray | None) -> str:
        """Print the inputs and the result of a small problem (``--show``); the 9×9 exercise adds NumPy's answer."""
        numpy = self.reference(problem, inputs) if result is None and problem.opt("example") and inputs else None
        return product.show(problem, inputs, result, numpy)

    def setup(self, ctx: SetupContext) -> Case:
        """Build the case for one matmul variant."""
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        m, k, n = problem.dims
        if variant.kind == "host":
            product.refuse_large_host(problem, variant)
            a, b = inputs["a"], inputs["b"]
            return product.host_case(lambda: a @ b)
        d_a, d_b = product.upload(ctx, inputs, "a", "b")
        d_c = ctx.device.empty((m, n), np.float32)
        if variant.kind == "library":
            try:
                cupy = product.cupy_module(variant)
            except SkipRow:
                d_c.free()
                raise
            av, bv, cv = d_a.cupy(), d_b.cupy(), d_c.cupy()
            return Case(
                run=lambda: cupy.matmul(av, bv, out=cv),
                result=d_c.download, poison=d_c.poison, close=d_c.free,
                notes={"reference": "cupy.matmul (cuBLAS SGEMM)", "tf32": os.environ.get("CUPY_TF32", "0"),
                       **product.check_note(problem)},
            )
        kern = ctx.kernel()
        args: list[Any] = [d_a, d_b, d_c, np.int32(m), np.int32(n), np.int32(k)]
        if variant.param("runtime_tile"):
            args.append(np.int32(launch.block[0]))
        close = d_c.free
        if variant.param("workspace"):  # stream-K: a partial tile and a flag a block, flags zero at the start
            blocks = launch.grid[0] * launch.grid[1] * launch.grid[2]
            d_ws = ctx.device.empty((blocks * (launch.tile[0] * launch.tile[1] + 1),), np.float32)
            d_ws.poison(0)
            args.append(d_ws)
            close = lambda: (d_c.free(), d_ws.free())  # noqa: E731
        args_t = tuple(args)
        return Case(
            run=lambda: kern.launch(launch.grid, launch.block, args_t, launch.shared),
            result=d_c.download, poison=d_c.poison, close=close,
            notes={"registers": kern.num_regs, **product.check_note(problem)},
        )


FAMILY = Matmul()
