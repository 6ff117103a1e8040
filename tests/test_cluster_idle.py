"""What a local cluster (``--cluster local``) costs the host when nothing runs: Dask's sampling profiler off and its
ticks and monitors slowed in the workers and scheduler cudalab starts (cudalab/execute/dask/cluster.py,
LOCAL_CONFIG), nothing of it left in the user's own Dask settings."""

from __future__ import annotations

import importlib.util

import pytest

from test_cluster import dask_fake  # noqa: F401  (the fake cluster's fixture)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the cluster extra")

KEYS = ("distributed.worker.profile.enabled", "distributed.admin.tick.interval",
        "distributed.admin.system-monitor.interval", "distributed.worker.memory.monitor-interval")


def _config() -> dict:
    import dask

    return {k: dask.config.get(k) for k in KEYS}


def test_a_local_clusters_workers_and_scheduler_run_without_dasks_profiler_and_fast_ticks(dask_fake):
    from cudalab.execute.dask.cluster import Cluster
    from cudalab.execute.dask.localcluster import LOCAL_CONFIG

    dask_fake({})
    mine = _config()
    cluster = Cluster.open("local", [0, 1])
    try:
        got = cluster.client.run(_config)
        assert len(got) == 2 and all(c == LOCAL_CONFIG for c in got.values()), got
        spec = cluster._cluster  # the scheduler and the Nannies run in this process, made under those settings
        assert spec.scheduler._tick_interval == 1.0
        assert [n.memory_manager.memory_monitor_interval for n in spec.workers.values()] == [1.0, 1.0]
    finally:
        cluster.close()
    assert _config() == mine  # the user's own settings as they were
    assert mine["distributed.worker.profile.enabled"] is True
