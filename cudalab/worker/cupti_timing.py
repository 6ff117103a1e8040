"""Short kernels timed by CUPTI's activity records: each launch's own GPU start and end (``--launch cupti``).

The other methods read two CUDA events around some work, so each carries something besides the kernel: one
launch between two events carries the launch overhead and the events' resolution; a batch of N launches
carries a warm L2 for launches 2..N (one flush a batch); a graph's back-to-back nodes hide the front-end work
that a kernel's isolated duration includes. CUPTI's activity API (what Nsight Systems reads) gives every
kernel, memset and copy a record with the start and end the GPU stamped on it. A sample here is N launches
of the row behind a spin kernel, cold with an L2 flush before every launch (``--hot``: none), and its value
is the summed durations of the activities the row's own launches made, over N: the flushes and the spin
are not the row's, and neither are the gaps between activities.

Which activities are the row's is told by correlation ids, not by kernel names (a flush that falls back to
a memset would look like a row's memset): every API call CUPTI records (driver and runtime) carries the
correlation id that its kernels, memsets and copies carry too, and each ``case.run()`` is bracketed by two
CUPTI timestamps (:func:`get_timestamp`, the records' own clock), so the calls that started and ended inside
a bracket are that launch's.

NVIDIA's ``cupti-python`` (import name ``cupti``; the ``cupti`` extra) is imported only here, and this module
only when ``--launch cupti`` or ``auto`` is asked (:func:`cudalab.worker.sampling.time_case`): a worker without it
starts and times short kernels by graph replay (:mod:`cudalab.worker.graphs`), the fallback designed to agree
with it. Whatever keeps CUPTI from timing a row (the package missing, CUPTI refusing, as under a tool that
holds it, no record for the row's launches) raises :class:`CuptiUnavailable`; the caller times the row by
graph replay (or events) and the row says why. CUPTI is attached for one row's samples and
finalized after them, so the rows the other methods time in the same worker (``cudalab truth``) run without
its record keeping.
"""

from __future__ import annotations

import bisect
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from cudalab.bench import Protocol, Stats, measure_spanned
from cudalab.errors import GpuError

#: The API records that carry a call's correlation id and its host start/end (CUPTI's clock).
API_KINDS = ("DRIVER", "RUNTIME")
#: The GPU activities a row's launches can make; their durations are summed.
WORK_KINDS = ("CONCURRENT_KERNEL", "MEMSET", "MEMCPY")
#: Bytes of each activity buffer CUPTI asks for. A sample of 1,000 launches with a flush before each makes
#: about 2,000 kernel records and a few thousand API records (well under 1 MiB); a fuller buffer is
#: handed back and another asked for.
BUFFER_BYTES = 4 << 20
#: Spin before a sample: this many ms per launch until the host's enqueue time is measured (as a batch).
SPIN_GUESS_MS = 0.02
#: Never spin longer than this before one sample.
SPIN_MAX_MS = 50.0
INSTALL_HINT = "pip install 'cudalab[cupti]' (cupti-python, matching the driver's CUDA)"


class CuptiUnavailable(GpuError):
    """CUPTI cannot time this row (not installed, refused, no records): the caller times it another way."""


#: Set (to anything but ``0`` or empty) in a worker's environment, cupti-python counts as not installed: the one
#: switch that lets a benchmark time the same rows without CUPTI in the same call (``--launch auto``'s fallback).
NO_CUPTI_ENV = "CUDALAB_NO_CUPTI"


def switched_off(environ: Mapping[str, str] | None = None) -> bool:
    """Whether :data:`NO_CUPTI_ENV` asks the worker to behave as if cupti-python did not import."""
    return (os.environ if environ is None else environ).get(NO_CUPTI_ENV, "") not in ("", "0")


def load() -> Any:
    """The ``cupti`` module of ``cupti-python``.

    Raises:
        CuptiUnavailable: it is not installed, cannot load (no libcupti, a Python it was not built for), or
            :data:`NO_CUPTI_ENV` is set.
    """
    if switched_off():
        raise CuptiUnavailable(f"cupti-python is switched off ({NO_CUPTI_ENV} is set)")
    try:
        from cupti import cupti  # noqa: PLC0415  (lazy on purpose: only --launch cupti needs it)
    except ImportError as exc:
        raise CuptiUnavailable(f"cupti-python is not installed or cannot load ({exc}); {INSTALL_HINT}") from None
    except Exception as exc:  # a library the package needs is missing: not an ImportError everywhere
        raise CuptiUnavailable(f"cupti-python cannot load ({type(exc).__name__}: {exc})") from None
    return cupti


def available() -> bool:
    """Whether cupti-python loads in this worker (what ``--launch auto`` asks once per row; the import is cached)."""
    try:
        load()
    except CuptiUnavailable:
        return False
    return True


