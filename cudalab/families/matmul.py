"""matmul family: fp32 C = A·B (row-major, A is M×K, B is K×N), from the naive kernel to
register-blocked tiles near cuBLAS; also the product helpers the gemm and gemv families share.

Verification. The reference is the float64 product of the float32 inputs, so the only error is
the kernel's fp32 arithmetic. Summing K products in fp32 gives each element an error of about
u·sqrt(K)·|C| for random data (u = 2⁻²⁴ ≈ 6e-8 the unit roundoff; the rounding errors of the K
additions are independent, so they add like a random walk), and about u·K in the worst case.
A result passes when both hold:

* relative Frobenius error ‖C − C_ref‖_F / ‖C_ref‖_F ≤ 1e-6·sqrt(K) (about 16·u·sqrt(K):
  room for any summation order, FMA or not, split K, while a wrong tile is off by 1e-1 or more);
* largest element error / rms(C_ref) ≤ 1e-5·sqrt(K): one wrong element in a large matrix
  hardly moves the Frobenius norm, but it is as large as a typical element, so this catches it.

Poisoned outputs (NaN) fail before either test. Above 8192³ multiply-adds the float64 reference
would take the host minutes; those products are checked against a sketch instead (exact sampled rows
and columns, Freivalds projections; :mod:`cudalab.families.matmul_sketch`), and the rows say so.
"""

from __future__ import annotations

import importlib
import math
import os
from typing import Any

import numpy as np

from cudalab import hostwork
from cudalab import launch as L
from cudalab.catalog import VariantSpec
from cudalab.errors import SizeError, UsageError
from cudalab.families import Case, Check, FamilyOption, Launch, Problem, Work
from cudalab.families import matmul_sketch as sketch
from cudalab.families.base import Family
from cudalab.families.model import where as first_at

MAX_TILE = 32  # tiled and tiled-any: a TILE×TILE block has at most 1024 threads
OPTIONS: tuple[FamilyOption, ...] = (
    FamilyOption("tile", int, 32, f"tile width of tiled and tiled-any: blocks of TILE x TILE threads (1..{MAX_TILE})"),
    FamilyOption("example", bool, False, "the course's 9x9 exercise: n 9, tile 3, A[i][j] = 9i + j, B = 2A; "
                 "shows A, B, each result and NumPy's"),
)
EXAMPLE_N, EXAMPLE_TILE = 9, 3
SIZE_HELP = "square matrices (--n 4096) or --shape MxKxN for (MxK)·(KxN); default 4096"
DEFAULT_N = 4096
HOST_LIMIT = 4096**3
"""The host row is skipped above this many multiply-adds (M·N·K): NumPy would take seconds per sample."""
FRO_PER_SQRT_K = 1e-6
ELEM_PER_SQRT_K = 1e-5
SHOW_LIMIT = 16


# --- sizes ---------------------------------------------------------------------------------------

def mkn_problem(n: str | None, shape: str | None, dtype: str, options: dict, default: int = DEFAULT_N) -> Problem:
    """Parse ``--n N`` (N×N times N×N) or ``--shape MxKxN`` into dims (M, K, N).

    Raises:
        UsageError: both given, a malformed size, a tile outside 1..32, or a matrix too large to index.
    """
    if n and shape:
        raise UsageError("give --n or --shape, not both")
    if options.get("example"):
        return example_problem(n, shape, options)
    if shape:
        dims = L.parse_shape(shape, 3)
    else:
        side = L.parse_size(n, "--n") if n else default
        dims = (side, side, side)
    m, k, nn = dims
    if max(m * k, k * nn, m * nn) >= 2**31:
        raise UsageError(f"{m}x{k}x{nn}: a matrix of 2^31 elements or more is beyond the kernels' int sizes")
    tile = options.get("tile")
    if tile is not None and not 1 <= int(tile) <= MAX_TILE:
        raise UsageError(f"--tile must be between 1 and {MAX_TILE} (a TILE x TILE block); got {tile}")
    return Problem(dims=tuple(dims), dtype=dtype, options=tuple(sorted(options.items())))


