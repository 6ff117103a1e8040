"""Running points on GPU workers: one worker per GPU, a watchdog, a fresh worker after a fault.

The parent process holds no CUDA context. Each point was planned once on the CPU (a
:class:`~cudalab.plan.Plan`: the variants, the problem, the roofline rule); the session sends the plan to a
worker (:mod:`cudalab.worker.protocol`) and gathers the rows as they arrive (a
:class:`~cudalab.execute.point.Point` each). When a worker dies (a
sticky CUDA error, a crash), or the watchdog kills it (a kernel that does not finish within the
run's limit), the variant it was running becomes one ``failed`` or ``timeout`` row, a fresh worker
continues with the variants left, and the roofline follows as if nothing had happened. A roofline
that cannot be measured leaves the rows standing and says why.

With several GPUs (``--devices``) each has its worker and a thread that drives it; points go to
whichever GPU is free next, each point timed alone on its GPU.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Sequence

from cudalab.errors import CudalabError
from cudalab.plan import Plan
from cudalab.progress import Observer
from cudalab.records.results import FAILED, PASSED, SKIPPED, TIMEOUT, Result, Roofline, Status
from cudalab.execute.local import process as W
from cudalab.execute.point import Point
from cudalab.execute.local.slot import Slot, WorkerError, every_gpu, facts
from cudalab.worker.protocol import unpack_array

#: The watchdog's least limit (seconds) for one kernel launch to finish.
MIN_TIMEOUT_S = 10.0
#: ... and its multiple of the slowest row that passed so far.
SLOWEST_FACTOR = 100.0
#: How often the parent wakes while it waits for a worker (seconds): signals and the watchdog.
TICK_S = 0.05
#: Fresh workers one point may use before its remaining rows are given up.
MAX_RESTARTS = 8
#: How long a stopped worker's last events may take to arrive (it was killed: its pipe ends at once).
DRAIN_S = 1.0


class Session:
    """The GPU side of one run, as the parent sees it.

    Args:
        devices: GPU indices, one worker each; None: every GPU the first worker sees (``--devices all``).
        observer: progress (points, stages, rows).
        timeout: the watchdog's limit in seconds (None: the larger of :data:`MIN_TIMEOUT_S` and
            :data:`SLOWEST_FACTOR` times the slowest passed row).
        energy: ``--energy`` (workers need NVML).
        on_change: called (under the session's lock) with the points started so far after every row and
            roofline: the CLI saves then.
        on_ready: called with a GPU's facts as its first worker opens it.
        spawn: starts a worker (tests pass fakes).
        keep_workers: keep the workers up after :meth:`run` (a tuning campaign's batches); :meth:`close` ends them.
    """

    def __init__(self, devices: Sequence[int] | None = (0,), observer: Observer | None = None, timeout: float | None = None,
                 energy: bool = False, on_change: Callable[[list[Point]], None] | None = None,
                 on_ready: Callable[[dict[str, Any]], None] | None = None, spawn: W.Spawn | None = None,
                 keep_workers: bool = False):
        self._spawn, self._energy = spawn or W.spawn, energy
        self.all_devices = devices is None
        self.slots = [Slot(d, self._spawn, energy) for d in (devices or [0])]
        self.observer = observer or Observer()
        self.timeout = timeout
        self.on_change = on_change or (lambda points: None)
        self.on_ready = on_ready or (lambda info: None)
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)  # a point was given back or finished
        self._busy = 0  # points a GPU holds now: one may come back (its worker could not open its GPU)
        self.stopping = threading.Event()
        self.fatal: CudalabError | None = None
        self.runs: list[Point] = []
        self._slowest_ms = 0.0
        self._queue: list[Point] = []
        self._failed: set[int] = set()  # GPUs whose worker could not open them
        self._roofs: dict[tuple[int, int], Roofline] = {}
        self._ended: list[threading.Event] = []
        self.keep_workers = keep_workers  # a tuning campaign runs many batches on the same workers: close() ends them

    # --- life ----------------------------------------------------------------------------------
    def start(self) -> "Session":
        """Start every worker (call early: they open their GPUs while the parent plans)."""
        for s in self.slots:
            s.start()
        return self

    def close(self) -> None:
        """End every worker (politely: their telemetry comes back)."""
        for s in self.slots:
            s.close()

    def kill(self) -> None:
        """End every worker now (an interrupt: a hung kernel must not hold the run)."""
        self.stopping.set()
        for s in self.slots:
            s.drop()

    def limit_s(self) -> float:
        """The watchdog's limit now."""
        if self.timeout is not None:
            return self.timeout
        return max(MIN_TIMEOUT_S, SLOWEST_FACTOR * self._slowest_ms / 1e3)

    def info(self) -> dict[str, Any]:
        """The facts of the GPU(s) that ran (:func:`~cudalab.execute.local.slot.facts`)."""
        return facts(self.slots)

    def ask(self, device: int, **op: Any) -> dict[str, Any]:
        """One question to GPU ``device``'s worker (``info``), its answer (an event of the same name).

        Raises:
            WorkerError: the worker could not open the GPU, or died before answering.
        """
        slot = next((s for s in self.slots if s.device == device), None)
        if slot is None:
            slot = Slot(device, self._spawn, self._energy)
            self.slots.append(slot)
        w = self._ready(slot)
        w.send(**op)
        while True:
            ev = w.next(None)
            if ev is not None and ev["ev"] == op["op"]:
                return ev
            if ev is not None and ev["ev"] in ("eof", "lost"):
                how = w.exit_text(1.0)
                slot.drop()
                raise WorkerError(f"the GPU worker of GPU {device} died answering {op['op']} ({how})")

    def count(self) -> int:
        """How many GPUs the workers see (asks the first one).

        Raises:
            WorkerError: it could not open its GPU.
        """
        self._ready(self.slots[0])
        return self.slots[0].count

    # --- running -------------------------------------------------------------------------------
    def run(self, plans: Sequence[Plan], total: int = 0) -> tuple[list[Point], bool]:
        """Run every planned point: :meth:`submit`, then :meth:`wait` (raises as they do)."""
        self.submit(plans, total)
        return self.wait()

    def submit(self, plans: Sequence[Plan], total: int = 0) -> None:
        """Hand every planned point to the GPUs: each GPU's thread takes the next as it frees (``total``: rows
        in all, for the progress). Raises WorkerError: ``--devices all`` and the first GPU cannot be opened."""
        self.runs = [Point(plan) for plan in plans]
        self._queue = list(self.runs)
        if self.all_devices:
            self._all_slots()
        self.observer.start(total, plans[0].request.family if plans else "")
        self._ended = [threading.Event() for _ in self.slots]  # each drive thread's end (see the interrupt below)
        for s, e in zip(self.slots, self._ended):
            threading.Thread(target=self._drive, args=(s, e), daemon=True).start()

    def wait(self) -> tuple[list[Point], bool]:
        """Wait for the points :meth:`submit` handed over; returns (the points with their rows, incomplete). An
        interrupt (KeyboardInterrupt in the calling thread) kills the workers and returns what finished, marked
        incomplete. Raises WorkerError: no worker could open its GPU."""
        ended = self._ended
        try:
            while not all(e.wait(TICK_S) for e in ended):
                pass
        except KeyboardInterrupt:
            self.kill()
            # Events, not Thread.join: an interrupt landing in join() can leave a thread marked ended while
            # it still drains its worker's rows (CPython before 3.13), and those rows came after the table.
            deadline = time.monotonic() + DRAIN_S + 1.0
            for e in ended:
                e.wait(max(0.0, deadline - time.monotonic()))
            return self.started(), True
        finally:
            self.observer.close()
        if self.fatal is not None and not any(s.info for s in self.slots):
            raise self.fatal
        return self.started(), bool(self._queue)  # a point no GPU could take

    def _all_slots(self) -> None:
        """``--devices all``: a worker on every GPU (:func:`~cudalab.execute.local.slot.every_gpu`).

        Raises:
            WorkerError: the first GPU cannot be opened.
        """
        self.slots = every_gpu(self.slots, W.visible_gpus(), self._ready, self._spawn, self._energy)
        self.all_devices = False

    def started(self) -> list[Point]:
        """The points handed to a worker so far, in order (what a saved record holds)."""
        with self.lock:
            return [r for r in self.runs if r not in self._queue]

    def _next(self) -> tuple[int, Point] | None:
        with self.changed:
            # An empty queue is not the end while another GPU holds a point: its worker may yet fail to
            # open its GPU and give the point back (a GPU that quit here first would leave it to no one).
            while not self._queue and self._busy and not self.stopping.is_set():
                self.changed.wait(TICK_S)
            if not self._queue or self.stopping.is_set():
                return None
            run = self._queue.pop(0)
            self._busy += 1
            i = self.runs.index(run)
            self.observer.point(i, len(self.runs), run.plan.label)
            return i, run

    def _drive(self, slot: Slot, ended: threading.Event) -> None:
        try:
            while (nxt := self._next()) is not None:
                try:
                    self._point(slot, *nxt)
                except WorkerError as exc:  # this GPU cannot be used: its point goes back for the others
                    with self.lock:
                        self.fatal = self.fatal or exc
                        if not nxt[1].results:
                            self._queue.insert(0, nxt[1])
                        self._failed.add(slot.device)
                        if len(self._failed) == len(self.slots):  # no GPU left to run on
                            self.stopping.set()
                    return
                finally:  # after the point went back: a GPU waiting in _next sees it before _busy drops
                    with self.changed:
                        self._busy -= 1
                        self.changed.notify_all()
        finally:
            if not self.stopping.is_set() and not self.keep_workers:
                slot.close()
            ended.set()

    def _ready(self, slot: Slot) -> Any:
        """The slot's worker, started and ready (:meth:`Slot.wait_ready`)."""
        return slot.wait_ready(self.stopping, TICK_S)

    def _point(self, slot: Slot, index: int, run: Point) -> None:
        run.gpu = slot.device
        restarts = 0
        names = [v.name for v in run.variants]
        while True:
            remaining = [n for n in names if n not in {r.variant for r in run.results}]
            if not remaining and run.variants:
                break
            if restarts > MAX_RESTARTS:
                self._give_up(run, remaining, "the GPU worker kept dying; the rows left were not run")
                break
            plan = run.plan.with_request(device=slot.device, done=tuple(r.variant for r in run.results))
            # the worker the point went to, held here: an interrupt's kill may clear slot.worker meanwhile
            worker = slot.send_ready(self.stopping, TICK_S, op="point", id=index, plan=plan.to_dict())
            outcome = self._follow(slot, run, index, worker)
            if outcome in ("done", "refused", "stopped"):
                if outcome == "stopped":
                    return
                break
            restarts += 1
        if self.stopping.is_set():
            return
        self._roofline(slot, run, index)

    def _follow(self, slot: Slot, run: Point, index: int, w: Any) -> str:
        """Gather one point's events from worker ``w`` (the one the point was sent to, not ``slot.worker``, which
        an interrupt's kill sets to None from another thread) until it is done, or ``w`` is gone; returns how it
        ended."""
        current: dict[str, Any] | None = None
        last = time.monotonic()
        while True:
            ev = w.next(TICK_S)
            if self.stopping.is_set():
                self._drain(run, w, ev)
                return "stopped"
            now = time.monotonic()
            if ev is None:
                if current and current.get("watch") and now - last > self.limit_s():
                    self._lost(slot, run, current, TIMEOUT,
                               f"no result within {self.limit_s():.0f} s: the kernel did not finish; its worker "
                               f"was killed (--timeout SECONDS sets the limit)")
                    return "timeout"
                continue
            last = now
            kind = ev["ev"]
            if kind == "stage":
                current = ev
                if not slot.announced:  # the header comes with the first work, not for a refused point
                    slot.announced = True
                    with self.lock:
                        self.on_ready(dict(slot.info or {}))
                self.observer.stage(str(ev.get("variant", "")), str(ev.get("stage", "")))
            elif kind == "row":
                self._row(run, Result.from_dict(ev["row"]), ev.get("output"))
                current = None
            elif kind == "done":
                if missing := run.missing():  # every variant ends as a row, whatever became of it
                    self._give_up(run, missing, "the GPU worker returned no row for it")
                if ev.get("inputs"):
                    run.inputs = {k: unpack_array(v) for k, v in ev["inputs"].items()}
                return "done"
            elif kind == "refused":
                run.refused = (str(ev.get("message", "")), int(ev.get("exit_code") or 2))
                self._give_up(run, run.missing(), str(ev.get("message", "")), SKIPPED, quiet=True)
                return "refused"
            elif kind == "lost":
                slot.drop()
                return "lost"
            elif kind == "eof":
                how = w.exit_text(1.0) or "its pipe closed"
                words = w.last_words()
                self._lost(slot, run, current, FAILED, f"the GPU worker died ({how})" + (f": {words}" if words else ""))
                return "died"

    def _drain(self, run: Point, w: Any, ev: dict[str, Any] | None) -> None:
        """Keep the rows a stopped worker had already sent (an interrupt must not cost a finished row): all its
        events up to the end of its pipe (at once: it was killed), waiting up to :data:`DRAIN_S`; on a busy
        machine a row sent just before the interrupt may still be in the pipe."""
        end = time.monotonic() + DRAIN_S
        while ev is None or ev["ev"] != "eof":
            if ev is not None and ev["ev"] == "row":
                self._row(run, Result.from_dict(ev["row"]), ev.get("output"))
            if (left := end - time.monotonic()) <= 0:
                break
            ev = w.next(left)

    def _lost(self, slot: Slot, run: Point, current: dict[str, Any] | None, status: Any, why: str) -> None:
        """The worker is gone mid-point: the variant it was on becomes a row with ``status``."""
        slot.drop()
        name = str(current.get("variant", "")) if current else ""
        if name in run.missing():
            self._give_up(run, [name], why, status)
        elif name in ("", "inputs"):  # died before any variant: the rows left cannot run either
            self._give_up(run, run.missing(), why)

    def _give_up(self, run: Point, names: Sequence[str], why: str, status: Status = FAILED,
                 quiet: bool = False) -> None:
        """Rows for variants that will not run (``quiet``: kept from the progress, a refusal says it once)."""
        for row in run.not_run(names, why, status):
            self._row(run, row, quiet=quiet)

    def _row(self, run: Point, row: Result, output: str | None = None, quiet: bool = False) -> None:
        with self.lock:
            run.add(row, output)
            if row.status == PASSED and row.median_ms:
                self._slowest_ms = max(self._slowest_ms, row.median_ms)
            if not quiet:
                self.observer.result(row)
            self.on_change(self.started())

    def _roofline(self, slot: Slot, run: Point, index: int) -> None:
        """The point's roofline: its own rows (copy), one already measured on these bytes, or a new one."""
        own = run.plan.own_roofline(run.results)
        if own is not None:
            self._set_roofline(run, own, "")
            return
        if not run.plan.wants_roofline(run.results) or not any(r.status == PASSED and r.gbs for r in run.results):
            return
        key = (slot.device, run.plan.roofline_bytes())
        if key in self._roofs:
            self._set_roofline(run, self._roofs[key], "")
            return
        try:
            w = self._ready(slot)
        except WorkerError as exc:
            self._set_roofline(run, None, str(exc))
            return
        w.send(op="roofline", id=index, plan=run.plan.with_request(device=slot.device).to_dict())
        last = time.monotonic()
        while not self.stopping.is_set():
            ev = w.next(TICK_S)
            now = time.monotonic()
            if ev is None:
                if now - last > self.limit_s():
                    slot.drop()
                    self._set_roofline(run, None, f"the roofline copy did not finish within {self.limit_s():.0f} s")
                    return
                continue
            last = now
            if ev["ev"] == "roofline":
                roof = Roofline.from_dict(ev.get("roofline"))
                if roof is not None:
                    self._roofs[key] = roof
                self._set_roofline(run, roof, str(ev.get("reason") or ""))
                return
            if ev["ev"] == "lost":
                slot.drop()
                return
            if ev["ev"] == "eof":
                how = w.exit_text(1.0) or "its pipe closed"
                slot.drop()
                self._set_roofline(run, None, f"the GPU worker died measuring it ({how})")
                return

    def _set_roofline(self, run: Point, roof: Roofline | None, why: str) -> None:
        with self.lock:
            run.rate(roof, why)
            self.on_change(self.started())

