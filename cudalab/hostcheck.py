"""Checks of a float result against its reference on the host, in parallel blocks (pure).

A check at the sizes cudalab runs allocated several full-size float64 temporaries (a difference, its absolute
value, a ratio...): at 2^24 elements about half a second a trial on an H200's host, most of a tuning trial of a
memory-bound kernel. Here each task holds one block of 2 MiB; NumPy releases the GIL, so the blocks spread over
the cores (:mod:`cudalab.hostwork`'s pool), and every figure is the one the serial form gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cudalab.hostwork import _run, _spans

__all__ = ["MOMENT_CHUNK", "Moments", "diff_moments", "Bound", "bound_ratio"]

#: Elements per task (2 MiB of float64: a 2048² product is 16 tasks).
MOMENT_CHUNK = 1 << 18


@dataclass(frozen=True)
class Moments:
    """How a float result differs from its reference, element by element (:func:`diff_moments`).

    Attributes:
        nonfinite: elements of the result that are NaN or infinite; first_nonfinite: the first's flat index (-1).
        sq_diff: the sum of squared differences over the finite elements; sq_ref: the reference's sum of squares.
        worst: the flat index of the largest absolute difference (-1 when empty); worst_abs: that difference.
    """

    nonfinite: int
    first_nonfinite: int
    sq_diff: float
    sq_ref: float
    worst: int
    worst_abs: float


def diff_moments(result: np.ndarray, reference: np.ndarray) -> Moments:
    """Compare a result with its (finite) reference in float64, in parallel over blocks, one float64 block
    per task: the few passes a norm check needs, without the full-size temporaries (at 2048² the serial
    version's four 32 MiB arrays took 55 ms a check, most of a small kernel's trial)."""
    res, ref = np.ascontiguousarray(result).reshape(-1), np.ascontiguousarray(reference).reshape(-1)
    spans = _spans(res.size, MOMENT_CHUNK)
    parts: list[Moments | None] = [None] * len(spans)

    def task(i: int) -> None:
        a, b = spans[i]
        d = res[a:b].astype(np.float64)
        np.subtract(d, ref[a:b], out=d)
        finite = np.isfinite(d)
        bad = d.size - int(np.count_nonzero(finite))
        if bad:
            first = a + int(np.argmin(finite))
            d[~finite] = 0.0
        r = ref[a:b].astype(np.float64, copy=False)
        # einsum, not np.dot: a dot of more than 10,000 float64 is BLAS, which OpenBLAS spreads over every core
        # from each of these threads at once, and whose threads then spin for a while before they sleep
        sq, sq_ref = float(np.einsum("i,i->", d, d)), float(np.einsum("i,i->", r, r))
        np.abs(d, out=d)
        w = int(np.argmax(d)) if d.size else -1
        parts[i] = Moments(bad, first if bad else -1, sq, sq_ref, a + w if w >= 0 else -1,
                           float(d[w]) if w >= 0 else 0.0)

    _run(task, len(spans))
    done = [m for m in parts if m is not None]
    firsts = [m.first_nonfinite for m in done if m.nonfinite]
    worst = max(done, key=lambda m: m.worst_abs, default=None)
    return Moments(sum(m.nonfinite for m in done), firsts[0] if firsts else -1, sum(m.sq_diff for m in done),
                   sum(m.sq_ref for m in done), worst.worst if worst is not None else -1,
                   worst.worst_abs if worst is not None else 0.0)


@dataclass(frozen=True)
class Bound:
    """The worst element of a result against ``atol + rtol |reference|`` (:func:`bound_ratio`).

    Attributes:
        worst: the largest ``|r - ref| / bound`` (inf where the result is NaN); bad: elements past the bound;
        first: the first bad element's flat index (-1 when none).
    """

    worst: float
    bad: int
    first: int


def bound_ratio(result: np.ndarray, reference: np.ndarray, atol: float, rtol: float) -> Bound:
    """``max |r - ref| / (atol + rtol |ref|)`` over the elements, NaN in the result counting as infinitely wrong;
    in parallel blocks of float64 so that a 2^24-element check does not allocate a dozen full-size temporaries
    (about half a second a trial on an H200's host for a memory-bound kernel's output)."""
    res, ref = np.ascontiguousarray(result).reshape(-1), np.ascontiguousarray(reference).reshape(-1)
    spans = _spans(res.size, MOMENT_CHUNK)
    parts: list[Bound | None] = [None] * len(spans)

    def task(i: int) -> None:
        a, b = spans[i]
        r = ref[a:b].astype(np.float64)
        d = res[a:b].astype(np.float64)
        np.subtract(d, r, out=d)
        np.abs(d, out=d)
        np.abs(r, out=r)
        np.multiply(r, rtol, out=r)
        np.add(r, atol, out=r)
        r[r <= 0] = 1e-300
        with np.errstate(invalid="ignore", divide="ignore"):
            np.divide(d, r, out=d)
        d[np.isnan(d)] = np.inf  # a NaN result (the poison) is never within a bound
        over = d > 1.0
        bad = int(np.count_nonzero(over))
        parts[i] = Bound(float(d.max()) if d.size else 0.0, bad, a + int(np.argmax(over)) if bad else -1)

    _run(task, len(spans))
    done = [p for p in parts if p is not None]
    firsts = [p.first for p in done if p.bad]
    return Bound(max((p.worst for p in done), default=0.0), sum(p.bad for p in done), firsts[0] if firsts else -1)
