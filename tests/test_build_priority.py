"""Builds ahead of their turn run below the campaign (cudalab/build/priority.py): the nvcc processes of the pool's
threads and of a cluster's prebuild run niced and in Linux's idle class, and leave the GPU worker's host work the
cores it needs; the threads themselves run as they did (one starved while it holds Python's lock stalls its
process)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from cudalab import build
from cudalab.build.priority import NICE, lowered

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="per-thread priority: Linux")

#: a child that prints its own class and nice value
PROBE = [sys.executable, "-c", "import os; print(os.sched_getscheduler(0) == os.SCHED_IDLE, os.getpriority(os.PRIO_PROCESS, 0))"]


def _mine() -> tuple[int, bool]:
    tid = threading.get_native_id()
    return os.getpriority(os.PRIO_PROCESS, tid), os.sched_getscheduler(tid) == os.SCHED_IDLE


def _child() -> tuple[int, bool]:
    """What a process a build starts runs at (build._run, as nvcc is started)."""
    idle, nice = build._run(PROBE).stdout.split()
    return int(nice), idle == "True"


def test_the_build_pool_starts_its_processes_low_and_its_threads_stay_as_they_were():
    from cudalab.tuning.buildpool import BuildPool

    base = _mine()
    pool = BuildPool(1)
    seen: list = []
    pool.submit(lambda: seen.append((_mine(), _child()))).result(timeout=30)
    pool.close()
    assert seen == [(base, (min(19, base[0] + NICE), True))] and _mine() == base


def test_a_cluster_prebuild_is_marked_low_and_its_dask_thread_stays_as_it_was(monkeypatch):
    from cudalab.plan import precheck, RunRequest
    from cudalab.execute.dask import cluster_worker as CW

    base = _mine()
    seen = []

    class Built:
        cached = False

    monkeypatch.setattr(build, "build", lambda *a, **k: seen.append((lowered(), _mine())) or Built())
    plan = precheck(RunRequest(family="copy", variants="vec4", n="1k"))
    assert CW.prebuild(plan.to_dict(), "sm_90") == {"built": 1, "cached": 0, "error": ""}
    assert seen == [(True, base)] and _mine() == base and not lowered()


def test_an_urgent_build_starts_its_process_at_the_campaign_s_own_priority_beside_the_low_ones():
    # the build the GPU waits for first must not share the cores' low class with the builds queued behind it
    from cudalab.tuning.buildpool import BuildPool

    base = _mine()
    pool = BuildPool(2)
    seen = {}
    pool.submit(lambda: seen.setdefault("first", _child()), urgent=True).result(timeout=30)
    pool.submit(lambda: seen.setdefault("later", _child())).result(timeout=30)
    pool.close()
    assert seen == {"first": base, "later": (min(19, base[0] + NICE), True)} and _mine() == base


def test_a_process_that_cannot_start_raises_in_the_build_s_own_thread():
    from cudalab.build.priority import lower_priority

    got = []

    def job():
        lower_priority()
        try:
            build._run(["/nonexistent/nvcc"])
        except OSError as exc:
            got.append(type(exc).__name__)

    t = threading.Thread(target=job)
    t.start()
    t.join(timeout=30)
    assert got == ["FileNotFoundError"]
