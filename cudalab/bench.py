"""Timing protocol, statistics and the stopping rule over a timer interface (pure: no GPU here).

A *sample function* performs one untimed reset, optionally an L2 flush, then one timed launch (or
one timed batch of launches, divided by its length), and returns the time per launch in
milliseconds. :func:`measure` warms up, then keeps sampling until the median is pinned down or the
time budget is spent.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np


#: Two-sided 95% normal quantile, for the order-statistic confidence interval of the median.
Z95 = 1.959964


@dataclass(frozen=True)
class Protocol:
    """How to sample one variant.

    Attributes:
        warmup: discarded launches first (module load, first-launch costs).
        min_samples: never fewer samples than this.
        max_samples: never more.
        budget_s: stop adding samples after this much wall time (once ``min_samples`` are in).
        target_rel_iqr: stop early once IQR / median is below this.
        target_rel_ci: or once the 95% confidence interval of the median lies within ± this
            fraction of it (a noisy but well-sampled kernel is pinned down long before its IQR
            shrinks: the interval narrows as 1/sqrt(n), the IQR does not narrow at all).
        flush_l2: overwrite an L2-sized buffer before each sample (cold cache); ``--hot`` turns it off.
        batch_below_ms: a kernel whose first samples' median is below this is timed in batches
            (one launch per event pair would measure launch overhead and event resolution).
        batch_ms: a batch lasts at least about this long.
        max_batch: never more launches in one batch (the driver's launch queue holds about 1,000).
        energy_s: ``--energy``: after its samples, run each GPU row's launches back to back for at
            least this long and read its power from NVML's energy counter (0: off).
        launch: how a short kernel (under ``batch_below_ms``) is timed: ``auto`` (:func:`auto_method`), ``batch``
            (N launches enqueued between two events: the throughput a stream of launches reaches), ``graph``
            (the N launches captured once in a CUDA graph and replayed; cold, or a row reset before each launch:
            each launch between two event nodes, an empty kernel's windows taken out), ``cupti`` (N
            launches, each timed by its own GPU start and end from CUPTI's activity records; cold: a flush before
            each, not counted) or ``events`` (one launch per event pair, never batched).
        drop_throttled: leave samples taken while the GPU was throttled (NVML: SM clock under 75% of
            nominal, or a power/thermal reason) out of the statistics, unless every sample was.
    """

    warmup: int = 2
    min_samples: int = 10
    max_samples: int = 1000
    budget_s: float = 0.5
    target_rel_iqr: float = 0.01
    flush_l2: bool = True
    target_rel_ci: float = 0.01
    batch_below_ms: float = 0.02
    batch_ms: float = 0.2
    max_batch: int = 1000
    energy_s: float = 0.0
    drop_throttled: bool = False
    launch: str = "auto"


#: ``--launch`` values (:attr:`Protocol.launch`).
LAUNCH_METHODS = ("auto", "batch", "graph", "cupti", "events")
#: The reference for a short kernel's duration: each launch's own span on the GPU from CUPTI's activity records
#: (what Nsight Systems shows). ``--launch auto`` times a kernel under 20 µs with it where cupti-python loads.
AUTO_REFERENCE = "cupti"
#: What ``--launch auto`` times a kernel under 20 µs with where cupti-python does not load (or CUPTI refuses a
#: row): graph replay, designed to agree with CUPTI (:mod:`cudalab.worker.graphs`; ``docs/timing.md``). A batch
#: is never the default: it adds the gap between back-to-back launches (the throughput a stream of launches
#: reaches, not a kernel's duration).
AUTO_FALLBACK = "graph"


def auto_method(cupti_loads: bool) -> str:
    """The method ``--launch auto`` times a kernel under 20 µs with: CUPTI where it loads, graph replay otherwise
    (a kernel of 20 µs or more is one launch per event pair whatever this says)."""
    return AUTO_REFERENCE if cupti_loads else AUTO_FALLBACK


@dataclass(frozen=True)
class Stats:
    """Summary of timing samples in milliseconds; ``samples`` keeps the raw values."""

    median: float
    iqr: float
    min: float
    max: float
    mean: float
    n: int
    samples: tuple[float, ...]

    @property
    def rel_iqr(self) -> float:
        """IQR over median (0 when the median is 0)."""
        return self.iqr / self.median if self.median > 0 else 0.0

    @property
    def rel_ci(self) -> float:
        """Half-width of the 95% confidence interval of the median over the median (inf when unknown)."""
        return median_ci(self.samples)


def summarize(samples: list[float] | tuple[float, ...]) -> Stats:
    """Summarise raw samples (ms) into median, IQR, min, max, mean, n.

    Raises:
        ValueError: no samples.
    """
    if len(samples) == 0:
        raise ValueError("no samples to summarise")
    a = np.asarray(samples, dtype=np.float64)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return Stats(
        median=float(med), iqr=float(q3 - q1), min=float(a.min()), max=float(a.max()),
        mean=float(a.mean()), n=int(a.size), samples=tuple(float(x) for x in a),
    )


def median_ci(samples: list[float] | tuple[float, ...] | np.ndarray) -> float:
    """Relative half-width of a distribution-free 95% confidence interval of the median.

    The interval runs between the order statistics of ranks n/2 ∓ 1.96·sqrt(n)/2 (the binomial
    count of samples below the median, normal approximation); no assumption on the shape of the
    distribution, which for kernel times is skewed (a tail of slow samples). The larger of the two
    distances from the median, over the median. inf below 6 samples (the ranks fall off the ends).
    """
    a = np.sort(np.asarray(samples, dtype=np.float64))
    n = a.size
    if n < 6:
        return math.inf
    half = Z95 * math.sqrt(n) / 2
    lo = int(math.floor(n / 2 - half))
    hi = int(math.ceil(n / 2 + half)) - 1
    if lo < 0 or hi >= n:
        return math.inf
    med = float(np.median(a))
    if med <= 0:
        return math.inf
    return max(med - a[lo], a[hi] - med) / med


def stop_reason(samples: list[float], protocol: Protocol, elapsed_s: float) -> str:
    """Why sampling should stop now, or '' to go on.

    Returns:
        ``max`` (max_samples reached), ``budget`` (time spent), ``iqr`` (IQR / median below target),
        ``ci`` (the median's 95% interval within ± target), or ''.
    """
    n = len(samples)
    if n >= protocol.max_samples:
        return "max"
    if n < protocol.min_samples:
        return ""
    s = summarize(samples)
    if s.rel_iqr < protocol.target_rel_iqr:
        return "iqr"
    if protocol.target_rel_ci > 0 and median_ci(samples) <= protocol.target_rel_ci:
        return "ci"
    if elapsed_s >= protocol.budget_s:
        return "budget"
    return ""


@dataclass(frozen=True)
class Measured:
    """What :func:`measure_until` returns: the statistics and why sampling stopped."""

    stats: Stats
    stop: str


def measure_spanned(sample: Callable[[], float], protocol: Protocol, clock: Callable[[], float] = time.perf_counter,
                    on_sample: Callable[[], None] = lambda: None,
                    forget: Callable[[], None] = lambda: None) -> tuple[Measured, tuple[tuple[float, float], ...]]:
    """:func:`measure_until` after the protocol's warm-up samples (then ``forget()``: what the warm-ups left in the
    caller's state goes), with the host clock's (start, end) around each counted sample (telemetry judges them)."""
    for _ in range(protocol.warmup):
        sample()
    forget()
    spans: list[tuple[float, float]] = []

    def spanned() -> float:
        t0 = clock()
        ms = sample()
        spans.append((t0, clock()))
        return ms

    return measure_until(spanned, protocol, clock, warmup=False, on_sample=on_sample), tuple(spans)


def measure_until(
    sample: Callable[[], float],
    protocol: Protocol,
    clock: Callable[[], float] = time.perf_counter,
    warmup: bool = True,
    on_sample: Callable[[], None] = lambda: None,
) -> Measured:
    """Warm up, then collect samples until :func:`stop_reason` says stop.

    Args:
        sample: performs one sample and returns its time in ms (per launch).
        protocol: warm-up count, sample bounds, budget and spread targets.
        clock: wall clock for the budget (injectable for tests).
        warmup: run the protocol's warm-up samples first.
        on_sample: called after each sample (a GPU worker's sign of life for its parent's watchdog).
    """
    if warmup:
        for _ in range(protocol.warmup):
            sample()
    samples: list[float] = []
    start = clock()
    while True:
        samples.append(sample())
        on_sample()
        if len(samples) < min(protocol.min_samples, protocol.max_samples):
            continue  # the clock is read only once a stop is possible
        why = stop_reason(samples, protocol, clock() - start)
        if why:
            return Measured(summarize(samples), why)


def measure(
    sample: Callable[[], float],
    protocol: Protocol,
    clock: Callable[[], float] = time.perf_counter,
    on_sample: Callable[[], None] = lambda: None,
) -> Stats:
    """Warm up, then collect samples until the spread is small or the budget runs out.

    Args:
        sample: performs one sample and returns its time in ms.
        protocol: warm-up count, sample bounds, budget and spread target.
        clock: wall clock for the budget (injectable for tests).
        on_sample: called after each sample.
    """
    return measure_until(sample, protocol, clock, on_sample=on_sample).stats


def batch_size(per_launch_ms: float, protocol: Protocol) -> int:
    """Launches per event pair for a kernel of ``per_launch_ms``: 1 at or above the protocol's
    threshold, else enough for a batch of ``batch_ms`` (at least 2, at most ``max_batch``)."""
    if per_launch_ms >= protocol.batch_below_ms or protocol.max_batch < 2:
        return 1
    if per_launch_ms <= 0:
        return protocol.max_batch
    return int(min(protocol.max_batch, max(2, math.ceil(protocol.batch_ms / per_launch_ms))))
