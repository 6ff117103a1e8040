"""The local engine: this host's GPU workers (:class:`~cudalab.execute.local.drive.Session`) as an
:class:`~cudalab.execute.executor.Executor`, with what only a local run does: ``--exclusive`` and
``--lock-clocks`` asked of NVML in this process before any worker computes, a campaign's tasks run one after
the other by a thread of their own (the parent records and asks meanwhile), their builds ahead on this host's
cores, and the GPU's busy % read here."""

from __future__ import annotations

import queue
import sys
import time
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import Any, Callable, Sequence

from cudalab.execute import timeline
from cudalab.execute.executor import Executor
from cudalab.execute.hostbuilds import HostBuilds
from cudalab.execute.local.drive import Session
from cudalab.instruments.busy import BusyMeter, gpu_of
from cudalab.plan import Plan, RunRequest
from cudalab.progress import Observer
from cudalab.execute.point import Point

__all__ = ["LocalPool", "open_telemetry"]

#: How often the parent wakes while it waits for a task (seconds): Ctrl-C is seen between waits.
TICK_S = 0.05
#: How long a cancelled task's thread may take to hand back its worker (its session drains for DRAIN_S).
CANCEL_S = 5.0


class LocalPool(Executor):
    """One isolated GPU worker per GPU of this host (``devices``; None: every GPU the first worker sees).

    Args:
        devices, timeout, energy, observer, on_ready, on_change: as :class:`Session`'s.
        nvml_first: ``--exclusive`` or ``--lock-clocks``: no worker starts before NVML was asked (a worker of
            ours must not count as another process on the GPU, and a killed one must not leave a clock locked).
        session: a session made already (a test's, with fake workers).
        builds: makes this host's build threads for a campaign's builds ahead (``workers``, ``submit(job)`` ->
            a future or None, ``queued()``, ``close()``: :class:`cudalab.tuning.buildpool.BuildPool`); called the
            first time a build is asked for. None: no builds ahead.
        build_of: the build a plan's request needs on a GPU of an architecture, as a call (``(request, arch)``).
    """

    def __init__(self, devices: Sequence[int] | None = (0,), timeout: float | None = None, energy: bool = False,
                 observer: Observer | None = None, on_ready: Callable[[dict[str, Any]], None] | None = None,
                 on_change: Callable[[list[Point]], None] | None = None, nvml_first: bool = False,
                 session: Session | None = None, builds: Callable[[], Any] | None = None,
                 build_of: Callable[[RunRequest, str], Callable[[], None]] | None = None):
        self.session = session or Session(None if devices is None else list(devices), observer=observer,
                                          timeout=timeout, energy=energy, on_ready=on_ready, on_change=on_change)
        self.nvml_first = nvml_first
        self._tele: Any = None  # NVML, opened by submit for --exclusive or --lock-clocks
        self._locked: int | None = None  # the clock it locked (read before it is restored)
        self._swept = False  # submit ran (a sweep's record says why it has no telemetry)
        # a campaign's tasks: one thread runs them in order on the session (one task on the GPU at a time)
        self._runner: ThreadPoolExecutor | None = None
        self._tasks: dict[Future, list[Plan]] = {}  # in flight
        self._done: queue.Queue = queue.Queue()  # finished, in the order they finished
        self._here = HostBuilds(builds, build_of) if builds is not None and build_of is not None else None
        self._sent = False  # a task was sent (its builds ahead are no longer the GPU's first wait)
        self._in_workers = 0.0
        self._waited = 0.0

    def start(self) -> None:
        if not self.nvml_first:
            self.session.start()

    def submit(self, plans: Sequence[Plan], total: int) -> None:
        if plans and (plans[0].request.exclusive or plans[0].request.lock_clocks is not None):
            self._tele = open_telemetry(plans[0].request)
        self._swept = True
        self.session.start()  # a session started already starts nothing more
        self.session.submit(plans, total)

    def wait(self) -> tuple[list[Point], bool]:
        runs, incomplete = self.session.wait()
        if self.session.fatal is not None:  # a GPU that could not be used; the others ran its points
            print(f"warning: {self.session.fatal}", file=sys.stderr)
        return runs, incomplete

    def cancel(self) -> None:
        self.stop_builds()
        for fut in list(self._tasks):
            fut.cancel()
        self._tasks.clear()
        self.session.kill()
        self._release()

    def close(self) -> None:
        self.stop_builds()
        self.session.close()
        self._release()
        if self._runner is not None:
            self._runner.shutdown(wait=False, cancel_futures=True)

    def _release(self) -> None:
        if self._tele is not None and self._tele.telemetry is not None:
            self._locked = self._tele.telemetry.locked_mhz
            self._tele.telemetry.close()  # restores a locked clock

    def info(self) -> dict[str, Any]:
        info = self.session.info()
        tele = self._tele
        if "telemetry" not in info and self._swept:
            info["telemetry"] = {"note": tele.note if tele is not None else "telemetry off: no worker reported it"}
        if self._locked is not None:  # the lock is the parent's; the workers' summaries do not know of it
            info["telemetry"] = dict(info["telemetry"], locked_sm_mhz=self._locked)
        return info

    # --- a campaign's tasks ----------------------------------------------------------------------------------
    def ready(self, one_model: bool = False) -> None:
        """Wait until the first worker has opened its GPU (one GPU: one model).

        Raises:
            WorkerError: it could not open its GPU.
        """
        self.session.start()
        self.session.count()

    def slots(self) -> int:
        """One: a task's points are spread over this host's GPUs by the session, one task after the other."""
        return 1

    def send(self, plans: Sequence[Plan]) -> Any:
        self.session.keep_workers = True  # the workers stay open from one task to the next
        self._sent = True
        if self._runner is None:
            self._runner = ThreadPoolExecutor(1, thread_name_prefix="tune-trial")
        plans = list(plans)
        builds = [b for b in (self._here.take(p.request) for p in plans) if b is not None] if self._here else []
        fut = self._runner.submit(self._task, plans, builds)
        self._tasks[fut] = plans
        fut.add_done_callback(self._done.put)
        return fut

    def _task(self, plans: list[Plan], builds: list[Future]) -> list[Point]:
        """One task, on the runner's thread: wait for its builds ahead, then run its points on the session."""
        reqs = [p.request for p in plans]
        timeline.mark("task-wait", *reqs)
        t0 = time.monotonic()
        for b in builds:
            try:
                b.result()
            except CancelledError:  # dropped by stop_builds: its worker builds it
                pass
        t1 = time.monotonic()
        self._waited += t1 - t0
        timeline.mark("task-run", *reqs)
        runs, _ = self.session.run(plans, 0)
        self._in_workers += time.monotonic() - t1
        timeline.mark("task-end", *reqs)
        return runs

    def next_done(self, timeout: float | None = None) -> tuple[Any, list[Point] | BaseException] | None:
        """As :meth:`Executor.next_done`; a task that raised (no worker could open its GPU) raises it here."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            if not self._tasks:
                raise LookupError("no task in flight")  # waiting would never end
            try:
                fut = self._done.get(timeout=TICK_S if end is None else max(0.0, min(TICK_S, end - time.monotonic())))
            except queue.Empty:
                if end is not None and time.monotonic() >= end:
                    return None
                continue
            if self._tasks.pop(fut, None) is None or fut.cancelled():  # cancelled by the caller
                continue
            exc = fut.exception()
            if exc is not None:
                raise exc
            return fut, fut.result()

    def cancel_tasks(self, handles: Sequence[Any]) -> None:
        """Cancel the tasks not started; a running one's workers are killed (its thread returns what finished),
        and the next task starts fresh ones."""
        running = [f for f in handles if not f.cancel() and not f.done()]  # a finished one keeps its worker
        for f in handles:
            self._tasks.pop(f, None)
        if not running:
            return
        self.session.kill()
        deadline = time.monotonic() + CANCEL_S
        for f in running:
            try:
                f.exception(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001  (a timeout: the session's threads end with its workers)
                pass
        self.session.stopping.clear()  # the workers are gone; the next task's are fresh

    def ahead(self) -> int:
        """This host's build threads (0: none)."""
        return self._here.threads() if self._here is not None else 0

    def prebuild(self, plan: Plan) -> None:
        """On this host's build threads, for the GPU's architecture once its worker has opened it."""
        if self._here is not None:
            # the first build asked for before any task was sent is the one its GPU waits for first: urgent
            self._here.submit(plan.request, self._arch(), urgent=not self._here.asked() and not self._sent)

    def _arch(self) -> str | None:
        """The first GPU's architecture (``sm_90``) once its worker has opened it; before, this host's
        (:meth:`HostBuilds.arch_here`: the first trials are built while the worker opens); else None."""
        for slot in self.session.slots:
            cc = str((slot.info or {}).get("compute_capability", ""))
            if cc:
                return "sm_" + cc.replace(".", "")
        return self._here.arch_here() if self._here is not None else None

    def built(self, plan: Plan) -> bool:
        return self._here is None or self._here.built(plan.request)

    def builds_queued(self) -> int:
        return self._here.queued() if self._here is not None else 0

    def stop_builds(self) -> None:
        """Drop the builds not started; running ones finish in their threads (their results are cached)."""
        if self._here is not None:
            self._here.stop()

    def in_workers(self) -> float:
        return self._in_workers

    def waited_builds(self) -> float:
        return self._waited

    def batch(self, trial_s: float) -> int:
        """One: a task costs nothing of its own here (no scheduler), and one a task is recorded as it ends."""
        return 1

    def describe(self) -> str:
        return ""

    def busy_meter(self) -> BusyMeter:
        """NVML's utilization of the GPU the workers run on (found by their process ids)."""
        return BusyMeter(lambda: gpu_of(self._pids)).start()

    def _pids(self) -> set[int]:
        """The process ids of the workers now (NVML finds their GPU by them)."""
        return {int(w.pid) for w in (s.worker for s in list(self.session.slots)) if getattr(w, "pid", None)}


def open_telemetry(req: RunRequest) -> Any:
    """NVML for the request's GPU (:func:`cudalab.instruments.telemetry.open_telemetry`), or a note why not.

    Raises:
        TelemetryError: ``--exclusive`` with another process on the GPU, or ``--lock-clocks`` refused.
    """
    from cudalab.execute.local.process import pci_bus_id  # noqa: PLC0415  (NVML's name for the GPU: likewise)
    from cudalab.instruments import telemetry  # noqa: PLC0415  (NVML only for --exclusive and --lock-clocks)

    return telemetry.open_telemetry(req.device, pci_bus_id(req.device), exclusive=req.exclusive,
                                    lock_mhz=req.lock_clocks, energy=req.protocol.energy_s > 0)
