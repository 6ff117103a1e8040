"""The judge's look at a candidate row (``cudalab judge``, issue 60): two input sets, timed in alternation.

A kernel that remembers its answer — keyed on its input's address, on its first values, or on nothing
but "the output already holds something" — passes the verified launches and is timed doing less; one that
skips its work while the input is what it was last launch is always right and timed doing less. So the
candidate's device input buffers (same addresses) are refilled in place, by a device copy from a stash of
each set (:class:`Sets`), with a second input set and the first:

- **the reported time alternates**: the reset before every timed launch refills the other set first (A, B,
  A, B...: the L2 flushed after the refill as for any launch), so no timed launch sees the input of the
  launch before it, and a skip on repeated input gains nothing in the row's time (:func:`time_judged`);
- **the second set is verified**: after timing, the sets are switched :data:`ROUNDS` times and launched
  :data:`REPEATS` times each without poisoning the output in between: the first launch after a switch finds
  the *other* set's answer in its output, so a kernel that skips, or copies a remembered answer, leaves a
  wrong one, checked against that set's own reference (computed on the host; no reference is ever on the
  device). The second set shares its first and last :data:`EDGE` elements with the first, so a memo keyed on
  those values returns the wrong answer;
- **fresh against repeat, paired**: :data:`PAIRS` pairs of timed launches, each launch after the same steps
  (refill, reset, spin, L2 flush): a ``repeat`` launch's refill copies the set the launch before it saw, a
  ``fresh`` launch's the other set. An honest kernel cannot tell them apart (the same copies, the same
  flush: their ratio is 1.00 on an H200, scripts/probe_memo_pairs.py); one that does less on input it has
  seen is faster on repeats (the parent's judge turns that into the ``memo`` flag,
  :func:`cudalab.judging.verdict.memo_from_pairs`).

After every verifying launch the host waits for the whole context (``synchronize``) and times that wait:
on an honest kernel it is the API's own few microseconds; work the kernel left running on the device after
its stop event (a child grid, another stream) would make it long (``idle_after_stop_ms``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from cudalab.worker import heartbeat
from cudalab.worker.verify import same_bytes

__all__ = ["EDGE", "ROUNDS", "REPEATS", "PAIRS", "Sets", "second_inputs", "prepare", "alternating", "time_judged",
           "probe", "attach"]

#: Elements at each end of every input that the second set copies from the first.
EDGE = 64
#: Switches between the two sets (B, A, B, A...) in the second set's verification.
ROUNDS = 4
#: Launches after each switch (the first and the last checked).
REPEATS = 3
#: Pairs of timed launches (one fresh, one repeat) in the paired comparison.
PAIRS = 16
#: Spin before each paired launch (ms): the host enqueues the flush, the events and the launch meanwhile.
PAIR_SPIN_MS = 0.2
#: Added to the first seed to draw the second set.
SECOND_SEED = 0x5EED


@dataclass
class Sets:
    """The two input sets of a candidate row, and the device buffers its kernel reads.

    Attributes:
        targets: (device buffer the kernel reads, first set's host array, second set's host array).
        stash: per target, device copies of the first and second set (a refill is then a device copy, not an
            upload: no seconds of PCIe, no idle GPU between launches); empty where they did not fit (refills
            upload from the host instead).
        why: why the sets cannot be used ('' when they can): the row is timed and probed without them.
        second: whether the buffers hold the second set now.
    """

    targets: list[tuple[Any, np.ndarray, np.ndarray]] = field(default_factory=list)
    stash: list[tuple[Any, Any]] = field(default_factory=list)
    why: str = ""
    second: bool = False

    @property
    def ready(self) -> bool:
        """Whether the sets can be switched in the kernel's buffers."""
        return not self.why and bool(self.targets)

    def fill(self, second: bool) -> None:
        """Refill every buffer with one set (enqueued on the default stream, before whatever comes next)."""
        for k, (arr, host_a, host_b) in enumerate(self.targets):
            if self.stash:
                arr.copy_from(self.stash[k][1 if second else 0])
            else:
                arr.upload(host_b if second else host_a)
        self.second = second

    def free(self) -> None:
        """Release the stash."""
        for pair in self.stash:
            for arr in pair:
                getattr(arr, "free", lambda: None)()
        self.stash = []


