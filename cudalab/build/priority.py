"""Builds ahead of their turn run below the process that asked for them.

A cold campaign's builds ahead fill every core, and the GPU worker's host work (uploads, verification, the
timing loop) waits behind nvcc (a cause suspected where an H200 was 7% busy while 15 threads built the matmul
warptile's trials on 16 cores). Lower, the builds take what the worker leaves.

A nice value alone left the worker slowed: on an H200 host (16 cores) the 30-trial matmul warptile campaign's
trials took 14.0 s in the GPU worker cold, beside builds at nice +10, and 11.0 s warm; the worker's verification
(its NumPy threads on every core) took 4.2 s against 3.2 s. Linux's ``SCHED_IDLE`` runs a thread only on a core
nothing else wants, so the builds now take that class as well (where it is refused, the nice value still holds).
"""

from __future__ import annotations

import os
import threading

__all__ = ["NICE", "lower_priority"]

#: How much lower than the campaign's own priority builds ahead run (the nice increment of their threads).
NICE = 10


def lower_priority() -> None:
    """Run this thread, and the nvcc processes it starts (they inherit both), at :data:`NICE` below the process
    and in Linux's idle scheduling class.

    Linux gives each thread its own nice value and class; elsewhere nothing changes.
    """
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE))
    except (AttributeError, OSError):  # no per-thread priority here: the builds run as before
        return
    try:
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or refused: the nice value alone
        pass
