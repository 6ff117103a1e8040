"""Builds ahead of their turn run below the process that asked for them.

A cold campaign's builds ahead fill every core, and the GPU worker's host work (uploads, verification, the
timing loop) waits behind nvcc (a cause suspected where an H200 was 7% busy while 15 threads built the matmul
warptile's trials on 16 cores). Lower, the builds take what the worker leaves.

A nice value alone left the worker slowed: on an H200 host (16 cores) the 30-trial matmul warptile campaign's
trials took 14.0 s in the GPU worker cold, beside builds at nice +10, and 11.0 s warm; the worker's verification
(its NumPy threads on every core) took 4.2 s against 3.2 s. Linux's ``SCHED_IDLE`` runs a process only on a core
nothing else wants, so the nvcc processes now take that class as well (where it is refused, the nice value holds).
(Most of that verification's "threads on every core" were OpenBLAS's, spinning after each ``np.dot`` of the check's
blocks, and they starved the idle-class builds too: :mod:`cudalab.hostcheck` calls no BLAS since.)

Only nvcc is lowered, never a thread of the campaign's process: a thread in the idle class that holds Python's
lock while the machine is busy starves for as long, and every other thread of its process waits with it (the
thread that relays the GPU worker's rows among them). A build thread marks itself (:func:`lower_priority`); its
nvcc is then started from a short-lived thread of its own in the low class (:func:`start_lowered`), and inherits it.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, TypeVar

__all__ = ["NICE", "lower_priority", "lowered", "start_lowered"]

#: How much lower than the campaign's own priority builds ahead run (the nice increment of their processes).
NICE = 10

T = TypeVar("T")
_marked = threading.local()


def lower_priority() -> None:
    """Mark this thread: the processes its builds start (nvcc) run at :data:`NICE` below this process and in Linux's
    idle scheduling class (:func:`start_lowered`); the thread itself runs as it did."""
    _marked.low = True


def lowered() -> bool:
    """Whether this thread's builds start their processes low (:func:`lower_priority`)."""
    return getattr(_marked, "low", False)


def start_lowered(start: Callable[[], T]) -> T:
    """``start()`` (which starts a process) called on a thread of its own, lowered as :func:`lower_priority` says:
    the process inherits the class and the nice value, this thread keeps its own. Its value, or its exception."""
    out: dict[str, object] = {}

    def run() -> None:
        _lower_this_thread()
        try:
            out["value"] = start()
        except BaseException as exc:  # noqa: BLE001  (raised again in the caller's thread)
            out["error"] = exc

    t = threading.Thread(target=run, name="cudalab-start-low", daemon=True)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]  # type: ignore[return-value]


def _lower_this_thread() -> None:
    """This thread at :data:`NICE` below the process and in the idle class (Linux gives each thread its own); elsewhere
    nothing changes."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + NICE))
    except (AttributeError, OSError):  # no per-thread priority here: the builds run as before
        return
    try:
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):  # not Linux, or refused: the nice value alone
        pass