def _why(cupti: Any, exc: BaseException) -> str:
    """A CUPTI error in a few words: the result's name where the exception carries its status."""
    status = getattr(exc, "status", None)
    try:
        name = cupti.Result(status).name if status is not None else ""
    except Exception:  # an unknown status, or a module without Result: the text says enough
        name = ""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{text} ({name})" if name and name not in text else text


class Recorder:
    """One row's CUPTI session: the activity kinds enabled, the records copied out of CUPTI's buffers.

    The records are copied into tuples inside the buffer-completed callback: the objects CUPTI hands over
    view its buffer, which is reused once the callback returns.
    """

    def __init__(self, cupti: Any):
        self.cupti = cupti
        kind = cupti.ActivityKind
        self._api = {int(getattr(kind, k)) for k in API_KINDS}
        self._work = {int(getattr(kind, k)) for k in WORK_KINDS}
        self._enabled: list[Any] = []
        self.api: list[tuple[int, int, int]] = []        # (start, end, correlation id) of each API call
        self.work: list[tuple[int, int, int]] = []       # (start, end, correlation id) of each GPU activity

    def _requested(self) -> tuple[int, int]:
        return BUFFER_BYTES, 0   # 0: as many records as the buffer holds

    def _completed(self, activities: Sequence[Any]) -> None:
        for a in activities:
            k = int(a.kind)
            if k in self._api:
                self.api.append((int(a.start), int(a.end), int(a.correlation_id)))
            elif k in self._work:
                self.work.append((int(a.start), int(a.end), int(a.correlation_id)))

    def start(self) -> None:
        """Register the buffer callbacks and enable the kinds.

        Raises:
            CuptiUnavailable: CUPTI refused (another tool holds it, a driver it does not support).
        """
        c = self.cupti
        try:
            c.activity_register_callbacks(self._requested, self._completed)
            for k in API_KINDS + WORK_KINDS:
                c.activity_enable(getattr(c.ActivityKind, k))
                self._enabled.append(getattr(c.ActivityKind, k))
        except Exception as exc:  # cupti.cuptiError, or what the binding raises for a driver it cannot use
            self.stop()
            raise CuptiUnavailable(f"CUPTI refused: {_why(c, exc)}") from None

    def timestamp(self) -> int:
        """CUPTI's clock (ns), the one its records are stamped with.

        Raises:
            CuptiUnavailable: CUPTI could not read it.
        """
        try:
            return int(self.cupti.get_timestamp())
        except Exception as exc:
            raise CuptiUnavailable(f"CUPTI's timestamp failed: {_why(self.cupti, exc)}") from None

    def drain(self) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
        """Every record of the work finished so far (the caller synchronised), taken out of the recorder.

        Raises:
            CuptiUnavailable: the flush failed.
        """
        try:
            self.cupti.activity_flush_all(1)   # 1: CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, buffers not yet full too
        except Exception as exc:
            raise CuptiUnavailable(f"CUPTI's flush failed: {_why(self.cupti, exc)}") from None
        api, work = self.api, self.work
        self.api, self.work = [], []
        return api, work

    def stop(self) -> None:
        """Disable what was enabled and detach CUPTI (safe twice; errors ignored: the row's figure is in)."""
        c = self.cupti
        for k in reversed(self._enabled):
            try:
                c.activity_disable(k)
            except Exception:  # already gone with the context: nothing left to turn off
                pass
        self._enabled.clear()
        try:
            c.activity_flush_all(1)
            c.finalize()   # the rows after this one run without CUPTI's record keeping
        except Exception:
            pass


def per_launch_ns(marks: Sequence[tuple[int, int]], api: Sequence[tuple[int, int, int]],
                  work: Sequence[tuple[int, int, int]]) -> float:
    """The mean over the launches of their activities' summed durations (ns).

    Args:
        marks: CUPTI timestamps (before, after) around each ``case.run()``, in order.
        api: (start, end, correlation id) of the API calls recorded meanwhile.
        work: (start, end, correlation id) of the GPU activities recorded meanwhile.

    Raises:
        CuptiUnavailable: no launch, or not every launch, has an activity record.
    """
    starts = [a for a, _ in marks]
    owner: dict[int, int] = {}
    for s, e, corr in api:
        i = bisect.bisect_right(starts, s) - 1
        if i >= 0 and e <= marks[i][1]:   # started and ended inside launch i's bracket
            owner[corr] = i
    per = [0] * len(marks)
    seen = [False] * len(marks)
    for s, e, corr in work:
        i = owner.get(corr)
        if i is not None:
            per[i] += e - s
            seen[i] = True
    if not any(seen):
        raise CuptiUnavailable("CUPTI gave no activity record for this row's launches")
    if not all(seen):
        raise CuptiUnavailable(f"CUPTI gave activity records for {sum(seen)} of {len(marks)} launches")
    return sum(per) / len(marks)


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
