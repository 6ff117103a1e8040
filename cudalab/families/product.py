"""Helpers of the matrix-product families (matmul, gemm, gemv, hgemm): M×K×N sizes, the check of
fp32 sums, uploads, NumPy rows, CuPy and cuBLAS, ``--show``. A module of functions, not a family.

Verification. The reference is the float64 product of the float32 inputs, so the only error is
the kernel's fp32 arithmetic. Summing K products in fp32 gives each element an error of about
u·sqrt(K)·|C| for random data (u = 2⁻²⁴ ≈ 6e-8 the unit roundoff; the rounding errors of the K
additions are independent, so they add like a random walk), and about u·K in the worst case.
A result passes when both hold (:func:`check_product`):

* relative Frobenius error ‖C − C_ref‖_F / ‖C_ref‖_F ≤ 1e-6·sqrt(K) (about 16·u·sqrt(K):
  room for any summation order, FMA or not, split K, while a wrong tile is off by 1e-1 or more);
* largest element error / rms(C_ref) ≤ 1e-5·sqrt(K): one wrong element in a large matrix
  hardly moves the Frobenius norm, but it is as large as a typical element, so this catches it.

Poisoned outputs (NaN) fail before either test. Above 8192³ multiply-adds the float64 reference
would take the host minutes; those products are checked against a sketch instead (exact sampled rows
and columns, Freivalds projections; :mod:`cudalab.families.matmul_sketch`), and the rows say so
(:func:`check_note`).
"""

from __future__ import annotations

import importlib
import math
from typing import Any, Callable

import numpy as np

from cudalab import hostcheck

from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import SizeError, SkipRow, UsageError
from cudalab.families import matmul_sketch as sketch
from cudalab.families.model import Case, Check, Size
from cudalab.families.model import where_index

DEFAULT_N = 4096
SIZE_HELP = "square matrices (--n 4096) or --shape MxKxN for (MxK)·(KxN); default 4096"
HOST_LIMIT = 4096**3
"""The host row is skipped above this many multiply-adds (M·N·K): NumPy would take seconds per sample."""
FRO_PER_SQRT_K = 1e-6
ELEM_PER_SQRT_K = 1e-5
SHOW_LIMIT = 16


# --- sizes ---------------------------------------------------------------------------------------

def mkn_problem(n: str | None, shape: str | None, dtype: str, options: dict, default: int = DEFAULT_N) -> Size:
    """Parse ``--n N`` (N×N times N×N) or ``--shape MxKxN`` into dims (M, K, N).

    Raises:
        UsageError: both given, a malformed size, or a matrix too large to index.
    """
    if n and shape:
        raise UsageError("give --n or --shape, not both")
    if shape:
        dims = L.parse_shape(shape, 3)
    else:
        side = L.parse_size(n, "--n") if n else default
        dims = (side, side, side)
    m, k, nn = dims
    if max(m * k, k * nn, m * nn) >= 2**31:
        raise UsageError(f"{m}x{k}x{nn}: a matrix of 2^31 elements or more is beyond the kernels' int sizes")
    return Size(dims=tuple(dims), dtype=dtype, options=tuple(sorted(options.items())))


def full_host_bytes(problem: Size) -> int:
    """Host memory of a run checked against the full float64 product: A and B, their float64 copies,
    the reference, the result and the check's float64 temporaries (result, difference)."""
    m, k, n = problem.dims
    ab, c = (m * k + k * n) * 4, m * n * 4
    return 3 * ab + 2 * c + c + 2 * 2 * c


# --- checks --------------------------------------------------------------------------------------

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
    if result.size == 0:
        return Check(True, 0.0, fro_tol)
    m = hostcheck.diff_moments(result, ref)  # in parallel blocks: a full-size float64 copy was most of a trial
    if m.nonfinite:
        return Check(False, float("nan"), fro_tol, f" ({m.nonfinite} elements unwritten, NaN or inf, first at "
                                                   f"{where_index(m.first_nonfinite, ref.shape)})")
    ref_norm = math.sqrt(m.sq_ref)
    scale = ref_norm if ref_norm > 0 else 1.0
    fro = math.sqrt(m.sq_diff) / scale
    rms = scale / math.sqrt(ref.size)
    elem = m.worst_abs / rms
    where = tuple(int(i) for i in np.unravel_index(m.worst, ref.shape))
    if fro > fro_tol:
        return Check(False, fro, fro_tol, f" (relative Frobenius error; worst element {where}: {elem:.3g} x rms|C|)")
    if elem > elem_tol:
        # Report the element test's own figures, so "max error > tolerance" reads true.
        return Check(False, elem, elem_tol,
                     f" (element {where}, in units of rms|C|; the Frobenius error {fro:.3g} is within bound)")
    return Check(True, fro, fro_tol)


def check_note(problem: Size) -> dict[str, str]:
    """The note a sketch-checked row carries (JSON ``extra.check``)."""
    return {"check": "sketch: sampled rows and columns, Freivalds projections"} if sketch.sketched(problem.dims) else {}


def show(problem: Size, inputs: dict[str, np.ndarray], result: np.ndarray | None,
         numpy: np.ndarray | None = None) -> str:
    """The text of ``--show``: each input and the result (or, given, NumPy's answer ``numpy``) of a
    small problem; one line saying why not for a large one."""
    if max(problem.dims) > SHOW_LIMIT:
        return f"--show prints matrices up to {SHOW_LIMIT} on a side; this problem is {problem.label}"
    parts = []
    with np.printoptions(precision=3, suppress=True, linewidth=160, floatmode="fixed"):
        for name, arr in inputs.items():
            parts.append(f"{name.upper()} ({'x'.join(map(str, arr.shape))}) =\n{arr}")
        if result is not None:
            res = np.asarray(result)
            parts.append(f"result ({'x'.join(map(str, res.shape))}) =\n{res}")
        elif numpy is not None:
            parts.append(f"NumPy A @ B =\n{numpy}")
    return "\n".join(parts)


# --- running --------------------------------------------------------------------------------------

def upload(ctx: Any, inputs: dict[str, np.ndarray], *names: str) -> list[Any]:
    """Upload the named inputs once per run (contiguous, unpitched: the kernels index rows by their length)."""
    return [ctx.upload(np.ascontiguousarray(inputs[name]))
            for name in names]


def host_case(fn: Callable[[], np.ndarray]) -> Case:
    """A NumPy row: ``fn()`` timed with the host clock."""
    box: dict[str, np.ndarray] = {}

    def run() -> None:
        box["out"] = fn()

    return Case(run=run, result=lambda: box["out"], timer="host")


def refuse_large_host(problem: Size, variant: VariantSpec) -> None:
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
        SkipRow: CuPy is not installed (the runner shows the row as skipped).
    """
    try:
        import cupy  # noqa: PLC0415  (optional: only the reference rows use it)
    except ImportError:
        raise SkipRow(f"{variant.name}: CuPy is not installed (pip install cupy-cuda12x); reference row skipped") from None
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
