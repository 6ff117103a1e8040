"""The judge's second look at a kernel row (``cudalab judge``, issue 60): a second input set, in place.

A kernel that remembers its answer — keyed on its input's address, on its first values, or on nothing
but "the output already holds something" — passes the verified launches and is timed doing less. So,
after the row is timed, the same device input buffers (same addresses) are refilled in turn with a
second input set and with the first, and the kernel is launched several times on each without poisoning
the output in between: the first launch after a switch finds the *other* set's answer in its output, so
a kernel that skips, or copies a remembered answer, leaves a wrong one, checked against that set's own
reference (computed on the host; no reference is ever on the device). The second set shares its first
and last :data:`EDGE` elements with the first, so a memo keyed on those values returns the wrong answer.

Each launch is timed alone between two events (the L2 flushed first when the protocol flushes): the first
launch after a switch is ``fresh``, the others ``repeat``. A kernel whose repeats are much faster than its
fresh launches did less on input it had seen (the parent's judge turns that into the ``memo`` flag).

After every timed launch's end event the host waits for the whole context (``synchronize``) and times that
wait: on an honest kernel it is the API's own few microseconds; work the kernel left running on the device
after its stop event (a child grid, another stream) would make it long (``idle_after_stop_ms``).
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from cudalab.worker import heartbeat
from cudalab.worker.verify import same_bytes

__all__ = ["EDGE", "ROUNDS", "REPEATS", "second_inputs", "probe"]

#: Elements at each end of every input that the second set copies from the first.
EDGE = 64
#: Switches between the two sets (B, A, B, A...): each gives one fresh launch.
ROUNDS = 4
#: Launches after each switch (the first fresh, the others repeats).
REPEATS = 3
#: Added to the first seed to draw the second set.
SECOND_SEED = 0x5EED


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


def probe(dev: Any, case: Any, targets: list[tuple[Any, np.ndarray, np.ndarray]], check: Callable[[Any, Any], Any],
          ref_a: Any, ref_b: Any, flush: bool) -> dict[str, Any]:
    """Alternate the two input sets in place, launch, check and time; return the row's ``judge`` figures.

    Args:
        dev: the device (``flush_l2``, ``time_ms``, ``synchronize``).
        case: the row's case (``reset``, ``run``, ``result``).
        targets: (device array, first set's host array, second set's host array) for every input.
        check: the family's check of one result against a reference.
        ref_a, ref_b: the two sets' references (host).
        flush: flush the L2 before each launch.

    Returns:
        ``second_set`` (``ran``), ``answers_differ``, ``wrong`` (None, or the first wrong launch: ``set``,
        ``launch``, ``what``), ``fresh_ms``, ``repeat_ms`` (every sample), ``idle_after_stop_ms``.
    """
    fresh: list[float] = []
    repeat: list[float] = []
    idle: list[float] = []
    wrong: dict[str, Any] | None = None
    with heartbeat.host_work():
        differ = not same_bytes(np.asarray(ref_a), np.asarray(ref_b)) if isinstance(ref_a, np.ndarray) else True
    try:
        for r in range(ROUNDS):
            second = r % 2 == 0
            for arr, host_a, host_b in targets:
                arr.upload(host_b if second else host_a)
            dev.synchronize()
            ref = ref_b if second else ref_a
            for k in range(REPEATS):
                case.reset()
                if flush:
                    dev.flush_l2()
                t = dev.time_ms(case.run)
                t0 = time.perf_counter()
                dev.synchronize()
                idle.append((time.perf_counter() - t0) * 1e3)
                (fresh if k == 0 else repeat).append(float(t.ms))
                if wrong is None and (k == 0 or k == REPEATS - 1):
                    with heartbeat.host_work():
                        chk = check(case.result(), ref)
                    if not chk.ok:
                        what = f"{chk.what} {chk.max_error:.3g} > {chk.tolerance:.3g}{chk.detail}"
                        wrong = {"set": "second" if second else "first", "launch": r * REPEATS + k + 1,
                                 "what": what}
    finally:
        for arr, host_a, _ in targets:  # the first set back: whatever runs next sees the point's own inputs
            try:
                arr.upload(host_a)
            except Exception:  # a context the kernel broke: the error that broke it is what the row reports
                break
    return {"second_set": "ran", "answers_differ": bool(differ), "wrong": wrong, "fresh_ms": fresh,
            "repeat_ms": repeat, "idle_after_stop_ms": idle}


def attach(row: Any, run: Any, ctx: Any, case: Any) -> Any:
    """``row`` with the probe's figures in ``extra["judge"]`` (``second_set``: why not, when it could not run).

    Args:
        row: the passed, timed row.
        run: the :class:`~cudalab.worker.executor.FamilyRun` (its inputs, reference, family, device).
        ctx: the run's context: the device copies of the inputs are found there.
        case: the row's case.

    Raises:
        GpuError: the kernel failed on the second set (the caller's row becomes ``failed``).
    """
    from dataclasses import replace  # noqa: PLC0415

    from cudalab.errors import GpuError  # noqa: PLC0415

    fam, problem = run.family, run.problem
    try:
        if run.second is None:  # once per point: every kernel row of the point is probed on the same set
            with heartbeat.host_work():
                b = second_inputs(run.inputs, lambda rng: fam.make_inputs(problem, rng), run.req.seed)
                run.second = (b, fam.reference(problem, b))
        b, ref_b = run.second
        targets = [(arr, host, b[name]) for name, host in run.inputs.items() if name in b
                   for arr in ctx.uploads_of(host)]
        # Refilling only some of what the kernel reads would mix the sets and fault an honest kernel: every input
        # must have its device copy here, and nothing else may have been uploaded (an array derived from them).
        missing = [name for name, host in run.inputs.items() if not ctx.uploads_of(host)]
        derived = ctx.uploaded_ids() - {id(h) for h in run.inputs.values()}
        if missing or derived or not targets:
            why = (f"input {missing[0]!r} has no device copy to refill" if missing else
                   "the family uploads arrays derived from its inputs" if derived else "no input on the device")
            fig: dict[str, Any] = {"second_set": f"not run: {why}"}
        else:
            fig = probe(run.device, case, targets, lambda out, ref: fam.check(problem, out, ref), run.reference,
                        ref_b, run.req.protocol.flush_l2)
    except (GpuError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a family that cannot draw a second set: the row stands, the JSON says why
        fig = {"second_set": f"not run: {type(exc).__name__}: {exc}"}
    return replace(row, extra=dict(row.extra, judge=fig))
