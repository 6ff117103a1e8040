"""Builds run one a physical core (cudalab/build/cores.py): two hardware threads of one core count once."""

from __future__ import annotations

import os

import pytest

from cudalab.build import cores

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity: Linux")


def _sysfs(tmp_path, cpus, threads_per_core):
    for cpu in cpus:
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text("0\n")
        (topo / "core_id").write_text(f"{cpu // threads_per_core}\n")
    return tmp_path


def test_hardware_threads_of_one_core_count_once(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert cores.physical_cores(_sysfs(tmp_path, range(16), 2)) == 8


def test_one_thread_a_core_counts_every_cpu_and_only_the_cpus_allowed(tmp_path, monkeypatch):
    sysfs = _sysfs(tmp_path, range(16), 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert cores.physical_cores(sysfs) == 4


def test_without_a_topology_the_cpus_are_the_cores(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(6)))
    assert cores.physical_cores(tmp_path / "nothing") == 6


def test_a_campaign_builds_on_the_physical_cores_less_one(monkeypatch):
    from cudalab.tuning import buildpool

    monkeypatch.setattr(buildpool, "physical_cores", lambda: 8)
    assert buildpool.default_workers() == 7
    monkeypatch.setattr(buildpool, "physical_cores", lambda: 1)
    assert buildpool.default_workers() == 1
