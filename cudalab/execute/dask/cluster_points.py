"""Points through a Dask cluster (:mod:`cudalab.execute.dask.cluster`): the rows a cluster worker sent back as a
session :class:`~cudalab.session.point.Point` (:func:`point_of_data`, also tune's), and a sweep's points run
on the cluster (:func:`run_plans`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from cudalab.plan import Plan
from cudalab.records.results import FAILED, Result, Roofline
from cudalab.execute.dask.cluster import Cluster, one_line
from cudalab.session.point import Point

__all__ = ["point_of_data", "run_plans"]


def point_of_data(plan: Plan, data: dict[str, Any], where: dict[str, Any]) -> Point:
    """A point as :func:`cluster_worker.run_plans` sent it back: its rows (each saying its GPU and host)."""
    pt = Point(plan)
    tag = {"gpu_name": where.get("gpu", ""), "host": where.get("host", "")}
    for d in data["rows"]:
        r = Result.from_dict(d)
        pt.results.append(replace(r, extra={**r.extra, **tag}))
    pt.roofline = Roofline.from_dict(data.get("roofline"))
    pt.roofline_note = str(data.get("roofline_note") or "")
    pt.refused = tuple(data["refused"]) if data.get("refused") else None  # type: ignore[assignment]
    pt.outputs, pt.inputs = dict(data.get("outputs") or {}), dict(data.get("inputs") or {})
    visible = str(where.get("visible", ""))
    pt.gpu = int(visible) if visible.isdigit() else 0
    pt.host, pt.gpu_name = tag["host"], tag["gpu_name"]
    return pt


def run_plans(plans: Sequence[Plan], address: str, devices: Sequence[int] = (0,), timeout: float | None = None,
              energy: bool = False, observer: Any = None, on_open: Any = None,
              on_change: Any = None) -> tuple[list[Point], bool, dict[str, Any]]:
    """A sweep's points on the cluster: one task per point, each point's rows kept (and passed to
    ``on_change``, with every point finished so far, in the sweep's order) the moment it comes back.
    Ctrl-C (KeyboardInterrupt) cancels what is in flight and keeps what finished.

    Returns:
        (the finished points in the sweep's order, incomplete, the GPUs' facts).

    Raises:
        ClusterError: as :meth:`Cluster.open`; ClusterLost: the scheduler went away (what finished was passed
            to ``on_change`` already).
    """
    cluster = Cluster.open(address, devices, energy)
    done: dict[int, Point] = {}
    futures: dict[Any, int] = {}
    announced = False
    try:
        if observer is not None:
            observer.start(sum(len(p.variants) for p in plans), plans[0].request.family if plans else "")
        futures = {cluster.submit([p], energy, timeout): i for i, p in enumerate(plans)}
        for fut, res in cluster.completed(futures):
            i = futures[fut]
            if isinstance(res, BaseException):  # Dask gave up on it: every row of the point failed, with why
                pt = Point(plans[i])
                why = f"the cluster could not run it: {type(res).__name__}: {one_line(res)}"
                pt.results = [Result(variant=v.name, kind=v.kind, status=FAILED, reason=why, legacy=v.legacy)
                              for v in plans[i].variants]
            else:
                pt = point_of_data(plans[i], res["points"][0], res["where"])
                if not announced and on_open is not None:
                    on_open(dict(res["where"]["info"]))
                    announced = True
            done[i] = pt
            for row in pt.results:
                if observer is not None:
                    observer.result(row)
            if on_change is not None:
                on_change([done[k] for k in sorted(done)])
        incomplete = False
    except KeyboardInterrupt:
        cluster.cancel(futures)
        incomplete = True
    finally:
        if observer is not None:
            observer.close()
        info = _facts(cluster)
        cluster.close()
    return [done[k] for k in sorted(done)], incomplete, info


def _facts(cluster: Cluster) -> dict[str, Any]:
    infos = [dict(w.info, host=w.host, worker=w.address) for w in cluster.workers]
    out = dict(infos[0]) if infos else {}
    if len(infos) > 1:
        out["devices"] = infos
    out["cluster"] = cluster.address
    return out
