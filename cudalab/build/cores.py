"""How many builds this machine runs at once: one a physical core.

nvcc is CPU-bound, and two builds on the two hardware threads of one core each run at little more than half
speed; worse, a build on every hardware thread leaves none of a core to the GPU worker, whose host work (inputs,
checks, the timing loop) then runs beside nvcc. On an H200 host of 16 hardware threads a cold campaign's trials
took 1.4-2.8 s longer in the worker than the same trials warm while 15 builds ran.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["physical_cores"]

#: Where Linux says which core each CPU is on.
SYSFS = Path("/sys/devices/system/cpu")


def physical_cores(sysfs: Path = SYSFS) -> int:
    """The physical cores among the CPUs this process may use (hardware threads of one core counted once); the
    CPUs themselves where the topology cannot be read (not Linux, a container hiding it); at least 1."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        topo = sysfs / f"cpu{cpu}" / "topology"
        try:
            cores.add((topo / "physical_package_id").read_text().strip() + ":" + (topo / "core_id").read_text().strip())
        except OSError:
            return max(1, len(cpus))
    return max(1, len(cores))
