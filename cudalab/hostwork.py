"""Host work in parallel: random inputs drawn in their dtype, and exact comparisons in blocks (pure).

Time to table matters: at 16384² a single-threaded float64 draw followed by ``astype`` took 5 s and
a materialised ``ascontiguousarray(a.T)`` reference 5.6 s, around milliseconds of GPU work. NumPy
releases the GIL inside its fills and element-wise loops, so plain threads over row blocks scale
with the cores. Every helper gives the same answer whatever the thread count.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

#: Elements per task: large enough to amortise the task, small enough to spread over the cores.
CHUNK = 1 << 22


def workers() -> int:
    """Threads for host work: the CPUs this process may use (at least 1, at most 32)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(32, n))


def _spans(n: int, chunk: int) -> list[tuple[int, int]]:
    return [(i, min(n, i + chunk)) for i in range(0, n, chunk)] or [(0, 0)]


def uniform(rng: np.random.Generator, shape: tuple[int, ...] | int, dtype: np.dtype | str,
            low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """Uniform floats in [low, high) drawn directly in ``dtype`` (float32 or float64), in parallel.

    Each chunk has its own generator spawned from one draw of ``rng``, so a seed reproduces the
    array exactly; the values differ from ``rng.uniform`` (the streams are split).
    """
    dtype = np.dtype(dtype)
    out = np.empty(shape, dtype)
    flat = out.reshape(-1)
    spans = _spans(flat.size, CHUNK)
    seeds = np.random.SeedSequence(int(rng.integers(0, 2**63))).spawn(len(spans))
    scale, shift = dtype.type(high - low), dtype.type(low)

    def fill(k: int) -> None:
        a, b = spans[k]
        part = flat[a:b]
        np.random.default_rng(seeds[k]).random(out=part, dtype=dtype)
        part *= scale
        part += shift

    _run(fill, len(spans))
    return out


def integers(rng: np.random.Generator, shape: tuple[int, ...] | int, low: int, high: int,
             dtype: np.dtype | str = np.int32) -> np.ndarray:
    """Integers in [low, high) in ``dtype``, in parallel (reproducible from ``rng`` as :func:`uniform`)."""
    dtype = np.dtype(dtype)
    out = np.empty(shape, dtype)
    flat = out.reshape(-1)
    spans = _spans(flat.size, CHUNK)
    seeds = np.random.SeedSequence(int(rng.integers(0, 2**63))).spawn(len(spans))

    def fill(k: int) -> None:
        a, b = spans[k]
        flat[a:b] = np.random.default_rng(seeds[k]).integers(low, high, size=b - a, dtype=dtype)

    _run(fill, len(spans))
    return out


def first_difference(result: np.ndarray, reference: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first element where ``result`` differs from ``reference`` (bit for bit, NaN
    never equal), or None when they are equal. ``reference`` may be a strided view (``a.T``): it is
    compared in row blocks, never copied whole.

    Raises:
        ValueError: the shapes differ.
    """
    if result.shape != reference.shape:
        raise ValueError(f"shape {result.shape}, expected {reference.shape}")
    if result.ndim == 0 or result.size == 0:
        return None if np.array_equal(result, reference) else ()
    if result.ndim == 2:  # square blocks: a transposed view is read as short contiguous runs
        side = 512
        rows, cols = result.shape
        spans = [(r, min(rows, r + side), c, min(cols, c + side)) for r in range(0, rows, side)
                 for c in range(0, cols, side)]
    else:
        flat_r, flat_ref = result.reshape(result.shape[0], -1), reference.reshape(reference.shape[0], -1)
        rows, cols = flat_r.shape
        step = max(1, CHUNK // max(1, cols))
        spans = [(r, min(rows, r + step), 0, cols) for r in range(0, rows, step)]
    found: list[tuple[int, ...] | None] = [None] * len(spans)
    res2 = result if result.ndim == 2 else flat_r
    ref2 = reference if result.ndim == 2 else flat_ref

    def cmp(k: int) -> None:
        r0, r1, c0, c1 = spans[k]
        same = res2[r0:r1, c0:c1] == ref2[r0:r1, c0:c1]
        if not same.all():
            i, j = np.unravel_index(int(np.argmin(same.reshape(-1))), same.shape)
            found[k] = (r0 + int(i), c0 + int(j))

    _run(cmp, len(spans))
    bad = [f for f in found if f is not None]
    if not bad:
        return None
    first = min(bad)  # blocks finish in any order: the first in row-major order is the answer
    if result.ndim == 2:
        return first
    return tuple(int(i) for i in np.unravel_index(first[0] * cols + first[1], result.shape))


def _run(task: Callable[[int], None], count: int) -> None:
    """Run ``task(0..count-1)`` on the worker threads (inline when there is one task)."""
    if count <= 1:
        for k in range(count):
            task(k)
        return
    with ThreadPoolExecutor(max_workers=min(workers(), count)) as pool:
        list(pool.map(task, range(count)))  # list(): re-raise the first task's exception here
