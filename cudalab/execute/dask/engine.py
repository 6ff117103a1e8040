"""The Dask engine (``--cluster``) as an :class:`~cudalab.execute.executor.Executor`: one task per planned
point on a Dask cluster (:class:`~cudalab.execute.dask.cluster.Cluster`), each point's rows kept the moment its
task comes back (as the Dask worker's own local engine assembled them: :meth:`Point.from_data`)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from cudalab.execute.dask.cluster import Cluster, one_line
from cudalab.execute.executor import Executor
from cudalab.plan import Plan
from cudalab.progress import Observer
from cudalab.execute.point import Point

__all__ = ["DaskPool"]


class DaskPool(Executor):
    """Planned points on the Dask cluster at ``address`` (``local``: one started here on ``devices``, None: every
    GPU this host sees); ``timeout``, ``energy``, ``observer``, ``on_ready``, ``on_change`` as the local pool's.

    A point Dask gave up on comes back as failed rows, each saying why; the scheduler lost mid-run raises
    :class:`~cudalab.errors.ClusterLost` from :meth:`wait` (what finished was passed to ``on_change`` already).
    """

    def __init__(self, address: str, devices: Sequence[int] | None = (0,), timeout: float | None = None,
                 energy: bool = False, observer: Observer | None = None,
                 on_ready: Callable[[dict[str, Any]], None] | None = None,
                 on_change: Callable[[list[Point]], None] | None = None):
        self.address, self.devices, self.timeout, self.energy = address, devices, timeout, energy
        self.observer = observer or Observer()
        self.on_ready, self.on_change = on_ready, on_change
        self.cluster: Cluster | None = None
        self._plans: list[Plan] = []
        self._futures: dict[Any, int] = {}
        self._facts: dict[str, Any] = {}

    def start(self) -> None:
        """Nothing yet: the cluster is opened (and checked) with the points, in :meth:`submit`."""

    def submit(self, plans: Sequence[Plan], total: int) -> None:
        """Open and check the cluster, then one task per point.

        Raises:
            ClusterError: as :meth:`Cluster.open`.
        """
        from cudalab.execute.local.process import visible_gpus  # noqa: PLC0415  (a local cluster's GPUs)

        gpus = list(range(visible_gpus() or 1)) if self.devices is None else list(self.devices)
        self.cluster = Cluster.open(self.address, gpus, self.energy)
        self._plans = list(plans)
        self.observer.start(total, plans[0].request.family if plans else "")
        self._futures = {self.cluster.submit([p], self.energy, self.timeout): i for i, p in enumerate(plans)}

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
            self.cluster.cancel(self._futures)
        self.close()

    def close(self) -> None:
        if self.cluster is not None:
            self._facts = self.cluster.facts()
            self.cluster.close()
            self.cluster = None

    def info(self) -> dict[str, Any]:
        return dict(self._facts)
