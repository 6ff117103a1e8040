"""Helpers of the matrix-move families (copy, transpose): sizes, inputs, the exact check, pitched
uploads and NumPy rows. A module of functions, not a family: each family calls what it shares."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from cudalab import hostwork
from cudalab import launch as L
from cudalab.errors import UsageError
from cudalab.families.model import Case, Check, Size, Work

DEFAULT_N = 16384
SIZE_HELP = "square matrix side (--n 16k) or --shape ROWSxCOLS; default 16384 (1 GiB of float32)"
EXTRA_COLUMNS = (("pitch", "pitch"), ("registers", "regs"))


def problem(n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
    """Parse ``--n N`` (square) or ``--shape RxC`` into (rows, cols)."""
    if n and shape:
        raise UsageError("give --n or --shape, not both")
    dims = L.parse_shape(shape, 2) if shape else (L.parse_size(n, "--n"),) * 2 if n else (DEFAULT_N, DEFAULT_N)
    if max(dims) > 2**31 - 1024:
        raise UsageError(f"matrix {dims[0]}x{dims[1]}: each side must be below 2^31 (the kernels take int rows and cols)")
    if dims[0] * dims[1] >= 2**31 * 4:
        raise UsageError(f"matrix {dims[0]}x{dims[1]} has more elements than the kernels index (2^33)")
    return Size(dims=tuple(dims), dtype=dtype, options=tuple(sorted(options.items())))


def work(problem: Size) -> Work:
    """Each element read once and written once."""
    rows, cols = problem.dims
    return Work(bytes=2 * rows * cols * problem.np_dtype.itemsize, written=rows * cols * problem.np_dtype.itemsize)


def device_bytes(problem: Size) -> int:
    """Input and output, with room for row padding."""
    rows, cols = problem.dims
    return 2 * rows * (cols + 128) * problem.np_dtype.itemsize


def host_bytes(problem: Size) -> int:
    """The input, and 128 MiB of pinned chunks: results are verified as they download, the
    reference is the input itself (copy) or a view of it (transpose)."""
    rows, cols = problem.dims
    return rows * cols * problem.np_dtype.itemsize + (128 << 20)


def make_inputs(problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A random matrix in [-1, 1): distinct values, so a misplaced element shows."""
    return {"a": hostwork.uniform(rng, problem.dims, problem.np_dtype)}


def check(result: np.ndarray | hostwork.RowChunks, ref: np.ndarray) -> Check:
    """Moves must be exact: bit for bit, in blocks across threads, chunk by chunk as the result
    downloads (``ref`` may be a transposed view, never copied); the message names the first wrong
    element and how many were never written (still the poison)."""
    try:
        d = hostwork.exact_diff(result, ref)
    except ValueError as exc:
        return Check(False, float("inf"), 0.0, f" ({exc})")
    if d.first is None:
        return Check(True, 0.0, 0.0)
    where = f"row {d.first[0]}, column {d.first[1]}" if len(d.first) == 2 else f"element {d.first}"
    parts = []
    if d.unwritten:
        parts.append(f"{d.unwritten} elements unwritten")
    if d.wrong - d.unwritten:
        parts.append(f"{d.wrong - d.unwritten} wrong")
    err = float("nan") if d.unwritten and not d.max_error else d.max_error
    return Check(False, err, 0.0, f" ({', '.join(parts)}; first at {where}: got {d.got}, expected {d.want})")


def upload(ctx: Any, a: np.ndarray) -> Any:
    """Upload the input once per run, pitched as the seed kernels expect (shared by variants)."""
    return ctx.upload(a, pitched=True)


def host_case(fn: Callable[[np.ndarray], np.ndarray], a: np.ndarray) -> Case:
    """A NumPy row: ``fn(a)`` timed with the host clock."""
    box: dict[str, np.ndarray] = {}

    def run() -> None:
        box["out"] = fn(a)

    return Case(run=run, result=lambda: box["out"], timer="host")
