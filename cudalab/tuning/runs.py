"""The one door from a tuning campaign into cudalab's run machinery (everything tune runs goes here).

A trial is an ordinary family run point: a :class:`~cudalab.plan.RunRequest`, planned once
(:class:`~cudalab.plan.Plan`), then built, verified and timed by a GPU worker under its engine's watchdog (a crash
or a hang is one ``failed`` or ``timeout`` row, and a fresh worker goes on). One executor lives for the whole
campaign (:func:`cudalab.execute.open_campaign`: this host's GPU or a Dask cluster, chosen there and nowhere else):
its workers open their GPU once and stay open between trials (no process or CUDA context per trial).
"""

from __future__ import annotations

from typing import Any, Sequence

from cudalab import execute
from cudalab import plan as planning
from cudalab.execute.executor import Executor
from cudalab.execute.point import Point
from cudalab.plan import Plan, RunRequest
from cudalab.tuning.buildpool import BuildPool, build_of, default_workers
from cudalab.tuning.options import TuneOptions

__all__ = ["Runs", "precheck", "runs_for"]


def precheck(req: RunRequest) -> Plan:
    """Plan a trial's point: refuse on the CPU what its launch rules refuse (no build, no GPU).

    Raises:
        UsageError, LaunchConfigError: the reason.
    """
    return planning.precheck(req, check_signatures=False)  # the worker checks an --add kernel's before its launch


class Runs:
    """A campaign's trials on its executor: each request planned once, sent as tasks, handed back as they finish.

    Attributes:
        executor: where they run (its facts, slots, builds ahead, time in the workers: the loop asks it).
    """

    def __init__(self, executor: Executor):
        self.executor = executor
        self._plans: dict[RunRequest, Plan] = {}  # a raced point runs again; it is not planned again

    def start(self) -> "Runs":
        """Start the workers (they open their GPUs while the campaign plans)."""
        self.executor.start()
        return self

    def ready(self) -> None:
        """Wait until the GPUs are open, all of one model (the campaign's file is written only then).

        Raises:
            CudalabError: no GPU could be opened, a cluster that does not answer or mixes models.
        """
        self.executor.ready(one_model=True)

    def plan(self, point: RunRequest | Plan) -> Plan:
        """The point's one plan (a request is planned the first time it is run).

        Raises:
            UsageError, LaunchConfigError: the request's rules refuse it.
        """
        if isinstance(point, Plan):
            self._plans.setdefault(point.request, point)
            return point
        if point not in self._plans:
            self._plans[point] = precheck(point)
        return self._plans[point]

    def prebuild(self, point: RunRequest | Plan) -> None:
        """Start the point's build ahead of its turn (:meth:`Executor.prebuild`)."""
        self.executor.prebuild(self.plan(point))

    def built(self, point: RunRequest | Plan) -> bool:
        """Whether the point's build ahead has finished (:meth:`Executor.built`)."""
        return self.executor.built(self.plan(point))

    def submit(self, points: Sequence[RunRequest | Plan]) -> Any:
        """Send these points as one task, back to back on one GPU worker; its handle (:meth:`next_done`)."""
        return self.executor.send([self.plan(p) for p in points])

    def next_done(self, timeout: float | None = None) -> tuple[Any, list[Point] | BaseException] | None:
        """The next task to finish; None when ``timeout`` seconds passed first (:meth:`Executor.next_done`)."""
        return self.executor.next_done(timeout)

    def cancel(self, handles: Sequence[Any]) -> None:
        """Stop these tasks (Ctrl-C: what finished is kept)."""
        self.executor.cancel_tasks(list(handles))

    def run(self, points: Sequence[RunRequest | Plan]) -> tuple[list[Point], bool]:
        """Run these points in order on one GPU worker (a racing round: its contenders paired on one GPU); returns
        them with their rows and whether an interrupt (Ctrl-C, SIGTERM) cut them short. The workers stay up for the
        next call; after an interrupt the next call starts fresh ones. Nothing else may be in flight.

        Raises:
            CudalabError: as :meth:`Executor.next_done` (no GPU, the scheduler gone).
        """
        handle = self.submit(points)
        try:
            got, res = self.next_done()
        except KeyboardInterrupt:
            self.cancel([handle])
            return [], True
        assert got is handle, "a run while other tasks are in flight"
        if isinstance(res, BaseException):  # the engine gave up on it: no rows
            return [], False
        return res, False

    def info(self) -> dict[str, Any]:
        """The GPU's facts (a run record's ``device``)."""
        return self.executor.info()

    def close(self) -> None:
        """End the workers politely."""
        self.executor.close()

    def kill(self) -> None:
        """End the workers now."""
        self.executor.cancel()


def runs_for(opts: TuneOptions) -> Runs:
    """The campaign's GPU workers, on the engine its options ask for (:func:`cudalab.execute.open_campaign`).

    Raises:
        UsageError: a bad ``--cluster`` or ``--devices``.
    """
    ahead = opts.build_ahead

    def pool() -> BuildPool:  # this host's build threads, when its engine builds here
        return BuildPool(ahead if ahead is not None else default_workers())

    workers = execute.Workers(device=opts.device, devices=opts.devices, cluster=opts.cluster, timeout=opts.timeout,
                              energy="energy" in opts.objectives)
    return Runs(execute.open_campaign(workers, ahead, pool, build_of))
