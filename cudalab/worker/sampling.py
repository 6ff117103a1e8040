"""Timed samples of one variant on a device: one launch per event pair, or N launches a sample for short kernels.

A kernel under ~20 µs timed alone between two events measures launch overhead and the events'
resolution (the one-block smem demos read 2.9-4.0 µs in 32 ns steps). What ``--launch auto`` times such
a kernel with is :func:`cudalab.bench.auto_method`: CUPTI's own span of each launch where cupti-python loads
(:mod:`cudalab.worker.cupti_timing`), graph replay designed to agree with it otherwise
(:mod:`cudalab.worker.graphs`); both take over after one-launch probes have sized N (launches a sample, so a
sample lasts about 200 µs). A row either cannot time falls to the next (cupti -> graph -> batch or events) and
its note says why, except auto's graph where cupti-python is simply missing (the designed fallback).

``--launch batch``: N back-to-back launches per event pair, time per launch = the batch time / N: the
throughput a stream of launches reaches (each launch carries the gap to the next), not a kernel's span.
Before each batch a spin kernel holds the stream while the host enqueues the N launches, so they run back
to back rather than at Python's launch rate. With a cold-cache protocol the L2 is flushed before each
batch, not each launch: launches 2..N find what launch 1 left in L2 (the table marks such rows ×N).

Every event-timed sample starts behind a spin kernel: the host enqueues the flush, the start event, the
launch(es) and the end event while the spin holds the stream, so no host latency falls between the two
events. The spin is sized from the host's last enqueue time, so whether it lasted is checked, not
assumed: a sample whose start event the GPU reached before the host had queued its launches is redone
behind a spin twice as long (up to RETIME_MAX times), and one still overtaken is kept and counted
(``host_gaps``).

Only cases that are safe to repeat are batched (``Case.can_repeat``): the in-place reductions need
their input restored before every launch. CUPTI and graph windows reset them before each launch outside
what they count; events time them otherwise.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from cudalab.bench import Protocol, Stats, auto_method, batch_size, measure_spanned, measure_until, summarize
from cudalab.errors import GpuError
from cudalab.bench import measure as _measure
from cudalab.worker import heartbeat
from cudalab.worker.graphs import graph_samples, needs_windows

#: Probe samples (one launch each) that decide whether a kernel is short.
PROBES = 5
#: Spin before a batch: this many ms per launch until the host's enqueue rate is measured.
SPIN_GUESS_MS = 0.02
#: Spin before the first one-launch sample, until the host's enqueue time is measured.
SPIN_FIRST_MS = 0.1
#: Never spin longer than this before one batch.
SPIN_MAX_MS = 50.0
#: Nor before a one-launch sample (a library call that synchronises inside would otherwise grow it).
SPIN_SINGLE_MAX_MS = 2.0
#: A sample the GPU overtook (see above) is redone at most this many times.
RETIME_MAX = 3


@dataclass(frozen=True)
class Timing:
    """The samples of one variant.

    Attributes:
        stats: per-launch times (ms); for a batched kernel each sample is one batch's time / batch.
        stop: why sampling stopped (``iqr``, ``ci``, ``budget``, ``max``).
        batch: launches per event pair (1: unbatched).
        single_ms: median of the one-launch probes when the kernel was batched, else None.
        launches: every launch of ``run`` made here (warm-up and probes too): energy per launch.
        spin: whether a spin kernel held the stream while each sample was enqueued (before the L2
            flush, so the start event and the launch are queued before the GPU reaches them).
        retimed: timed samples redone because the GPU reached the start event before the host had
            queued the launches (each retry spins twice as long); warm-ups and probes not counted.
        host_gaps: timed samples kept though still overtaken after RETIME_MAX retries (or after an
            earlier sample had been): host latency may lie inside them.
        method: what timed the samples: ``events`` (one launch per event pair), ``batch`` (N launches
            enqueued between two events), ``graph`` (N launches replayed as a CUDA graph) or ``cupti`` (N
            launches, each timed by its own CUPTI activity records).
        empty_ms: graph windows (cold, or a row reset before each launch): the empty kernel's hot time per launch
            put back (:func:`cudalab.worker.graphs.window_samples`).
        note: why the method asked for was not used (``timed by graph: ...``: CUPTI missing or refusing;
            ``timed by batch: ...``: a case a graph cannot capture).
        spans: per timed sample (in ``stats.samples`` order), the host clock's (start, end) around it:
            the GPU ran it inside that span (telemetry's polls say whether it ran throttled).
    """

    stats: Stats
    stop: str
    batch: int = 1
    single_ms: float | None = None
    launches: int = 0
    spin: bool = False
    retimed: int = 0
    host_gaps: int = 0
    spans: tuple[tuple[float, float], ...] = ()
    method: str = "events"
    empty_ms: float = 0.0
    note: str = ""

    def extra(self) -> dict:
        """``Result.extra`` entries: why sampling stopped, redone samples, the method, and the batch facts
        (``launch_overhead_us``: the one-launch probes' median less the time per launch of the batch)."""
        out: dict = {"stop": self.stop, "timed_by": self.method}
        out.update({k: v for k, v in (("retimed", self.retimed), ("host_gaps", self.host_gaps)) if v})
        if self.batch > 1:
            out.update(batch=self.batch, single_launch_ms=self.single_ms, batch_spin=self.spin)
        if self.single_ms is not None and self.method != "events":
            out["launch_overhead_us"] = (self.single_ms - self.stats.median) * 1e3
        if self.method == "graph" and self.empty_ms:
            out["graph_empty_ms"] = self.empty_ms
        if self.note:
            out["timed_by_note"] = self.note
        return out


def time_case(dev: Any, case: Any, proto: Protocol, clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Warm up and sample one case on ``dev`` (``time_ms``, ``flush_l2``, optional ``spin``)."""
    count = [0]

    def run() -> None:
        count[0] += 1
        case.run()

    if case.timer == "host":
        def host_sample() -> float:
            case.reset()
            t0 = clock()
            run()
            return (clock() - t0) * 1e3

        # NumPy's rows are a baseline read at a glance: three samples, an eighth of the budget (a 15 ms
        # host sum used to spend the whole half second on CI targets it never reaches; a quarter of it was
        # a tenth of `cudalab reduce --all`'s time to table)
        host_proto = replace(proto, min_samples=min(proto.min_samples, 3), warmup=0, budget_s=proto.budget_s / 8)
        m = measure_until(host_sample, host_proto, clock, on_sample=heartbeat.beat)
        return Timing(m.stats, m.stop, launches=count[0])

    spin = getattr(dev, "spin", None)
    state = {"enqueue_ms": SPIN_FIRST_MS, "spun": False, "stretch": 1.0, "retimed": 0, "gaps": 0, "gave_up": False}

    def hold(cap_ms: float) -> None:
        # Without a queue ahead of it, the GPU would stamp the start event and then wait for Python
        # to enqueue the launch: host latency inside the timed window (the H100 read 1-5% over ncu).
        if spin is not None:
            state["spun"] = bool(spin(min(cap_ms, state["stretch"] * (1.5 * state["enqueue_ms"] + 0.05))))

    def sample(launches: int, cap_ms: float) -> float:
        """One event pair around ``launches`` launches behind a spin; redone while the GPU overtook.
        Once a sample stays overtaken through every retry (a call that waits for the GPU inside the
        launch, say), the rest are kept as they come: counted, not redone."""
        tries = 1 if state["gave_up"] else RETIME_MAX + 1
        for attempt in range(tries):
            case.reset()
            hold(cap_ms)
            if proto.flush_l2:
                dev.flush_l2()

            def enqueue() -> None:
                t0 = clock()
                for _ in range(launches):
                    run()
                state["enqueue_ms"] = (clock() - t0) * 1e3

            t = dev.time_ms(enqueue)
            if t.ahead or not state["spun"]:  # without a spin nothing can be ahead: nothing to redo
                return t.ms
            state["stretch"] *= 2  # the host is slower than its last enqueue said: stays longer
            if attempt < tries - 1:
                state["retimed"] += 1
        state["gaps"] += 1
        state["gave_up"] = True
        return t.ms

    def timed(sampler: Callable[[], float], warmup: bool, **kw: Any) -> Timing:
        """Warm up, then the samples that count (and only they count in ``retimed``/``host_gaps``)."""
        m, spans = measure_spanned(sampler, proto if warmup else replace(proto, warmup=0), clock, heartbeat.beat,
                                   lambda: state.update(retimed=0, gaps=0))
        return Timing(m.stats, m.stop, launches=count[0], spin=bool(state["spun"]), retimed=state["retimed"],
                      host_gaps=state["gaps"], spans=spans, **kw)

    def single() -> float:
        return sample(1, SPIN_SINGLE_MAX_MS)

    asked = proto.launch
    method = auto_method(_cupti_loads()) if asked == "auto" else asked
    why = _cannot(method, case, dev, proto)  # why graph or cupti cannot time this row ('' when it can, or not asked)
    own = method in ("graph", "cupti") and not why
    if not own and (method == "events" or not case.can_repeat or proto.max_batch < 2 or proto.batch_below_ms <= 0):
        return replace(timed(single, warmup=True), note=_fell("events", why))
    for _ in range(proto.warmup):
        single()
    probes = [single() for _ in range(PROBES)]
    n = batch_size(float(np.median(probes)), proto)
    single_ms = float(np.median(probes))
    if asked == "auto" and n == 1:   # 20 µs or more: one launch per event pair is the kernel's time
        return timed(single, warmup=False)
    if own and method == "cupti":
        from cudalab.worker import cupti_timing  # noqa: PLC0415  (cupti-python is optional)

        try:
            c = cupti_timing.cupti_samples(dev, case, proto, n, heartbeat.beat, clock)
            return Timing(c.stats, c.stop, batch=n, single_ms=single_ms, launches=count[0] + c.launches,
                          spin=c.spin, spans=c.spans, method="cupti")
        except cupti_timing.CuptiUnavailable as exc:  # a GPU error of the row itself is not caught: it fails it
            # the fallback designed to agree with CUPTI (docs/timing.md); under auto without cupti-python the
            # worker asked graph from the start, so this note is for a row CUPTI refused or --launch cupti
            why = str(exc)
            own = not _cannot("graph", case, dev, proto)
            method = "graph" if own else method
    if own and method == "graph":
        try:
            g = graph_samples(dev, case, proto, n, heartbeat.beat, clock)
            return Timing(g.stats, g.stop, batch=n, single_ms=single_ms, launches=count[0], spans=g.spans,
                          method="graph", empty_ms=g.empty_ms, note=_fell("graph", why))
        except GpuError as exc:  # a library call or a copy the capture refused: events time it, the row says why
            why = f"{why}; " * bool(why) + f"the graph capture failed ({exc})"
    if n == 1 or not case.can_repeat:   # a row reset before each launch cannot be batched
        return replace(timed(single, warmup=False), note=_fell("events", why))
    state["enqueue_ms"] = SPIN_GUESS_MS * n

    def batch(k: int) -> float:
        return sample(k, SPIN_MAX_MS) / k

    # One batch refines N: back to back, a launch costs less than the probe's lone launch did.
    n = max(n, batch_size(batch(n), proto)) if proto.max_batch > n else n
    return timed(lambda: batch(n), warmup=False, batch=n, single_ms=single_ms, method="batch",
                 note=_fell("batch", why))


def _cupti_loads() -> bool:
    """Whether cupti-python loads in this worker (``--launch auto``'s choice; honours ``CUDALAB_NO_CUPTI``)."""
    from cudalab.worker import cupti_timing  # noqa: PLC0415  (light: cupti-python itself is imported in load())

    return cupti_timing.available()


def _cannot(method: str, case: Any, dev: Any, proto: Protocol) -> str:
    """Why ``method`` (graph, cupti) cannot time ``case`` before anything is tried ('' when it may)."""
    if method != "graph":
        return ""
    if not hasattr(dev, "capture"):
        return "this device cannot capture a graph"
    if needs_windows(case, proto) and not (hasattr(dev, "marks") and hasattr(dev, "empty_kernel")):
        return "this device cannot put event nodes in a graph"
    return ""


def _fell(used: str, why: str) -> str:
    """The row's note when another method timed it than the one asked: ``timed by batch: <why>``."""
    return f"timed by {used}: {why}" if why else ""


def throttle_marks(window: Any, timing: Timing, drop: bool) -> tuple[Stats, dict]:
    """The row's statistics and its ``throttled`` count (samples taken while NVML saw the GPU throttled);
    with ``drop`` (``--drop-throttled``) the statistics without them, unless every sample was."""
    flags = window.throttled(list(timing.spans)) if timing.spans else []
    if len(flags) != timing.stats.n:  # samples without spans (one host sample): nothing to judge
        return timing.stats, {}
    marks: dict = {"throttled": sum(flags)}
    if not drop or not marks["throttled"]:
        return timing.stats, marks
    kept = [x for x, bad in zip(timing.stats.samples, flags) if not bad]
    if not kept:
        return timing.stats, dict(marks, throttled_note="every sample was throttled: none dropped")
    return summarize(kept), dict(marks, throttled_dropped=marks["throttled"])


#: A batch of ``--energy`` launches lasts about this long: the counter is read while it runs.
ENERGY_BATCH_S = 0.05


def sustained_energy(dev: Any, case: Any, median_ms: float, tele: Any, seconds: float, work_bytes: int = 0,
                     work_flops: int = 0, clock: Callable[[], float] = time.perf_counter) -> dict:
    """``--energy``: the row's launches (with their resets) back to back for ``seconds``, the board's
    power from NVML's energy counter meanwhile (:meth:`cudalab.instruments.telemetry.Telemetry.sustained_watts`);
    energy per launch = that power x the event median. ``Result.extra`` entries, or a note why none.
    """
    def enqueue_k(k: int) -> None:
        for _ in range(k):
            case.reset()
            case.run()

    def batch(per: float) -> int:
        return int(min(100_000, max(1, math.ceil(ENERGY_BATCH_S / per))))

    # One batch timed whole: where Python cannot enqueue launches as fast as the GPU runs them, that
    # pace is what the batches have (and the GPU idles between launches: its power is lower).
    per = max(median_ms, 1e-3) / 1e3   # seconds per launch, resets and enqueueing included
    k = batch(per)
    t0 = clock()
    enqueue_k(k)
    dev.synchronize()
    per = max(per, (clock() - t0) / k)
    k = batch(per)

    def enqueue() -> float:
        enqueue_k(k)
        return k * per

    got = tele.sustained_watts(enqueue, dev.synchronize, seconds, clock)
    if got is None:
        return {"energy_note": "NVML's energy counter did not move"}
    return got.extra(median_ms, work_bytes, work_flops)


def measure(sample: Callable[[], float], protocol: Protocol, clock: Callable[[], float] = time.perf_counter) -> Stats:
    """:func:`cudalab.bench.measure` with the worker's heartbeat after each sample."""
    return _measure(sample, protocol, clock, on_sample=heartbeat.beat)