def second_inputs(first: dict[str, np.ndarray], make: Callable[[np.random.Generator], dict[str, np.ndarray]],
                  seed: int | None) -> dict[str, np.ndarray]:
    """A second input set drawn from another seed, its first and last :data:`EDGE` elements the first set's.

    Args:
        first: the point's inputs.
        make: the family's ``make_inputs`` for a generator.
        seed: the point's seed.
    """
    drawn = make(np.random.default_rng((seed or 0) + SECOND_SEED))
    out = {}
    for name, b in drawn.items():
        a = first.get(name)
        b = np.array(b, copy=True)
        if isinstance(a, np.ndarray) and a.shape == b.shape and a.dtype == b.dtype and b.size:
            edge = min(EDGE, b.size // 4)
            fa, fb = a.reshape(-1), b.reshape(-1)
            fb[:edge] = fa[:edge]
            if edge:
                fb[-edge:] = fa[-edge:]
        out[name] = b
    return out


def prepare(run: Any, ctx: Any) -> Sets:
    """The candidate row's two sets (the second drawn once per point, its reference computed on the host), with
    a device stash of each; :attr:`Sets.why` says why not where they cannot be used.

    Args:
        run: the :class:`~cudalab.worker.executor.FamilyRun` (its inputs, family, device).
        ctx: the run's context, after the row's setup: the device copies of the inputs are found there.
    """
    from cudalab.errors import GpuError  # noqa: PLC0415

    fam, problem = run.family, run.problem
    try:
        if run.second is None:  # once per point: every kernel row of the point is probed on the same set
            with heartbeat.host_work():
                b = second_inputs(run.inputs, lambda rng: fam.make_inputs(problem, rng), run.req.seed)
                run.second = (b, fam.reference(problem, b))
    except Exception as exc:  # a family that cannot draw a second set: the row stands, the JSON says why
        return Sets(why=f"{type(exc).__name__}: {exc}")
    b = run.second[0]
    targets = [(arr, host, b[name]) for name, host in run.inputs.items() if name in b
               for arr in ctx.uploads_of(host)]
    # Refilling only some of what the kernel reads would mix the sets and fault an honest kernel: every input
    # must have its device copy here, and nothing else may have been uploaded (an array derived from them).
    missing = [name for name, host in run.inputs.items() if not ctx.uploads_of(host)]
    derived = ctx.uploaded_ids() - {id(h) for h in run.inputs.values()}
    if missing or derived or not targets:
        return Sets(why=f"input {missing[0]!r} has no device copy to refill" if missing else
                    "the family uploads arrays derived from its inputs" if derived else "no input on the device")
    sets = Sets(targets)
    try:
        for arr, host_a, host_b in targets:
            pitched = bool(getattr(arr, "pitched", False))
            sets.stash.append((run.device.to_device(host_a, pitched=pitched),
                               run.device.to_device(host_b, pitched=pitched)))
    except (GpuError, KeyboardInterrupt):
        sets.free()
        raise
    except Exception:  # no memory for the stash: refills upload from the host (slower, as right)
        sets.free()
    return sets


def alternating(case: Any, sets: Sets) -> Any:
    """``case`` with a reset that first refills the other set: every launch after a reset sees new input."""
    def reset() -> None:
        sets.fill(not sets.second)
        case.reset()

    return replace(case, reset=reset, repeatable=False)


def time_judged(dev: Any, case: Any, proto: Any, sets: Sets, time_case: Callable[..., Any]) -> Any:
    """The row's timing with the sets alternated between launches (:func:`alternating`), the first set back in the
    buffers after it; ``time_case`` alone where the sets cannot be used.

    The alternating case cannot repeat, so every method resets it before each launch: events (one launch a
    pair), CUPTI (each launch's own span; the reset outside it) and graph windows (the resets captured between
    the launches' event nodes); a batch becomes events. A captured graph of an odd number of launches repeats
    its last set at its first launch when replayed: one launch in that many."""
    if not sets.ready:
        return time_case(dev, case, proto)
    timing = time_case(dev, alternating(case, sets), proto)
    sets.fill(False)  # the point's own inputs again for what follows (time to result, the probe)
    return timing


def probe(dev: Any, case: Any, sets: Sets, check: Callable[[Any, Any], Any], ref_a: Any, ref_b: Any,
          flush: bool) -> dict[str, Any]:
    """Verify the second set in place, then time fresh against repeat launches; return the row's ``judge`` figures.

    Args:
        dev: the device (``flush_l2``, ``time_ms``, ``synchronize``, optional ``spin``).
        case: the row's case (``reset``, ``run``, ``result``).
        sets: the row's two sets (:func:`prepare`).
        check: the family's check of one result against a reference.
        ref_a, ref_b: the two sets' references (host).
        flush: flush the L2 before each launch.

    Returns:
        ``second_set`` (``ran``), ``answers_differ``, ``wrong`` (None, or the first wrong launch: ``set``,
        ``launch``, ``what``), ``fresh_ms``, ``repeat_ms`` (paired: the k-th of each come from one pair),
        ``idle_after_stop_ms``.
    """
    idle: list[float] = []
    wrong: dict[str, Any] | None = None
    with heartbeat.host_work():
        differ = not same_bytes(np.asarray(ref_a), np.asarray(ref_b)) if isinstance(ref_a, np.ndarray) else True
    try:
        for r in range(ROUNDS):
            second = r % 2 == 0
            sets.fill(second)
            ref = ref_b if second else ref_a
            for k in range(REPEATS):
                case.reset()
                if flush:
                    dev.flush_l2()
                dev.time_ms(case.run)  # waits for its stop event: what the kernel left running comes after it
                t0 = time.perf_counter()
                dev.synchronize()
                idle.append((time.perf_counter() - t0) * 1e3)
                if wrong is None and (k == 0 or k == REPEATS - 1):
                    with heartbeat.host_work():
                        chk = check(case.result(), ref)
                    if not chk.ok:
                        what = f"{chk.what} {chk.max_error:.3g} > {chk.tolerance:.3g}{chk.detail}"
                        wrong = {"set": "second" if second else "first", "launch": r * REPEATS + k + 1,
                                 "what": what}
        fresh, repeat = pairs(dev, case, sets, flush)
    finally:
        try:  # the first set back: whatever runs next sees the point's own inputs
            sets.fill(False)
            dev.synchronize()
        except Exception:  # a context the kernel broke: the error that broke it is what the row reports
            pass
    return {"second_set": "ran", "answers_differ": bool(differ), "wrong": wrong, "fresh_ms": fresh,
            "repeat_ms": repeat, "idle_after_stop_ms": idle, "refill": "device copy" if sets.stash else "upload"}


def pairs(dev: Any, case: Any, sets: Sets, flush: bool) -> tuple[list[float], list[float]]:
    """:data:`PAIRS` (fresh, repeat) pairs of one-launch samples, each launch after the same steps; the order
    within a pair alternates (repeat first, then fresh first) so a drift in clocks falls on both alike."""
    spin = getattr(dev, "spin", None)

    def launch(second: bool) -> float:
        sets.fill(second)
        case.reset()
        if spin is not None:
            spin(PAIR_SPIN_MS)
        if flush:
            dev.flush_l2()
        t = dev.time_ms(case.run)
        dev.synchronize()
        return float(t.ms)

    launch(sets.second)  # a launch on the current set: the first repeat below repeats it
    fresh: list[float] = []
    repeat: list[float] = []
    for k in range(PAIRS):
        for is_fresh in ((False, True) if k % 2 == 0 else (True, False)):
            ms = launch(not sets.second if is_fresh else sets.second)
            (fresh if is_fresh else repeat).append(ms)
    return fresh, repeat


def attach(row: Any, run: Any, case: Any, sets: Sets) -> Any:
    """``row`` with the probe's figures in ``extra["judge"]`` (``second_set``: why not, when it could not run).

    Args:
        row: the passed, timed row.
        run: the :class:`~cudalab.worker.executor.FamilyRun` (its reference, family, device).
        case: the row's case.
        sets: the row's two sets (:func:`prepare`); the row's time alternated them when they were ready.

    Raises:
        GpuError: the kernel failed on the second set (the caller's row becomes ``failed``).
    """
    from cudalab.errors import GpuError  # noqa: PLC0415

    fam, problem = run.family, run.problem
    if not sets.ready:
        fig: dict[str, Any] = {"second_set": f"not run: {sets.why or 'no input on the device'}", "alternated": False}
        return replace(row, extra=dict(row.extra, judge=fig))
    try:
        fig = probe(run.device, case, sets, lambda out, ref: fam.check(problem, out, ref), run.reference,
                    run.second[1], run.req.protocol.flush_l2)
    except (GpuError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a family whose check cannot take the second set: the row stands, the JSON says why
        fig = {"second_set": f"not run: {type(exc).__name__}: {exc}"}
    fig["alternated"] = True
    return replace(row, extra=dict(row.extra, judge=fig))
