"""The two statistics a verdict rests on, in NumPy so scipy stays optional (pure).

* Significance: the Mann–Whitney U test (two-sided, normal approximation with tie correction and a
  continuity correction). It is rank-based, so the long right tail of GPU timings (a preempted launch, a
  clock dip) does not drive it.
* Size: a percentile-bootstrap interval of the ratio of medians (fixed seed, so a comparison is
  reproducible).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

BOOTSTRAP = 2000
SEED = 20261122


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann–Whitney U test, normal approximation with tie and continuity corrections.

    Args:
        a: first sample.
        b: second sample.

    Returns:
        (U of ``a``, p-value). p is 1.0 when every value is tied (no evidence either way).
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        raise ValueError("both samples need at least one value")
    allv = np.concatenate([x, y])
    ranks = _rankdata(allv)
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    _, counts = np.unique(allv, return_counts=True)
    n = n1 + n2
    # Ties shrink the variance of U: sum(t^3 - t) over groups of equal values.
    tie = float((counts.astype(np.float64) ** 3 - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - tie / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return float(u1), 1.0
    z = (abs(u1 - mu) - 0.5) / math.sqrt(var)
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return float(u1), min(1.0, p)


def _rankdata(v: np.ndarray) -> np.ndarray:
    """Average ranks (1-based), ties sharing the mean of their ranks."""
    order = np.argsort(v, kind="mergesort")
    sv = v[order]
    ranks = np.empty(v.size, dtype=np.float64)
    # Group boundaries of equal values; each group gets the mean of its positions (vectorised: a run of
    # a million samples has a million groups).
    starts = np.flatnonzero(np.concatenate([[True], sv[1:] != sv[:-1]]))
    ends = np.concatenate([starts[1:], [v.size]])
    ranks[order] = np.repeat((starts + 1 + ends) / 2.0, ends - starts)
    return ranks


#: The bootstrap resamples at most this many of a row's samples (a fixed-seed subsample without
#: replacement beyond it): its memory grows with rounds x samples, and a row of a million samples would
#: need 32 GB. The interval of a subsample is wider than the full sample's, never narrower: a verdict
#: it allows holds for the full sample too.
BOOTSTRAP_MAX_N = 10_000
#: Resamples drawn at once (memory: this x BOOTSTRAP_MAX_N indices and values).
_CHUNK = 100


def _medians(v: np.ndarray, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``rounds`` resamples of ``v`` (with replacement), drawn ``_CHUNK`` at a time."""
    if v.size > BOOTSTRAP_MAX_N:
        v = rng.choice(v, BOOTSTRAP_MAX_N, replace=False)
    out = np.empty(rounds)
    for i in range(0, rounds, _CHUNK):
        k = min(_CHUNK, rounds - i)
        out[i:i + k] = np.median(v[rng.integers(0, v.size, (k, v.size))], axis=1)
    return out


def bootstrap_ratio(a: Sequence[float], b: Sequence[float], level: float = 0.95,
                    rounds: int = BOOTSTRAP, seed: int = SEED) -> tuple[float, float]:
    """Percentile-bootstrap interval of median(b) / median(a).

    Args:
        a: base samples.
        b: new samples.
        level: coverage of the interval.
        rounds: bootstrap resamples.
        seed: fixed so that comparing the same files twice gives the same interval.

    Memory stays bounded whatever the number of samples (:data:`BOOTSTRAP_MAX_N`).
    """
    rng = np.random.default_rng(seed)
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    mx = _medians(x, rounds, rng)
    my = _medians(y, rounds, rng)
    r = my / mx
    lo, hi = np.percentile(r, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)
