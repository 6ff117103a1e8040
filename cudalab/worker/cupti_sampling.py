"""Short kernels sampled by CUPTI (``--launch cupti``; ``--launch auto``'s method where cupti-python loads): the
launches of a sample, each timed by its own activity records (:mod:`cudalab.worker.cupti_timing` loads CUPTI,
records and reads the activities; this module decides what a sample launches).

What a sample launches matters: CUPTI timing launches enqueued on the stream and the fallback timing graph
replays (:mod:`cudalab.worker.graphs`) do not time the same executions. On the stream each launch follows the
front end's launch gap; in a graph, kernel nodes follow each other back to back. The H200 record of issue 59
read transpose 1024 bankopt 4.32 µs hot by CUPTI on the stream and 3.79 by the graph, while events, the batch
and ncu less its offset agreed with the graph (docs/timing.md). So a repeatable row is sampled as one replay of
the fallback's own graph (hot: ``n`` back-to-back launches; cold: ``[flush, mark, launch, mark] x n``), and
CUPTI reads the row's activities in it: every activity of a replay carries the correlation id of its one
``cuGraphLaunch``, so which are the row's is told by the graph's shape, not by kernel names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cudalab.bench import Protocol, Stats, measure_spanned
from cudalab.errors import GpuError
from cudalab.worker.cupti_timing import (SPIN_GUESS_MS, SPIN_MAX_MS, CuptiUnavailable, Recorder, env_set, load,
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
        pattern: how the launches ran: ``graph`` (the fallback's own graph, replayed) or ``stream``.
    """

    stats: Stats
    stop: str
    spans: tuple[tuple[float, float], ...]
    launches: int
    spin: bool
    pattern: str = "stream"


def cupti_samples(dev: Any, case: Any, proto: Protocol, n: int, on_sample: Callable[[], None] = lambda: None,
                  clock: Callable[[], float] = time.perf_counter, cupti: Any = None) -> CuptiTiming:
    """Sample ``case`` as ``n`` launches a sample, each launch timed by its own CUPTI records: cold (an L2 flush
    before every launch; the flush is not the row's) or hot (``proto.flush_l2`` False).

    By default (:data:`GRAPH_ENV` unset), a row reset before each launch, or a capture refused, the launches are
    enqueued on the stream (:class:`_stream`). With :data:`GRAPH_ENV` set, a row that can repeat is sampled as one
    replay a sample of the graph the fallback times (:func:`graph_for`): the reference and the fallback then time
    the same executions and differ only by what they read (CUPTI each launch's span; the fallback the windows or
    replays around it).

    ``dev`` has ``flush_l2()``, ``synchronize()``, optionally ``spin(ms)`` and ``capture(enqueue)``; ``cupti`` is
    the module (None: :func:`load`).

    Raises:
        CuptiUnavailable: cupti-python is missing, CUPTI refused, or the row's launches left no records
            (the caller times the row another way and says why).
    """
    rec = Recorder(load() if cupti is None else cupti)
    rec.start()
    held: list[Any] = []
    try:
        # captured and instantiated with CUPTI attached, so its graph tracing knows the graph before the first
        # replay; the capture's own API records fall in no sample's bracket (the warm-up drains them)
        held = graph_for(dev, case, proto, n)
        sampler: Any = (Replays(dev, held[-1], rec, n, bool(proto.flush_l2)) if held
                        else _stream(dev, case, proto, n, rec, clock))
        got, spans = measure_spanned(sampler, proto, clock, on_sample)
    finally:
        for h in reversed(held):
            h.close()
        rec.stop()
    return CuptiTiming(got.stats, got.stop, spans, sampler.launches, sampler.spun, "graph" if held else "stream")


def drained(rec: Recorder, dev: Any, read: Callable[[list, list], float]) -> float:
    """Synchronise, then ``read(api, work)``; one more flush where a record was not handed over yet."""
    dev.synchronize()
    api, work = rec.drain()
    try:
        return read(api, work)
    except CuptiUnavailable:
        more_api, more_work = rec.drain()
        return read(api + more_api, work + more_work)


class _stream:  # noqa: N801  (used as a function: one sample a call)
    """``n`` launches enqueued behind a spin a sample, each bracketed by CUPTI timestamps: their activities / n.

    A row that cannot repeat (an in-place reduction) is reset before each launch. The reset's copies are made
    outside the launch's bracket, so their records are not the row's, as the flushes are not.
    """

    def __init__(self, dev: Any, case: Any, proto: Protocol, n: int, rec: Recorder, clock: Callable[[], float]):
        self.dev, self.case, self.proto, self.n, self.rec, self.clock = dev, case, proto, n, rec, clock
        self.enqueue_ms, self.launches, self.spun = SPIN_GUESS_MS * n, 0, False

    def __call__(self) -> float:
        dev, case, rec, n = self.dev, self.case, self.rec, self.n
        fresh = not case.can_repeat
        case.reset()
        spin = getattr(dev, "spin", None)
        if spin is not None:   # the launches run back to back, as a batch's do, not at Python's pace
            self.spun = bool(spin(min(SPIN_MAX_MS, 1.5 * self.enqueue_ms + 0.05)))
        marks: list[tuple[int, int]] = []
        e0 = self.clock()
        for i in range(n):
            if fresh and i:
                case.reset()
            if self.proto.flush_l2:
                dev.flush_l2()
            a = rec.timestamp()
            case.run()
            marks.append((a, rec.timestamp()))
        self.enqueue_ms = (self.clock() - e0) * 1e3
        self.launches += n
        return drained(rec, dev, lambda api, work: per_launch_ns(marks, api, work)) / 1e6


