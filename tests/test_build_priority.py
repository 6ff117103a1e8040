"""Builds ahead of their turn run below the campaign (cudalab/build/priority.py): the pool's threads and a cluster's
prebuild, and so the nvcc processes they start, leave the GPU worker's host work the cores it needs."""

from __future__ import annotations

import os
import threading

import pytest

from cudalab.build.priority import NICE

pytestmark = pytest.mark.skipif(not hasattr(os, "getpriority"), reason="per-thread priority: Linux")


def _mine() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_build_pool_runs_its_jobs_niced_and_leaves_the_caller_as_it_was():
    from cudalab.tuning.buildpool import BuildPool

    base = _mine()
    pool = BuildPool(1)
    seen = []
    pool.submit(lambda: seen.append(_mine())).result(timeout=10)
    pool.close()
    assert seen == [min(19, base + NICE)] and _mine() == base


def test_a_cluster_prebuild_builds_niced_and_its_dask_thread_stays_as_it_was(monkeypatch):
    from cudalab import build
    from cudalab.plan import precheck, RunRequest
    from cudalab.execute.dask import cluster_worker as CW

    base = _mine()
    seen = []

    class Built:
        cached = False

    monkeypatch.setattr(build, "build", lambda *a, **k: seen.append(_mine()) or Built())
    plan = precheck(RunRequest(family="copy", variants="vec4", n="1k"))
    assert CW.prebuild(plan.to_dict(), "sm_90") == {"built": 1, "cached": 0, "error": ""}
    assert seen == [min(19, base + NICE)] and _mine() == base


def test_an_urgent_build_runs_at_the_campaign_s_own_priority_beside_the_niced_ones():
    # the build the GPU waits for first must not share the cores' low priority with the builds queued behind it
    from cudalab.tuning.buildpool import BuildPool

    base = _mine()
    pool = BuildPool(2)
    seen = {}
    pool.submit(lambda: seen.setdefault("first", _mine()), urgent=True).result(timeout=10)
    pool.submit(lambda: seen.setdefault("later", _mine())).result(timeout=10)
    pool.close()
    assert seen == {"first": base, "later": min(19, base + NICE)} and _mine() == base