def example_problem(n: str | None, shape: str | None, options: dict) -> Problem:
    """``--example``: the course's 9×9 exercise with tile 3 (refuses another size or tile).

    Raises:
        UsageError: --shape, an --n other than 9 or a --tile other than the default or 3.
    """
    if shape or (n and L.parse_size(n, "--n") != EXAMPLE_N):
        raise UsageError(f"--example is the {EXAMPLE_N}x{EXAMPLE_N} exercise: leave out --n / --shape")
    if options.get("tile") not in (None, 32, EXAMPLE_TILE):
        raise UsageError(f"--example runs tile {EXAMPLE_TILE}: leave out --tile")
    opts = dict(options, tile=EXAMPLE_TILE, example=True)
    return Problem(dims=(EXAMPLE_N,) * 3, dtype="float32", options=tuple(sorted(opts.items())))


def example_inputs() -> dict[str, np.ndarray]:
    """The exercise's matrices: A[i][j] = 9i + j (0..80) and B = 2A."""
    a = np.arange(EXAMPLE_N * EXAMPLE_N, dtype=np.float32).reshape(EXAMPLE_N, EXAMPLE_N)
    return {"a": a, "b": 2 * a}


problem = mkn_problem


def tile_option(problem: Problem) -> int:
    """The --tile value (32 when the run has none)."""
    return int(problem.opt("tile", 32) or 32)


def default_block(variant: VariantSpec, problem: Problem) -> L.Dim3:
    """tiled and tiled-any run TILE×TILE threads (``--tile``); the others their family.toml block."""
    if variant.param("block_from_tile"):
        t = tile_option(problem)
        return (t, t, 1)
    return variant.block


def extent(problem: Problem, variant: VariantSpec) -> L.Dim3:
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


def work(problem: Problem) -> Work:
    """2·M·N·K FLOPs; A, B and C each moved once."""
    m, k, n = problem.dims
    return Work(bytes=(m * k + k * n + m * n) * 4, flops=2 * m * n * k)


def device_bytes(problem: Problem) -> int:
    """A and B (shared by the variants) plus one C, with slack for cuBLAS's workspace."""
    m, k, n = problem.dims
    return (m * k + k * n + m * n) * 4 + (64 << 20)


# --- inputs and answers ---------------------------------------------------------------------------

