"""Short kernels sampled by CUPTI (``--launch cupti``; ``--launch auto``'s method where cupti-python loads): the
launches of a sample, each timed by its own activity records (:mod:`cudalab.worker.cupti_timing` loads CUPTI,
records and reads the activities; this module decides what a sample launches).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from cudalab.bench import Protocol, Stats, measure_spanned
from cudalab.worker.cupti_timing import (SPIN_GUESS_MS, SPIN_MAX_MS, CuptiUnavailable, Recorder, load,
                                         per_launch_ns)


@dataclass(frozen=True)
class CuptiTiming:
    """What :func:`cupti_samples` measured.

    Attributes:
        stats: time per launch (ms): each sample's summed activity durations of the row's launches, over ``n``.
        stop: why sampling stopped (:func:`cudalab.bench.stop_reason`).
        spans: the host clock's (start, end) around each counted sample (telemetry judges them).
        launches: the row's launches made (warm-up samples too).
        spin: whether a spin kernel held the stream while each sample was enqueued.
    """

    stats: Stats
    stop: str
    spans: tuple[tuple[float, float], ...]
    launches: int
    spin: bool


def cupti_samples(dev: Any, case: Any, proto: Protocol, n: int, on_sample: Callable[[], None] = lambda: None,
                  clock: Callable[[], float] = time.perf_counter, cupti: Any = None) -> CuptiTiming:
    """Sample ``case`` as ``n`` launches a sample, each launch timed by its own CUPTI records: cold (an L2 flush
    before every launch; the flush is not the row's) or hot (``proto.flush_l2`` False).

    ``dev`` has ``flush_l2()``, ``synchronize()`` and optionally ``spin(ms)``; ``cupti`` is the module
    (None: :func:`load`).

    Raises:
        CuptiUnavailable: cupti-python is missing, CUPTI refused, or the row's launches left no records
            (the caller times the row another way and says why).
    """
    rec = Recorder(load() if cupti is None else cupti)
    rec.start()
    spin = getattr(dev, "spin", None)
    state = {"enqueue_ms": SPIN_GUESS_MS * n, "spun": False, "launches": 0}

    # A row that cannot repeat (an in-place reduction) is reset before each launch. The reset's copies are
    # made outside the launch's bracket, so their records are not the row's, as the flushes are not.
    fresh = not case.can_repeat

    def sample() -> float:
        case.reset()
        if spin is not None:   # the launches run back to back, as a batch's do, not at Python's pace
            state["spun"] = bool(spin(min(SPIN_MAX_MS, 1.5 * state["enqueue_ms"] + 0.05)))
        marks: list[tuple[int, int]] = []
        e0 = clock()
        for i in range(n):
            if fresh and i:
                case.reset()
            if proto.flush_l2:
                dev.flush_l2()
            a = rec.timestamp()
            case.run()
            marks.append((a, rec.timestamp()))
        state["enqueue_ms"] = (clock() - e0) * 1e3
        state["launches"] += n
        dev.synchronize()
        api, work = rec.drain()
        try:
            ns = per_launch_ns(marks, api, work)
        except CuptiUnavailable:   # a record CUPTI had not handed over yet: one more flush, then it counts
            more_api, more_work = rec.drain()
            ns = per_launch_ns(marks, api + more_api, work + more_work)
        return ns / 1e6

    try:
        got, spans = measure_spanned(sample, proto, clock, on_sample)
    finally:
        rec.stop()
    return CuptiTiming(got.stats, got.stop, spans, int(state["launches"]), bool(state["spun"]))
