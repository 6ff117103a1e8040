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


def _idle() -> bool:
    """Whether this thread is in Linux's idle scheduling class (what lower_priority asks for beside the nice)."""
    return os.sched_getscheduler(threading.get_native_id()) == os.SCHED_IDLE


def test_a_lowered_thread_is_niced_and_idle_class_and_the_nvcc_it_starts_is_too():
    import subprocess

    from cudalab.build.priority import lower_priority

    seen = {}

    def job():
        lower_priority()
        seen["thread"] = (_mine(), _idle())
        # a child inherits the starting thread's class: what nvcc would run at
        out = subprocess.run(["python3", "-c", "import os; print(os.sched_getscheduler(0) == os.SCHED_IDLE, "
                              "os.getpriority(os.PRIO_PROCESS, 0))"], capture_output=True, text=True).stdout.split()
        seen["child"] = (out[0] == "True", int(out[1]))

    base = _mine()
    t = threading.Thread(target=job)
    t.start()
    t.join(timeout=30)
    assert seen["thread"] == (min(19, base + NICE), True)
    assert seen["child"] == (True, min(19, base + NICE))
    assert _mine() == base and not _idle()


def test_the_build_pool_runs_its_jobs_niced_and_leaves_the_caller_as_it_was():
    from cudalab.tuning.buildpool import BuildPool

    base = _mine()
    pool = BuildPool(1)
    seen = []
    pool.submit(lambda: seen.append((_mine(), _idle()))).result(timeout=10)
    pool.close()
    assert seen == [(min(19, base + NICE), True)] and _mine() == base and not _idle()


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
    pool.submit(lambda: seen.setdefault("first", (_mine(), _idle())), urgent=True).result(timeout=10)
    pool.submit(lambda: seen.setdefault("later", (_mine(), _idle()))).result(timeout=10)
    pool.close()
    assert seen == {"first": (base, False), "later": (min(19, base + NICE), True)} and _mine() == base
