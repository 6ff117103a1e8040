"""Saved-run comparison: match rows across run records and judge each pair from its raw samples (pure).

A verdict needs two things: a *significant* difference and a *large enough* one.

* Significance: the Mann–Whitney U test (:mod:`cudalab.records.stats`: two-sided, normal approximation
  with tie correction and a continuity correction, in NumPy so scipy stays optional). It is rank-based,
  so the long right tail of GPU timings (a preempted launch, a clock dip) does not drive it.
* Size and sameness: a percentile-bootstrap 95% interval of the ratio of medians (fixed seed, so a
  comparison is reproducible). A non-significant test is not evidence that two runs are the same;
  ``same`` needs the interval to lie inside ±``min_effect``.

Times are compared on one GPU. Across GPUs (device names differ) each sample is divided by its
run's time at 100% of the roofline (the roofline measured in the same run, or the library row for
FLOP families), so the ratio compares % of roofline, which is what carries across hardware.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from cudalab.records.results import Result, RunPoint, RunRecord, Status
from cudalab.records.stats import bootstrap_ratio, mann_whitney

#: Verdicts. ``NONE`` is a row that cannot be judged (host row, no samples, only in one file).
SAME, FASTER, SLOWER, UNSURE, NONE = "same", "faster", "slower", "unsure", "–"

ALPHA = 0.05
#: Below this many samples on either side no verdict is given: the U test's normal approximation
#: and the bootstrap both need a handful of samples (3 vs 4 cannot reach p < 0.05 even exactly).
MIN_N = 8
#: What the hint suggests when samples are too few or too noisy.
SUGGEST_SAMPLES = 30
@dataclass(frozen=True)
class Verdict:
    """The judgement of one pair of sample sets.

    Attributes:
        verdict: same / faster / slower / unsure / –.
        ratio: median(new) / median(base); > 1 is slower.
        p: Mann–Whitney p-value (None when not tested).
        low: lower end of the 95% bootstrap interval of the ratio.
        high: upper end.
        note: why (for unsure: what would settle it).
    """

    verdict: str
    ratio: float | None = None
    p: float | None = None
    low: float | None = None
    high: float | None = None
    note: str = ""


def judge(a: Sequence[float], b: Sequence[float], min_effect: float = 0.02, alpha: float = ALPHA) -> Verdict:
    """Say whether ``b`` is the same as, faster or slower than ``a`` (times: lower is faster).

    Args:
        a: base samples (times, or times in units of the roofline time).
        b: new samples.
        min_effect: smallest relative change that counts (0.02 = 2%).
        alpha: significance level of the U test.
    """
    if len(a) == 0 or len(b) == 0:
        return Verdict(NONE, note="no samples")
    ma, mb = float(np.median(a)), float(np.median(b))
    ratio = mb / ma if ma > 0 else None
    if ratio is None:
        return Verdict(NONE, note="median 0")
    if min(len(a), len(b)) < MIN_N:
        return Verdict(UNSURE, ratio, note=f"n={len(a)} vs {len(b)} samples: rerun with --min-samples {SUGGEST_SAMPLES}")
    _, p = mann_whitney(a, b)
    lo, hi = bootstrap_ratio(a, b)
    base = dict(ratio=ratio, p=p, low=lo, high=hi)
    change = ratio - 1.0
    if decisive(ratio, p, lo, hi, min_effect, alpha):
        return Verdict(SLOWER if change > 0 else FASTER, **base)
    if 1.0 - min_effect < lo and hi < 1.0 + min_effect:
        return Verdict(SAME, **base, note="" if p >= alpha else f"differs by {change:+.1%}, under the {_pct(min_effect)} effect")
    spread = max(_rel_iqr(a), _rel_iqr(b))
    if spread > min_effect:
        why = f"spread {_pct(spread)} > effect {_pct(min_effect)}"
    elif p >= alpha:
        why = f"{change:+.1%} not significant (p={p:.2f})"
    else:
        why = f"interval {lo:.3f}–{hi:.3f} crosses ±{_pct(min_effect)}"
    more = max(SUGGEST_SAMPLES, 2 * max(len(a), len(b)))
    return Verdict(UNSURE, **base, note=f"{why}: rerun with --min-samples {more} (idle GPU)")


def decisive(ratio: float | None, p: float | None, low: float | None, high: float | None, min_effect: float,
             alpha: float = ALPHA) -> bool:
    """Whether a verdict's figures call the change faster or slower at ``min_effect``: significant, at least that
    large, and its interval clear of 1 (:func:`judge`'s rule; calibration asks it at many thresholds)."""
    if ratio is None or p is None or low is None or high is None:
        return False
    return p < alpha and abs(ratio - 1.0) >= min_effect and (low > 1.0 or high < 1.0)


def _pct(x: float) -> str:
    """0.02 -> '2%', 0.0249 -> '2.5%' (one decimal, none when it is 0)."""
    return f"{x:.1%}".replace(".0%", "%")


def _rel_iqr(x: Sequence[float]) -> float:
    q1, med, q3 = np.percentile(np.asarray(x, dtype=np.float64), [25, 50, 75])
    return float((q3 - q1) / med) if med > 0 else 0.0


# --- matching ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    """One matched row of a comparison.

    Attributes:
        family: family name.
        problem: the point's label (size, dtype, options, block, defines).
        variant: variant name.
        base: the row in the base file (None: only in the other).
        new: the row in the other file (None: only in the base).
        verdict: the judgement (``–`` for host rows, rows without samples, unmatched rows).
    """

    family: str
    problem: str
    variant: str
    base: Result | None
    new: Result | None
    verdict: Verdict

    @property
    def key(self) -> tuple[str, str, str]:
        """What rows are matched by."""
        return self.family, self.problem, self.variant

    @property
    def time_ratio(self) -> float | None:
        """median(B) / median(A) in milliseconds (< 1: B took less time), whatever the verdict judged."""
        a, b = self.base, self.new
        if a is None or b is None or not a.stats or not b.stats or not a.stats.median:
            return None
        return b.stats.median / a.stats.median

    @property
    def efficiency_ratio(self) -> float | None:
        """A's % of roofline / B's (> 1: B reached less of its own roofline); None without both."""
        a, b = self.base, self.new
        if a is None or b is None or not a.pct_roofline or not b.pct_roofline:
            return None
        return a.pct_roofline / b.pct_roofline


@dataclass(frozen=True)
class Comparison:
    """The base run against one other run.

    Attributes:
        base_name: the base file's name.
        new_name: the other file's name.
        base_gpu: the base GPU's name.
        new_gpu: the other GPU's name.
        by_roofline: GPUs differ, so rows are compared by % of roofline (or of the library ref).
        min_effect: the smallest change that counts.
        rows: matched rows, in the base file's order, then rows only in the other file.
    """

    base_name: str
    new_name: str
    base_gpu: str
    new_gpu: str
    by_roofline: bool
    min_effect: float
    rows: tuple[Row, ...]

    def count(self, verdict: str) -> int:
        """How many rows got this verdict."""
        return sum(1 for r in self.rows if r.verdict.verdict == verdict)

    @property
    def judged(self) -> int:
        """How many rows got a verdict (same, faster, slower or unsure)."""
        return sum(1 for r in self.rows if r.verdict.verdict != NONE)

    def missing(self) -> list[Row]:
        """Rows of A that found no partner in B (a renamed variant, a problem B did not run); host rows,
        which are never judged, do not count."""
        return [r for r in self.rows if r.base is not None and r.new is None and r.base.kind != "host"]

    def word(self, verdict: str) -> str:
        """How a verdict reads: across GPUs ``slower`` judged % of roofline, so it reads ``less efficient``."""
        if self.by_roofline:
            return {SLOWER: "less efficient", FASTER: "more efficient"}.get(verdict, verdict)
        return verdict


def _index(record: RunRecord) -> dict[tuple[str, str, str], tuple[RunPoint, Result]]:
    out: dict[tuple[str, str, str], tuple[RunPoint, Result]] = {}
    for p, r in record.rows():
        out.setdefault((p.family, p.label, r.variant), (p, r))
    return out


def normalised(result: Result, by_roofline: bool) -> tuple[float, ...] | None:
    """The samples to judge: times, or across GPUs times in units of the 100%-of-roofline time.

    A row at ``pct`` % of roofline with median ``m`` runs at roofline speed in ``m * pct / 100``;
    dividing every sample by that makes ratios of % of roofline. None when there is nothing to judge.
    """
    if result.stats is None or not result.stats.samples or result.kind == "host" or result.status != Status.PASSED:
        return None
    s = result.stats.samples
    if not by_roofline:
        return s
    if not result.pct_roofline or not result.stats.median:
        return None
    unit = result.stats.median * result.pct_roofline / 100.0
    return tuple(x / unit for x in s)


def compare(base: RunRecord, new: RunRecord, base_name: str = "A", new_name: str = "B",
            min_effect: float = 0.02, row_effect: Callable[[float | None], float | None] | None = None) -> Comparison:
    """Match rows by family, problem and variant, and judge each pair.

    Args:
        base: the reference run (A).
        new: the run judged against it (B).
        base_name: A's display name.
        new_name: B's display name.
        min_effect: smallest relative change that counts.
        row_effect: a row's threshold from its median in A (ms), in place of ``min_effect``: a calibrated GPU's
            (:meth:`cudalab.records.noise.NoiseFloor.effect`); None from it leaves the row unsure.
    """
    by_roofline = bool(base.gpu and new.gpu and base.gpu != new.gpu)
    ia, ib = _index(base), _index(new)
    loose = _loose_pairs(ia, ib)
    rows = []
    for key in list(ia) + [k for k in ib if k not in ia and k not in loose.values()]:
        ra, rb = ia.get(key, (None, None))[1], ib.get(key, (None, None))[1]
        note = ""
        if key in loose:  # matched without its family options: say which differ
            pa, pb = ia[key][0], ib[loose[key]][0]
            rb = ib[loose[key]][1]
            note = f"options differ (A: {_opts(pa) or '–'}; B: {_opts(pb) or '–'})"
        effect = min_effect
        if row_effect is not None and not by_roofline and ra is not None and ra.stats is not None:
            effect = row_effect(ra.stats.median)
        v = _judge_pair(ra, rb, by_roofline, effect)
        if note:
            v = replace(v, note=f"{note}; {v.note}" if v.note else note)
        rows.append(Row(*key, ra, rb, v))
    return Comparison(base_name, new_name, base.gpu, new.gpu, by_roofline, min_effect, tuple(rows))


def _opts(p: RunPoint) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted((p.problem.get("options") or {}).items()))


def _loose_pairs(ia: dict, ib: dict) -> dict[tuple[str, str, str], tuple[str, str, str]]:
    """Rows left unmatched, paired when they agree on all but the family options, one to one.

    A family that gains an option (matmul's ``tile``) writes it into every new point's label, so
    without this an older record would match nothing.
    """
    def key(p: RunPoint, variant: str) -> tuple:
        return p.family, tuple(p.problem.get("dims", ())), p.problem.get("dtype"), p.block, p.defines, variant

    left = {}
    for k, (p, r) in ia.items():
        if k not in ib:
            left.setdefault(key(p, r.variant), []).append(k)
    right = {}
    for k, (p, r) in ib.items():
        if k not in ia:
            right.setdefault(key(p, r.variant), []).append(k)
    return {left[g][0]: right[g][0] for g in left if g in right and len(left[g]) == 1 and len(right[g]) == 1}


def _judge_pair(a: Result | None, b: Result | None, by_roofline: bool, min_effect: float | None) -> Verdict:
    if a is None or b is None:
        return Verdict(NONE, note=f"only in {'B' if a is None else 'A'}")
    if a.kind == "host" or b.kind == "host":
        return Verdict(NONE, note="host row")
    if a.status != Status.PASSED or b.status != Status.PASSED:
        return Verdict(NONE, note=f"status {a.status} / {b.status}")
    sa, sb = normalised(a, by_roofline), normalised(b, by_roofline)
    if sa is None or sb is None:
        if by_roofline and a.stats and b.stats:
            return Verdict(NONE, note="no % of roofline to compare across GPUs")
        return Verdict(NONE, note="no samples")
    if min_effect is None:  # a calibrated GPU whose short rows no threshold could judge between processes
        ratio = float(np.median(sb)) / float(np.median(sa))
        return Verdict(UNSURE, ratio, note="a kernel this short moves more between processes on this GPU than any "
                                           "threshold calibrate tried: not judged")
    v = judge(sa, sb, min_effect)
    ma, mb = timing_method(a), timing_method(b)
    if ma != mb and v.verdict in (FASTER, SLOWER):
        # A kernel near the ~20 µs line is batched in one run and timed alone in the next: launches 2..N of a
        # batch find a warm L2, so the two methods differ by up to ~10% with nothing changed (an H200's reduce
        # modern read 18.5 µs by batch, 20.7 µs by events). The figures stay; the verdict does not stand.
        why = f"timed by {ma} in A, {mb} in B: rerun both with --launch {'events' if 'events' in (ma, mb) else ma}"
        return replace(v, verdict=UNSURE, note=f"{why}; {v.note}" if v.note else why)
    return v


def timing_method(r: Result) -> str:
    """How a row's samples were timed (``events``, ``batch``, ``graph``, ``cupti``, or ``host``)."""
    return method_of(r.kind, r.extra)


def method_of(kind: str | None, extra: dict | None) -> str:
    """:func:`timing_method` from a row's kind and ``extra`` (a saved row's fields, unparsed); records made
    before ``timed_by`` was written say ``batch`` by their batch size."""
    if kind == "host":
        return "host"
    extra = extra or {}
    return str(extra.get("timed_by") or ("batch" if extra.get("batch") else "events"))
