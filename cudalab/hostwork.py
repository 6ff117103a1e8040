"""Host work in parallel: random inputs drawn in their dtype, and exact comparisons in blocks (pure).

Time to table matters: at 16384² a single-threaded float64 draw followed by ``astype`` took 5 s and
a materialised ``ascontiguousarray(a.T)`` reference 5.6 s, around milliseconds of GPU work. NumPy
releases the GIL inside its fills and element-wise loops, so plain threads over row blocks scale
with the cores. Every helper gives the same answer whatever the thread count.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterator

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
             dtype: np.dtype | str = np.int32, out_dtype: np.dtype | str | None = None) -> np.ndarray:
    """Integers in [low, high) drawn in ``dtype``, in parallel (reproducible from ``rng`` as :func:`uniform`),
    stored as ``out_dtype`` (default ``dtype``; integers as floats, converted chunk by chunk on the threads)."""
    dtype = np.dtype(dtype)
    out = np.empty(shape, dtype if out_dtype is None else np.dtype(out_dtype))
    flat = out.reshape(-1)
    spans = _spans(flat.size, CHUNK)
    seeds = np.random.SeedSequence(int(rng.integers(0, 2**63))).spawn(len(spans))

    def fill(k: int) -> None:
        a, b = spans[k]
        flat[a:b] = np.random.default_rng(seeds[k]).integers(low, high, size=b - a, dtype=dtype)

    _run(fill, len(spans))
    return out


def int_sum(a: np.ndarray) -> int:
    """The exact sum of an array of integer values (ints, or floats holding integers), in chunks across the
    threads (each chunk summed in int64)."""
    flat = a.reshape(-1)
    spans = _spans(flat.size, CHUNK)
    sums = [0] * len(spans)

    def one(k: int) -> None:
        lo, hi = spans[k]
        sums[k] = int(flat[lo:hi].sum(dtype=np.int64))

    _run(one, len(spans))
    return sum(sums)


def copy_rows(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for two arrays of one shape (at least 1-D), in row bands across the threads (a
    pinned staging buffer filled at memory speed rather than one core's)."""
    spans = _spans(dst.shape[0], max(1, (1 << 20) // max(1, dst[:1].size)))  # ~1M elements a task

    def one(k: int) -> None:
        a, b = spans[k]
        np.copyto(dst[a:b], src[a:b])

    _run(one, len(spans))


@dataclass(frozen=True)
class RowChunks:
    """A device result read as row blocks (``read(r0, r1)`` fills and returns a reused buffer), so it
    is verified as it arrives and the host never holds a second full copy. ``np.asarray`` of it
    downloads it whole (``--show``, messages)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    rows_per_chunk: int
    read: Callable[[int, int], np.ndarray]
    whole: Callable[[], np.ndarray]

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        rows = self.shape[0] if self.shape else 1
        for r0 in range(0, rows, self.rows_per_chunk):
            yield r0, self.read(r0, min(rows, r0 + self.rows_per_chunk))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.whole()
        return a if dtype is None else a.astype(dtype)


@dataclass(frozen=True)
class Diff:
    """How a result differs from its reference, bit for bit.

    Attributes:
        first: index of the first differing element in row-major order (None: identical).
        wrong: elements that differ.
        unwritten: of those, elements that still hold the poison (every byte 0xFF).
        max_error: largest absolute difference among written elements (0 when none).
        got, want: the first differing element's value and the reference's.
    """

    first: tuple[int, ...] | None = None
    wrong: int = 0
    unwritten: int = 0
    max_error: float = 0.0
    got: Any = None
    want: Any = None


def _bits(a: np.ndarray) -> np.ndarray:
    """The same elements as unsigned integers of their size (bit-exact comparison; NaN equals itself)."""
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind in "fc" else a


#: Side of the tiles a transposed block is compared in (:func:`_same`).
TILE = 16


def _same(rb: np.ndarray, fb: np.ndarray) -> bool:
    """Whether two 2-D blocks hold the same elements. Where ``fb`` is a transposed view (its rows strided
    across the matrix), the walk goes tile by tile, 16x16 (both sides touch 16 rows at a time), not row by
    row (each row of the block touched 512 rows of the matrix, one element each: twice as slow, on the TLB)."""
    r, c = rb.shape
    if fb.strides[0] < fb.strides[1] and r % TILE == 0 and c % TILE == 0 and r and c:
        shape = (r // TILE, TILE, c // TILE, TILE)
        x = rb.reshape(shape).transpose(0, 2, 1, 3)
        y = fb.reshape(shape).transpose(0, 2, 1, 3)
        return not np.not_equal(x, y, order="C").any()  # "C": in this tile order, as given
    return not (rb != fb).any()


def _block_diff(res: np.ndarray, ref: np.ndarray, r_off: int) -> Diff:
    """Diff of one 2-D block, indices offset by ``r_off`` rows (columns are the block's own)."""
    rb, fb = _bits(res), _bits(ref)
    if _same(rb, fb):
        return Diff()
    neq = rb != fb
    i, j = np.unravel_index(int(np.argmax(neq.reshape(-1))), neq.shape)
    poison = np.array(-1, dtype=np.int64).astype(rb.dtype)  # every byte 0xFF
    unwritten = int(np.count_nonzero(rb[neq] == poison))
    written = neq & (rb != poison)
    err = 0.0
    if written.any():
        err = float(np.max(np.abs(res[written].astype(np.float64) - ref[written].astype(np.float64))))
    return Diff(first=(r_off + int(i), int(j)), wrong=int(np.count_nonzero(neq)), unwritten=unwritten,
                max_error=err, got=res[i, j], want=ref[i, j])


def _merge(diffs: list[Diff]) -> Diff:
    bad = [d for d in diffs if d.first is not None]
    if not bad:
        return Diff()
    first = min(bad, key=lambda d: d.first)
    return Diff(first=first.first, wrong=sum(d.wrong for d in bad), unwritten=sum(d.unwritten for d in bad),
                max_error=max(d.max_error for d in bad), got=first.got, want=first.want)


def _memcmp() -> Callable[[int, int, int], int] | None:
    """libc's ``memcmp`` through ctypes (which releases the GIL during the call), or None."""
    global _MEMCMP
    if _MEMCMP is None:
        try:
            import ctypes  # noqa: PLC0415

            fn = ctypes.CDLL(None).memcmp
            fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            _MEMCMP = fn
        except (OSError, AttributeError):  # no C library to load: the NumPy blocks do the work
            _MEMCMP = False
    return _MEMCMP or None


def bytes_equal(a: np.ndarray, b: np.ndarray) -> bool | None:
    """Whether two C-contiguous arrays hold the same bytes, by ``memcmp`` over spans across threads;
    None where that does not apply (not both contiguous, sizes differ, no libc).

    The common case of a check is a result that is right; comparing bytes needs no temporary arrays
    and runs at memory speed (a 1 GiB copy result took 170 ms in NumPy blocks on an H100 host).
    """
    fn = _memcmp()
    if fn is None or a.nbytes != b.nbytes or not (a.flags.c_contiguous and b.flags.c_contiguous):
        return None
    pa, pb, n = a.ctypes.data, b.ctypes.data, a.nbytes
    spans = _spans(n, CHUNK)
    same = [True] * len(spans)

    def one(k: int) -> None:
        lo, hi = spans[k]
        same[k] = fn(pa + lo, pb + lo, hi - lo) == 0

    _run(one, len(spans))
    return all(same)


def _diff2d(res: np.ndarray, ref: np.ndarray, r_off: int = 0) -> Diff:
    """Diff of two 2-D arrays in square blocks across threads (``ref`` may be a transposed view:
    a 512-square block of it is 512 short contiguous runs, cache-friendly); two contiguous arrays
    whose bytes are equal are found so by :func:`bytes_equal` first."""
    if res.dtype.itemsize == ref.dtype.itemsize and bytes_equal(res, ref):
        return Diff()
    side = 512
    rows, cols = res.shape
    if cols < side:  # narrow (a vector is n x 1): bands of whole rows, ~1M elements a task, not n/512 tasks
        band = max(side, (1 << 20) // max(cols, 1))
        spans = [(r, min(rows, r + band), 0, cols) for r in range(0, rows, band)]
    else:
        spans = [(r, min(rows, r + side), c, min(cols, c + side)) for r in range(0, rows, side)
                 for c in range(0, cols, side)]
    diffs: list[Diff] = [Diff()] * len(spans)

    def one(k: int) -> None:
        r0, r1, c0, c1 = spans[k]
        d = _block_diff(res[r0:r1, c0:c1], ref[r0:r1, c0:c1], r_off + r0)
        if d.first is not None:
            d = Diff(first=(d.first[0], c0 + d.first[1]), wrong=d.wrong, unwritten=d.unwritten,
                     max_error=d.max_error, got=d.got, want=d.want)
        diffs[k] = d

    _run(one, len(spans))
    return _merge(diffs)


def exact_diff(result: np.ndarray | RowChunks, reference: np.ndarray) -> Diff:
    """Compare a result with its reference bit for bit, in blocks across threads, never copying the
    reference (it may be a strided view such as ``a.T``); a :class:`RowChunks` result is compared
    chunk by chunk as it downloads. Indices are in the result's own shape.

    Raises:
        ValueError: the shapes differ.
    """
    if tuple(result.shape) != tuple(reference.shape):
        raise ValueError(f"shape {tuple(result.shape)}, expected {tuple(reference.shape)}")
    shape = tuple(reference.shape)
    if len(shape) == 0 or reference.size == 0:
        res = np.asarray(result)
        return Diff() if np.array_equal(_bits(res), _bits(reference)) else Diff(first=(), wrong=1)
    rows = shape[0]
    cols = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    ref2 = reference.reshape(rows, cols) if len(shape) != 2 else reference
    if isinstance(result, RowChunks):
        # chunk k is compared (on the pool) while chunk k+1 downloads; a chunk's buffer is reused two
        # chunks later, so chunk k-1's comparison is waited for before chunk k+1 is read over it
        futures: list[Future] = []
        diffs = []
        for r0, chunk in result:
            futures.append(_driver().submit(_diff2d, chunk.reshape(chunk.shape[0], cols), ref2[r0:r0 + chunk.shape[0]], r0))
            if len(futures) >= 2:
                diffs.append(futures[-2].result())
        diffs.append(futures[-1].result())
        d = _merge(diffs)
    else:
        d = _diff2d(np.asarray(result).reshape(rows, cols), ref2)
    if d.first is not None and len(shape) != 2:
        flat = d.first[0] * cols + d.first[1]
        d = Diff(first=tuple(int(i) for i in np.unravel_index(flat, shape)), wrong=d.wrong, unwritten=d.unwritten,
                 max_error=d.max_error, got=d.got, want=d.want)
    return d


def first_difference(result: np.ndarray | RowChunks, reference: np.ndarray) -> tuple[int, ...] | None:
    """The index of the first element where ``result`` differs from ``reference`` bit for bit, or
    None (see :func:`exact_diff`).

    Raises:
        ValueError: the shapes differ.
    """
    return exact_diff(result, reference).first


_POOL: ThreadPoolExecutor | None = None
_MEMCMP: Any = None
_DRIVER: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    """The worker threads, made once per process (a pool per call cost more than the work it did)."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="cudalab-host")
    return _POOL


def _driver() -> ThreadPoolExecutor:
    """One thread that hands a chunk's comparison to the pool while the caller downloads the next."""
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cudalab-chunk")
    return _DRIVER


def _run(task: Callable[[int], None], count: int) -> None:
    """Run ``task(0..count-1)`` on the worker threads (inline when there is one task)."""
    if count <= 1:
        for k in range(count):
            task(k)
        return
    list(_pool().map(task, range(count)))  # list(): re-raise the first task's exception here
