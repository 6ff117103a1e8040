"""The Dask engine (``--cluster``) as an :class:`~cudalab.execute.executor.Executor`: one task per planned
point on a Dask cluster (:class:`~cudalab.execute.dask.cluster.Cluster`), each point's rows kept the moment its
task comes back (as the Dask worker's own local engine assembled them: :meth:`Point.from_data`); a campaign's
tasks several at once, one per GPU worker, their builds ahead on the GPU workers' hosts."""

from __future__ import annotations

from collections import deque
from typing import Any, Callable, Sequence

from cudalab.execute.dask.cluster import LOCAL, Cluster, one_line
from cudalab.execute.dask.completions import Completions
from cudalab.execute.executor import Executor
from cudalab.execute.hostbuilds import HostBuilds
from cudalab.plan import Plan
from cudalab.progress import Observer
from cudalab.execute.point import Point

__all__ = ["DaskPool", "BATCH_S", "BATCH_MAX"]

#: A walk's trials go to a cluster in tasks of about this many seconds in the worker (a Dask task costs the driver,
#: the scheduler and the worker milliseconds: trials of 50 ms one a task spent a third of a GPU on it; at 0.25 s
#: and 8 a task, still 1.5 ms of a 2-core host's CPU a trial more: scripts/bench_scale.py); at most
#: :data:`BATCH_MAX` trials a task. An interrupt loses the unfinished tasks' trials (a walk runs them again on
#: resume): at most this much of each GPU's work.
BATCH_S = 0.5
BATCH_MAX = 16