def make_inputs(problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A and B uniform in [-1, 1): no structure a wrong index could hide behind (``--example``: its own)."""
    if problem.opt("example"):
        return example_inputs()
    m, k, n = problem.dims
    return {
        "a": hostwork.uniform(rng, (m, k), np.float32),
        "b": hostwork.uniform(rng, (k, n), np.float32),
    }


def reference(problem: Problem, inputs: dict[str, np.ndarray]) -> np.ndarray | sketch.Sketch:
    """The float64 product of the float32 inputs (exact inputs, so only the kernel's rounding shows);
    above :data:`~cudalab.families.matmul_sketch.FULL_LIMIT` multiply-adds, its sketch."""
    if sketch.sketched(problem.dims):
        return sketch.reference(inputs["a"], inputs["b"])
    return inputs["a"].astype(np.float64) @ inputs["b"].astype(np.float64)


def tolerances(k: int) -> tuple[float, float]:
    """(relative Frobenius bound, element bound relative to rms(C_ref)) for sums of k products."""
    s = math.sqrt(max(1, k))
    return FRO_PER_SQRT_K * s, ELEM_PER_SQRT_K * s


def check_product(result: np.ndarray, ref: np.ndarray, k: int) -> Check:
    """Compare an fp32 result of k-term sums with its float64 reference (see the module docstring).

    ``max_error`` is the relative Frobenius error; the detail names the element test when it fails.
    """
    fro_tol, elem_tol = tolerances(k)
    result = np.asarray(result)
    ref = np.asarray(ref)
    if result.shape != ref.shape:
        return Check(False, float("inf"), fro_tol, f" (shape {result.shape}, expected {ref.shape})")
    r = result.astype(np.float64)
    bad = int(np.count_nonzero(~np.isfinite(r)))
    if bad:
        return Check(False, float("nan"), fro_tol,
                     f" ({bad} elements unwritten, NaN or inf, first at {first_at(~np.isfinite(r))})")
    if r.size == 0:
        return Check(True, 0.0, fro_tol)
    diff = r - ref
    ref_norm = float(np.linalg.norm(ref))
    scale = ref_norm if ref_norm > 0 else 1.0
    fro = float(np.linalg.norm(diff)) / scale
    rms = scale / math.sqrt(ref.size)
    worst = int(np.argmax(np.abs(diff)))
    elem = float(abs(diff.flat[worst])) / rms
    where = tuple(int(i) for i in np.unravel_index(worst, ref.shape))
    if fro > fro_tol:
        return Check(False, fro, fro_tol, f" (relative Frobenius error; worst element {where}: {elem:.3g} x rms|C|)")
    if elem > elem_tol:
        # Report the element test's own figures, so "max error > tolerance" reads true.
        return Check(False, elem, elem_tol,
                     f" (element {where}, in units of rms|C|; the Frobenius error {fro:.3g} is within bound)")
    return Check(True, fro, fro_tol)


def check(problem: Problem, result: np.ndarray, ref: np.ndarray | sketch.Sketch) -> Check:
    """Relative Frobenius and element errors within bounds that grow with sqrt(K) (or the sketch's tests)."""
    if isinstance(ref, sketch.Sketch):
        return sketch.check(np.asarray(result), ref, *tolerances(problem.dims[1]))
    return check_product(result, ref, problem.dims[1])


def check_note(problem: Problem) -> dict[str, str]:
    """The note a sketch-checked row carries (JSON ``extra.check``)."""
    return {"check": "sketch: sampled rows and columns, Freivalds projections"} if sketch.sketched(problem.dims) else {}


def show(problem: Problem, inputs: dict[str, np.ndarray], result: np.ndarray | None) -> str:
    """Print the inputs and the result of a small problem (``--show``), e.g. the 9×9 exercise."""
    if max(problem.dims) > SHOW_LIMIT:
        return f"--show prints matrices up to {SHOW_LIMIT} on a side; this problem is {problem.label}"
    parts = []
    with np.printoptions(precision=3, suppress=True, linewidth=160, floatmode="fixed"):
        for name, arr in inputs.items():
            parts.append(f"{name.upper()} ({'x'.join(map(str, arr.shape))}) =\n{arr}")
        if result is not None:
            res = np.asarray(result)
            parts.append(f"result ({'x'.join(map(str, res.shape))}) =\n{res}")
        elif problem.opt("example") and inputs:
            parts.append(f"NumPy A @ B =\n{reference(problem, inputs)}")
    return "\n".join(parts)


# --- running --------------------------------------------------------------------------------------

def upload(ctx, inputs: dict[str, np.ndarray], *names: str) -> list[Any]:
    """Upload the named inputs once per run (contiguous, unpitched: the kernels index rows by their length)."""
    return [ctx.upload(np.ascontiguousarray(inputs[name]))
            for name in names]


def host_case(fn) -> Case:
    """A NumPy row: ``fn()`` timed with the host clock."""
    box: dict[str, np.ndarray] = {}

    def run() -> None:
        box["out"] = fn()

    return Case(run=run, result=lambda: box["out"], timer="host")


def refuse_large_host(problem: Problem, variant: VariantSpec) -> None:
    """Skip the host row above :data:`HOST_LIMIT` multiply-adds, saying so.

    Raises:
        SizeError: always above the limit (the runner turns it into a Skipped row).
    """
    m, k, n = problem.dims
    if m * n * k > HOST_LIMIT:
        raise SizeError(f"{variant.name}: NumPy on the CPU is skipped above 4096^3 multiply-adds "
                        f"(M*N*K = {m * n * k:.3g}): each sample would take seconds")


def cupy_module(variant: VariantSpec):
    """Import CuPy for a library row.

    Raises:
        UsageError: CuPy is not installed (the runner shows the row as skipped).
    """
    try:
        import cupy  # noqa: PLC0415  (optional: only the reference rows use it)
    except ImportError:
        raise UsageError(f"{variant.name}: CuPy is not installed (pip install cupy-cuda12x); reference row skipped") from None
    return cupy


def cublas_function(name: str):
    """``cupy.cublas.<name>`` (gemm, gemv), or None in a CuPy without it.

    ``cupy.cublas`` is a submodule that ``import cupy`` does not load: import it by name.
    """
    try:
        module = importlib.import_module("cupy.cublas")
    except ImportError:
        return None
    return getattr(module, name, None)


def setup(ctx, variant: VariantSpec, launch: Launch, problem: Problem, inputs: dict, kernels) -> Case:
    """Build the case for one matmul variant."""
    m, k, n = problem.dims
    if variant.kind == "host":
        refuse_large_host(problem, variant)
        a, b = inputs["a"], inputs["b"]
        return host_case(lambda: a @ b)
    d_a, d_b = upload(ctx, inputs, "a", "b")
    d_c = ctx.device.empty((m, n), np.float32)
    if variant.kind == "library":
        from cudalab import gpu  # noqa: PLC0415  (gpu stays out of CPU-only imports)

        try:
            cupy = cupy_module(variant)
        except UsageError:
            d_c.free()
            raise
        av, bv, cv = gpu.cupy_view(d_a), gpu.cupy_view(d_b), gpu.cupy_view(d_c)
        return Case(
            run=lambda: cupy.matmul(av, bv, out=cv),
            result=d_c.download, poison=d_c.poison, close=d_c.free,
            notes={"reference": "cupy.matmul (cuBLAS SGEMM)", "tf32": os.environ.get("CUPY_TF32", "0"),
                   **check_note(problem)},
        )
    kern = kernels(variant.kernel)
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
        notes={"registers": kern.num_regs, **check_note(problem)},
    )


SIGNATURE = """\
void KERNEL(const float *A,    // M x K, row-major
            const float *B,    // K x N, row-major
            float *C,          // M x N output, row-major: C = A.B
            int M,             // rows of A and C
            int N,             // columns of B and C
            int K)             // columns of A, rows of B
// grid: tiles of block x per_thread (or tile=) over C, (N, M): blockIdx.x walks its columns"""

def full_host_bytes(problem: Problem) -> int:
    """Host memory of a run checked against the full float64 product (see :meth:`Matmul.host_bytes`)."""
    m, k, n = problem.dims
    ab, c = (m * k + k * n) * 4, m * n * 4
    return 3 * ab + 2 * c + c + 2 * 2 * c


class Matmul(Family):
    """fp32 C = A·B."""

    def host_bytes(self, problem: Problem) -> int:
        """A and B, their float64 copies while the float64 reference is computed, the reference, the
        result, and the check's float64 temporaries (result, difference); sketched: A and B, the two
        poisoned results and the sketch."""
        m, k, n = problem.dims
        ab, c = (m * k + k * n) * 4, m * n * 4
        if sketch.sketched(problem.dims):
            return ab + 2 * c + sketch.host_bytes(problem.dims)
        return full_host_bytes(problem)

    SIGNATURE = SIGNATURE

    OPTIONS = OPTIONS
    SIZE_HELP = SIZE_HELP
    SHOW = True
    problem = staticmethod(problem)
    extent = staticmethod(extent)
    work = staticmethod(work)
    device_bytes = staticmethod(device_bytes)
    make_inputs = staticmethod(make_inputs)
    reference = staticmethod(reference)
    check = staticmethod(check)
    setup = staticmethod(setup)
    default_block = staticmethod(default_block)
    show = staticmethod(show)


FAMILY = Matmul()
