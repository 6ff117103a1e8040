"""Who computes on the GPUs, and which of those processes are this one's: NVML's lists and /proc (the helpers
:mod:`cudalab.instruments.telemetry` tells another process from ours with)."""

from __future__ import annotations

import os
from typing import Any


def ancestors(pid: int | None = None) -> set[int]:
    """The ids of this process's parents up to init, from /proc (empty where there is none)."""
    out: set[int] = set()
    pid = os.getppid() if pid is None else pid
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the command name is the state, then ppid
    return out


def compute_pids(nvml: Any | None) -> set[int] | None:
    """The processes computing on any GPU now, from NVML (None where it cannot say): read at a worker's start
    before its context exists (:func:`cudalab.worker.warm.start`), the baseline
    :meth:`cudalab.instruments.telemetry.Telemetry.before_open` takes. ``nvml``: an initialised NVML module
    (:func:`cudalab.instruments.telemetry.import_nvml`; tests pass a fake), None when there is none."""
    if nvml is None:
        return None
    pids: set[int] = set()
    for i in range(int(nvml.nvmlDeviceGetCount())):
        pids |= {int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(nvml.nvmlDeviceGetHandleByIndex(i))}
    return pids