#: Set (to anything but ``0`` or empty) in a worker's environment, CUPTI reads the launches of the fallback's own
#: graph replay instead of ``n`` launches enqueued on the stream. Not the default: on an H200 (2026-11-29,
#: docs/timing.md) CUPTI's spans of back-to-back graph nodes read one-block kernels 0.1-0.2 us longer than the
#: same kernels enqueued on the stream, and the row it was meant to mend (transpose 1024^2 bankopt) read the same
#: under both patterns; kept so the two patterns can be compared on one GPU.
GRAPH_ENV = "CUDALAB_CUPTI_GRAPH"


def per_replay_ns(bracket: tuple[int, int], api: Sequence[tuple[int, int, int]],
                  work: Sequence[tuple[int, int, int]], n: int) -> float:
    """One graph replay of ``n`` launches: its activities' summed durations over ``n`` (ns). Every activity of
    the replay carries the correlation id of the one ``cuGraphLaunch`` made inside ``bracket``, and the graph
    holds the row's launches only.

    Raises:
        CuptiUnavailable: no record, or fewer activity records than launches.
    """
    total = per_launch_ns([bracket], api, work)
    owner = {corr for s, e, corr in api if bracket[0] <= s and e <= bracket[1]}
    got = sum(corr in owner for _, _, corr in work)
    if got < n:
        raise CuptiUnavailable(f"CUPTI gave {got} activity records for a replay of {n} launches")
    return total / n


def per_cold_replay_ns(bracket: tuple[int, int], api: Sequence[tuple[int, int, int]],
                       work: Sequence[tuple[int, int, int]], n: int) -> float:
    """One replay of ``[flush, mark, launch, mark] x n``: the activities of the replay in the GPU's order are
    ``n`` blocks, each the flush's one activity (cudalab's flush is one kernel, or one memset) and then the
    launch's; the launches' summed durations over ``n`` (ns). The event marks make no activity.

    Raises:
        CuptiUnavailable: no record, or records that do not split into ``n`` blocks of a flush and a launch.
    """
    owner = {corr for s, e, corr in api if bracket[0] <= s and e <= bracket[1]}
    mine = sorted((s, e) for s, e, corr in work if corr in owner)
    if not mine:
        raise CuptiUnavailable("CUPTI gave no activity record for this row's launches")
    size, extra = divmod(len(mine), n)
    if extra or size < 2:
        raise CuptiUnavailable(f"CUPTI gave {len(mine)} activity records for a replay of {n} flushes and launches")
    return sum(e - s for i, (s, e) in enumerate(mine) if i % size) / n


def graph_for(dev: Any, case: Any, proto: Protocol, n: int) -> list[Any]:
    """What a repeatable row is sampled as: the graph of ``n`` launches the fallback replays (hot), or its
    ``[flush, mark, launch, mark] x n`` (cold; :func:`cudalab.worker.graphs.window_samples`), last, after the
    event marks it holds. Empty for the stream pattern (the default: :data:`GRAPH_ENV` unset; a row reset before
    each launch, a device without graphs, a capture refused)."""
    if not case.can_repeat or not env_set(GRAPH_ENV) or not hasattr(dev, "capture"):
        return []
    cold = bool(proto.flush_l2)
    held: list[Any] = []
    try:
        marks = dev.marks(2 * n) if cold and hasattr(dev, "marks") else None
        if marks is not None:
            held.append(marks)

        def enqueue() -> None:
            for i in range(n):
                if cold:
                    dev.flush_l2()
                if marks is not None:
                    marks.record(2 * i)
                case.run()
                if marks is not None:
                    marks.record(2 * i + 1)

        case.reset()
        held.append(dev.capture(enqueue))
    except GpuError:   # a call a graph cannot hold: CUPTI times the launches on the stream
        for h in reversed(held):
            h.close()
        return []
    return held


class Replays:
    """One replay of ``graph`` a sample, behind a short spin (one host call enqueues it): the row's activities / n
    (cold: :func:`per_cold_replay_ns`)."""

    def __init__(self, dev: Any, graph: Any, rec: Recorder, n: int, cold: bool):
        self.dev, self.graph, self.rec, self.n = dev, graph, rec, n
        self.read = per_cold_replay_ns if cold else per_replay_ns
        self.launches, self.spun = 0, False

    def __call__(self) -> float:
        spin = getattr(self.dev, "spin", None)
        if spin is not None:
            self.spun = bool(spin(0.05))
        a = self.rec.timestamp()
        self.graph.launch()
        bracket = (a, self.rec.timestamp())
        self.launches += self.n
        return drained(self.rec, self.dev, lambda api, work: self.read(bracket, api, work, self.n)) / 1e6
