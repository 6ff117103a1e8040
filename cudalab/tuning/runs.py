"""The one door from a tuning campaign into cudalab's run machinery (everything tune runs goes here).

A trial is an ordinary family run point: a :class:`~cudalab.plan.RunRequest`, planned once
(:class:`~cudalab.plan.Plan`), then built, verified and timed by a GPU worker under the session's watchdog (a crash or a hang is one ``failed`` or
``timeout`` row, and a fresh worker goes on). One session lives for the whole campaign: its workers
open their GPU once and stay open between trials (no process or CUDA context per trial).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Sequence

from cudalab import plan as planning
from cudalab.plan import Plan, RunRequest
from cudalab.progress import Observer
from cudalab.records.results import Result
from cudalab.execute.local.drive import Session
from cudalab.execute.point import Point
from cudalab.tuning.options import TuneOptions

__all__ = ["Runs", "ClusterRuns", "precheck", "runs_for"]


def precheck(req: RunRequest) -> Plan:
    """Plan a trial's point: refuse on the CPU what its launch rules refuse (no build, no GPU).

    Raises:
        UsageError, LaunchConfigError: the reason.
    """
    return planning.precheck(req, check_signatures=False)  # the worker checks an --add kernel's before its launch


class _Rows(Observer):
    """Passes every row to a callback as it arrives."""

    def __init__(self) -> None:
        self.on_row: Callable[[Result], None] = lambda r: None  # this batch's (set by :meth:`Runs.run`)

    def result(self, r: Result) -> None:
        self.on_row(r)


class Runs:
    """A long-lived session of GPU workers for one campaign.

    Args:
        devices: GPU indices (one worker each).
        timeout: the watchdog's limit (None: derived from the rows).
        energy: the workers read NVML's energy counter (``--objective energy``).
    """

    def __init__(self, devices: Sequence[int] = (0,), timeout: float | None = None, energy: bool = False):
        self._rows = _Rows()
        self.session = Session(list(devices), observer=self._rows, timeout=timeout, energy=energy, keep_workers=True)
        self._plans: dict[RunRequest, Plan] = {}  # a raced point runs again; it is not planned again

    def start(self) -> "Runs":
        """Start the workers (they open their GPUs while the campaign plans)."""
        self.session.start()
        return self

    def ready(self) -> None:
        """Wait until the first worker has opened its GPU (the campaign's file is written only then).

        Raises:
            WorkerError: it could not open its GPU.
        """
        self.session.count()

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

    def run(self, points: Sequence[RunRequest | Plan],
            on_row: Callable[[Result], None] | None = None) -> tuple[list[Point], bool]:
        """Run these points in order (one GPU: one after the other); returns them with their rows and whether
        an interrupt (Ctrl-C, SIGTERM) cut them short. The workers stay up for the next call; after an
        interrupt the next call starts fresh ones.

        Raises:
            WorkerError: no worker could open its GPU.
        """
        s = self.session
        self._rows.on_row = on_row or (lambda r: None)
        runs, incomplete = s.run([self.plan(p) for p in points], 0)
        interrupted = s.stopping.is_set()
        if interrupted:  # the session killed its workers; the campaign may still race what it has
            s.stopping.clear()
        return runs, interrupted

    def arch(self) -> str | None:
        """The first GPU's architecture (``sm_90``) once its worker has opened it, else None."""
        for slot in self.session.slots:
            cc = str((slot.info or {}).get("compute_capability", ""))
            if cc:
                return "sm_" + cc.replace(".", "")
        return None

    def info(self) -> dict[str, Any]:
        """The GPU's facts (a run record's ``device``)."""
        return self.session.info()

    def worker_pids(self) -> set[int]:
        """The process ids of the workers now (NVML finds their GPU by them: :func:`cudalab.instruments.busy.gpu_of`)."""
        return {int(w.pid) for w in (s.worker for s in list(self.session.slots)) if getattr(w, "pid", None)}

    def close(self) -> None:
        """End the workers politely."""
        self.session.close()

    def kill(self) -> None:
        """End the workers now."""
        self.session.kill()


class ClusterRuns(Runs):
    """The same door onto a Dask cluster (``--cluster``): trials go out as plans, several at once, one per GPU
    worker; a racing round runs as one task, so its contenders are paired on one GPU.

    Args:
        address: ``local`` or a scheduler's address.
        devices: the GPUs of a ``local`` cluster (one Dask worker each).
        timeout, energy: as :class:`Runs`.
    """

    concurrent = True

    def __init__(self, address: str, devices: Sequence[int] = (0,), timeout: float | None = None,
                 energy: bool = False, build_ahead: int | None = None):
        self.address, self.devices, self.timeout, self.energy = address, list(devices), timeout, energy
        self.build_ahead = build_ahead  # --build-ahead: at most this many prebuilds at once (0: none; None: all)
        self.cluster: Any = None
        self._plans = {}
        self._last: dict[str, Any] = {}
        self._done: Any = None  # the trials in flight (a cluster.Completions)
        self._flying: dict[Any, list[Plan]] = {}  # future -> its plans
        self._builds: dict[Any, list[Any]] = {}  # a task's future -> its prebuilds' (dropped when it ends)
        self._early: dict[RunRequest, Any] = {}  # a trial asked, not yet submitted -> its prebuild's future
        self.worker_seconds = 0.0  # the finished trials' own seconds in their GPU workers
        self._freed: deque = deque()  # Dask addresses of workers that just finished a trial
        self._turn = 0  # round robin over the workers while none has finished yet

    def start(self) -> "ClusterRuns":
        """Connect and check the cluster: its GPU workers open their GPUs (warm once), all of one model.

        Raises:
            ClusterError: no answer, no GPU worker, another cudalab or CUDA, mixed GPU models.
        """
        from cudalab.execute.dask.cluster import Cluster, Completions  # noqa: PLC0415  (Dask: only with --cluster)

        self.cluster = Cluster.open(self.address, self.devices, self.energy)
        self._done = Completions(self.cluster)
        try:
            self.cluster.one_model()
        except BaseException:
            self.cluster.close()
            raise
        return self

    def ready(self) -> None:
        """Nothing to wait for: :meth:`start` checked the cluster's GPU workers."""

    def slots(self) -> int:
        """How many GPU workers there are."""
        return len(self.cluster.workers)

    def describe(self) -> str:
        """The cluster in words (GPU models, hosts, dashboard)."""
        return self.cluster.describe()

    def ahead(self) -> int:
        """How many trials' builds run ahead of the GPUs: the GPU workers' build threads (``BUILD``), at most
        ``--build-ahead``; 0: none."""
        threads = sum(w.builds for w in self.cluster.workers if w.arch)
        return threads if self.build_ahead is None else min(threads, self.build_ahead)

    def prebuild(self, point: RunRequest | Plan) -> None:
        """Start a trial's build on a GPU worker's host now, trials ahead of its turn (:meth:`submit` ties it to
        the trial); nothing when no worker builds."""
        plan = self.plan(point)
        if self.ahead() and plan.request not in self._early:
            worker = self._builder()
            if worker is not None:
                self._early[plan.request] = self.cluster.prebuild(plan, worker)

    def submit(self, points: Sequence[RunRequest | Plan]) -> Any:
        """Send trials to the cluster as one task (run back to back on one GPU worker); its future
        (:meth:`next_done` hands it back)."""
        plans = [self.plan(p) for p in points]
        fut = self.cluster.submit(plans, self.energy, self.timeout)
        self._flying[fut] = plans
        self._done.add(fut)
        for plan in plans:
            self.prebuild(plan)  # its kernels built on a worker's host, unless they were when it was asked
        builds = [b for b in (self._early.pop(p.request, None) for p in plans) if b is not None]
        if builds:
            self._builds[fut] = builds
        return fut

    def _builder(self) -> Any:
        """The GPU worker whose host builds the next trial ahead (None: no prebuild).

        Dask sends a trial to the GPU worker with the least work, which is the one that just finished a trial
        (the driver submits the next one at that moment), so its host is where the build is wanted. A guess:
        when the trial runs elsewhere the build is wasted, never wrong (the cache key holds the source, the
        defines, the arch and nvcc's version), and that trial's worker builds for itself as without a prebuild.
        """
        workers = {w.address: w for w in self.cluster.workers}
        w = None
        while self._freed and w is None:
            w = workers.get(self._freed.popleft())
        if w is None:  # the first trials (or the one that finished ran on a worker not checked): take turns
            w = self.cluster.workers[self._turn % len(self.cluster.workers)]
            self._turn += 1
        return w if w.builds and w.arch else None

    def next_done(self) -> tuple[Any, list[Point] | BaseException]:
        """The next submitted task to finish: its future and its trials' points (fewer than it was sent when an
        interrupt cut it short), or what it ended with.

        Raises:
            ClusterLost: the scheduler went away.
        """
        fut, res = self._done.next()
        plans = self._flying.pop(fut)
        self._builds.pop(fut, None)  # its trials ended: a build still queued is of no use (Dask forgets it)
        if isinstance(res, BaseException):
            return fut, res
        self._last = res["where"]
        self.worker_seconds += float(res.get("seconds") or 0.0)
        if res["where"].get("worker"):
            self._freed.append(res["where"]["worker"])
        return fut, [Point.from_data(p, d, res["where"]) for p, d in zip(plans, res["points"])]

    def cancel(self, futures: Any) -> None:
        """Cancel the trials in flight (Ctrl-C: what finished is kept)."""
        futures = list(futures)
        self._done.drop(futures)
        builds = [b for f in futures for b in self._builds.pop(f, [])]
        builds += list(self._early.values())  # the trials asked but not sent: their builds are of no use now
        self._early.clear()
        for f in futures:
            self._flying.pop(f, None)
        self.cluster.cancel(futures + builds)

    def run(self, points: Sequence[RunRequest | Plan],
            on_row: Callable[[Result], None] | None = None) -> tuple[list[Point], bool]:
        """Run these points back to back on one GPU worker (a racing round); returns them and whether an
        interrupt cut them short.

        Raises:
            ClusterLost: the scheduler went away.
        """
        plans = [self.plan(p) for p in points]
        fut = self.cluster.submit(plans, self.energy, self.timeout)
        try:
            _, res = next(self.cluster.completed([fut]))
        except KeyboardInterrupt:
            self.cluster.cancel([fut])
            return [], True
        if isinstance(res, BaseException):
            return [], False
        self._last = res["where"]
        self.worker_seconds += float(res.get("seconds") or 0.0)
        pts = [Point.from_data(p, d, res["where"]) for p, d in zip(plans, res["points"])]
        for row in (row for pt in pts for row in pt.results):
            (on_row or (lambda r: None))(row)
        return pts, False

    def arch(self) -> str | None:
        """None: the builds ahead happen on the workers' hosts (:meth:`submit`), none on the driver's."""
        return None

    def info(self) -> dict[str, Any]:
        """The first GPU worker's facts, every worker's under ``devices`` (a run record's ``device``)."""
        if self.cluster is None or not self.cluster.workers:
            return {}
        return self.cluster.facts()

    def close(self) -> None:
        """Disconnect (a local cluster ends its workers)."""
        if self.cluster is not None:
            self.cluster.close()

    def kill(self) -> None:
        """As :meth:`close`: the cluster's workers end their GPU workers themselves."""
        self.close()


def runs_for(opts: TuneOptions) -> Runs:
    """The campaign's GPU workers: this host's (``--device``) or a Dask cluster's (``--cluster``)."""
    energy = "energy" in opts.objectives
    if opts.cluster is None:
        return Runs([opts.device], timeout=opts.timeout, energy=energy)
    from cudalab.execute.local.devices import parse_devices  # noqa: PLC0415
    from cudalab.execute.local.process import visible_gpus  # noqa: PLC0415

    devices = parse_devices(opts.devices, opts.device)
    if devices is None:  # --devices all: every GPU NVML or CUDA_VISIBLE_DEVICES counts
        devices = list(range(visible_gpus() or 1))
    return ClusterRuns(opts.cluster, devices, timeout=opts.timeout, energy=energy, build_ahead=opts.build_ahead)