class DaskPool(Executor):
    """Planned points on the Dask cluster at ``address`` (``local``: one started here on ``devices``, None: every
    GPU this host sees); ``timeout``, ``energy``, ``observer``, ``on_ready``, ``on_change`` as the local pool's.

    A point Dask gave up on comes back as failed rows, each saying why; the scheduler lost mid-run raises
    :class:`~cudalab.errors.ClusterLost` from :meth:`wait` (what finished was passed to ``on_change`` already).
    ``build_ahead``: a campaign's builds ahead at most this many at once (0: none; None: as many as the GPU
    workers' build threads). ``builds`` and ``build_of`` (as the local pool's): a local cluster's first trials
    are built on this host while the cluster starts (:meth:`prebuild`).
    """

    def __init__(self, address: str, devices: Sequence[int] | None = (0,), timeout: float | None = None,
                 energy: bool = False, observer: Observer | None = None,
                 on_ready: Callable[[dict[str, Any]], None] | None = None,
                 on_change: Callable[[list[Point]], None] | None = None, build_ahead: int | None = None,
                 builds: Callable[[], Any] | None = None,
                 build_of: Callable[[Any, str], Callable[[], None]] | None = None):
        self.address, self.devices, self.timeout, self.energy = address, devices, timeout, energy
        self.observer = observer or Observer()
        self.on_ready, self.on_change = on_ready, on_change
        self.cluster: Cluster | None = None
        self._plans: list[Plan] = []
        self._futures: dict[Any, int] = {}
        self._facts: dict[str, Any] = {}
        # a campaign's tasks
        self.build_ahead = build_ahead
        self._done: Completions | None = None  # the tasks in flight
        self._flying: dict[Any, list[Plan]] = {}  # future -> its plans
        self._builds: dict[Any, list[Any]] = {}  # a task's future -> its prebuilds' (dropped when it ends)
        self._early: dict[Any, Any] = {}  # a plan's request, not yet sent -> its prebuild's future
        self._seconds = 0.0  # the finished tasks' own seconds in their GPU workers
        self._freed: deque = deque()  # Dask addresses of workers that just finished a task
        self._turn = 0  # round robin over the workers while none has finished yet
        # --cluster local: its GPU workers run on this host and read its build cache, so its first trials are built
        # here while the cluster starts and its GPUs open (seconds), as on this host's engine; a remote cluster's
        # hosts and architectures are known only once its workers answer
        self._here = (HostBuilds(builds, build_of) if address == LOCAL and builds is not None and build_of is not None
                      else None)

    def start(self) -> None:
        """Nothing yet: the cluster is opened (and checked) with the points, in :meth:`submit`."""

    def submit(self, plans: Sequence[Plan], total: int) -> None:
        """Open and check the cluster, then one task per point.

        Raises:
            ClusterError: as :meth:`Cluster.open`.
        """
        self._open()
        assert self.cluster is not None
        self._plans = list(plans)
        self.observer.start(total, plans[0].request.family if plans else "")
        self._futures = {self.cluster.submit([p], self.energy, self.timeout): i for i, p in enumerate(plans)}

    def _open(self) -> None:
        """Connect and check the cluster (once). Raises ClusterError: as :meth:`Cluster.open`."""
        from cudalab.execute.local.process import visible_gpus  # noqa: PLC0415  (a local cluster's GPUs)

        if self.cluster is None:
            gpus = list(range(visible_gpus() or 1)) if self.devices is None else list(self.devices)
            self.cluster = Cluster.open(self.address, gpus, self.energy)

    def wait(self) -> tuple[list[Point], bool]:
        assert self.cluster is not None, "submit first"
        done: dict[int, Point] = {}
        announced = False
        try:
            for fut, res in self.cluster.completed(self._futures):
                i = self._futures[fut]
                plan = self._plans[i]
                if isinstance(res, BaseException):  # Dask gave up on it: every row of the point failed, with why
                    pt = Point(plan)
                    pt.results = pt.not_run(pt.missing(), f"the cluster could not run it: {type(res).__name__}: "
                                                           f"{one_line(res)}")
                else:
                    pt = Point.from_data(plan, res["points"][0], res["where"])
                    if not announced and self.on_ready is not None:
                        self.on_ready(dict(res["where"]["info"]))
                        announced = True
                done[i] = pt
                for row in pt.results:
                    self.observer.result(row)
                if self.on_change is not None:
                    self.on_change([done[k] for k in sorted(done)])
            incomplete = False
        except KeyboardInterrupt:
            self.cluster.cancel(self._futures)
            incomplete = True
        finally:
            self.observer.close()
        return [done[k] for k in sorted(done)], incomplete

    def cancel(self) -> None:
        if self.cluster is not None:
            self.cluster.cancel([*self._futures, *self._flying])
        self.close()

    def close(self) -> None:
        if self._here is not None:  # the builds not started are dropped
            self._here.stop()
        if self.cluster is not None:
            self._facts = self.cluster.facts()
            self.cluster.close()
            self.cluster = None

    def info(self) -> dict[str, Any]:
        """The first GPU worker's facts, every worker's under ``devices`` (while open: as it is now)."""
        if self.cluster is not None and self.cluster.workers:
            return self.cluster.facts()
        return dict(self._facts)

    # --- a campaign's tasks ----------------------------------------------------------------------------------
    def ready(self, one_model: bool = False) -> None:
        """Connect and check the cluster: its GPU workers open their GPUs (warm once).

        Raises:
            ClusterError: no answer, no GPU worker, another cudalab or CUDA, mixed GPU models (``one_model``).
        """
        self._open()
        assert self.cluster is not None
        self._done = Completions(self.cluster)
        if one_model:
            try:
                self.cluster.one_model()
            except BaseException:
                self.close()
                raise

    def slots(self) -> int:
        """The GPU workers."""
        return len(self._cluster().workers)

    def _cluster(self) -> Cluster:
        assert self.cluster is not None, "ready first"
        return self.cluster

    def send(self, plans: Sequence[Plan]) -> Any:
        """A Dask task (retried elsewhere when its worker dies); its builds ahead are tied to it."""
        plans = list(plans)
        fut = self._cluster().submit(plans, self.energy, self.timeout)
        self._flying[fut] = plans
        assert self._done is not None, "ready first"
        self._done.add(fut)
        for plan in plans:
            self.prebuild(plan)  # its kernels built on a worker's host, unless they were when it was asked
        builds = [b for b in (self._early.pop(p.request, None) for p in plans) if b is not None]
        for plan in plans:
            if self._here is not None:  # built here or still building: its task waits on the cache's lock
                self._here.take(plan.request)
        if builds:
            self._builds[fut] = builds
        return fut

    def next_done(self, timeout: float | None = None) -> tuple[Any, list[Point] | BaseException] | None:
        """As :meth:`Executor.next_done`; a task Dask gave up on (its workers kept dying) is its exception.

        Raises:
            ClusterLost: the scheduler went away.
        """
        assert self._done is not None, "ready first"
        got = self._done.next(timeout)
        if got is None:
            return None
        fut, res = got
        plans = self._flying.pop(fut)
        self._builds.pop(fut, None)  # its trials ended: a build still queued is of no use (Dask forgets it)
        if isinstance(res, BaseException):
            return fut, res
        self._seconds += float(res.get("seconds") or 0.0)
        if res["where"].get("worker"):
            self._freed.append(res["where"]["worker"])
        return fut, [Point.from_data(p, d, res["where"]) for p, d in zip(plans, res["points"])]

    def cancel_tasks(self, handles: Sequence[Any]) -> None:
        """Cancel these tasks and the builds ahead of trials not sent (their workers end their GPU work)."""
        handles = list(handles)
        if self._done is not None:
            self._done.drop(handles)
        builds = [b for f in handles for b in self._builds.pop(f, [])]
        builds += list(self._early.values())  # the trials asked but not sent: their builds are of no use now
        self._early.clear()
        for f in handles:
            self._flying.pop(f, None)
        if self.cluster is not None:
            self.cluster.cancel(handles + builds)

    def ahead(self) -> int:
        """The GPU workers' build threads (``BUILD``), at most ``build_ahead``; 0: none. Before :meth:`ready`, a
        local cluster's: this host's build threads (:meth:`prebuild`); another's none (its workers and their hosts
        are not known yet)."""
        if self.cluster is None:
            return self._here.threads() if self._here is not None else 0
        threads = sum(w.builds for w in self.cluster.workers if w.arch)
        return threads if self.build_ahead is None else min(threads, self.build_ahead)

    def prebuild(self, plan: Plan) -> None:
        """On a build thread of the GPU worker's host likely to run it next (:meth:`_builder`); :meth:`send` ties
        it to the task. Before :meth:`ready`, a local cluster's on this host's build threads, for this host's GPUs'
        architecture (the first at the campaign's own priority: its GPU waits for it first)."""
        if self._here is not None and self._here.has(plan.request):
            return
        if self.cluster is None:
            if self._here is not None:
                self._here.submit(plan.request, self._here.arch_here(), urgent=not self._here.asked())
        elif self.ahead() and plan.request not in self._early:
            worker = self._builder()
            if worker is not None:
                self._early[plan.request] = self._cluster().prebuild(plan, worker)

    def _builder(self) -> Any:
        """The GPU worker whose host builds the next trial ahead (None: no prebuild).

        Dask sends a task to the GPU worker with the least work, which is the one that just finished a task (the
        driver sends the next one at that moment), so its host is where the build is wanted. A guess: when the
        task runs elsewhere the build is wasted, never wrong (the cache key holds the source, the defines, the
        arch and nvcc's version), and that task's worker builds for itself as without a prebuild.
        """
        cluster = self._cluster()
        workers = {w.address: w for w in cluster.workers}
        w = None
        while self._freed and w is None:
            w = workers.get(self._freed.popleft())
        if w is None:  # the first tasks (or the one that finished ran on a worker not checked): take turns
            w = cluster.workers[self._turn % len(cluster.workers)]
            self._turn += 1
        return w if w.builds and w.arch else None

    def built(self, plan: Plan) -> bool:
        if self._here is not None and not self._here.built(plan.request):
            return False
        fut = self._early.get(plan.request)
        return fut is None or fut.done()

    def builds_queued(self) -> int:
        here = self._here.queued() if self._here is not None else 0
        return here + sum(1 for b in [*self._early.values(), *(b for bs in self._builds.values() for b in bs)]
                          if not b.done())

    def stop_builds(self) -> None:
        """Cancel the builds of trials asked but not sent (a sent task's go with it); this host's not started are
        dropped (running ones finish: their cubins are cached)."""
        if self._early and self.cluster is not None:
            self.cluster.cancel(list(self._early.values()))
        self._early.clear()
        if self._here is not None:
            self._here.stop()

    def in_workers(self) -> float:
        return self._seconds

    def waited_builds(self) -> float:
        """0: a task that finds its build unfinished builds for itself in the worker (its seconds there)."""
        return 0.0

    def batch(self, trial_s: float) -> int:
        """As many as fill :data:`BATCH_S`, at most :data:`BATCH_MAX`."""
        return max(1, min(BATCH_MAX, int(BATCH_S / trial_s))) if trial_s > 0 else 1

    def describe(self) -> str:
        """The cluster in words (GPU models, hosts, dashboard)."""
        return self._cluster().describe()

    def busy_meter(self) -> None:
        """None: the GPUs are on the workers' hosts."""
        return None
