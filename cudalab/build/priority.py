"""Builds ahead of their turn run below the process that asked for them.

A cold campaign's builds ahead fill every core, and the GPU worker's host work (uploads, verification, the
timing loop) waits behind nvcc (a cause suspected where an H200 was 7% busy while 15 threads built the matmul
warptile's trials on 16 cores). Lower, the builds take what the worker leaves.
"""

from __future__ import annotations

import os
import threading

__all__ = ["NICE", "lower_priority"]

#: How much lower than the campaign's own priority builds ahead run (the nice increment of their threads).
NICE = 10


def lower_priority() -> None:
    """Run this thread, and the nvcc processes it starts (they inherit it), at :data:`NICE` below the process.

    Linux gives each thread its own nice value; elsewhere nothing changes.
    """
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE))
    except (AttributeError, OSError):  # no per-thread priority here: the builds run as before
        pass
