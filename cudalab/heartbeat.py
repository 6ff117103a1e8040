"""A worker's sign of life between GPU waits, for the parent's watchdog.

The parent kills a worker whose kernel has not finished within the run's timeout; it can only tell a
hung kernel from a long run by hearing from the worker's main thread between waits. GPU waits
(:meth:`cudalab.gpu.Device.synchronize`, an event's end, a chunk of a download) call :func:`beat`,
which does nothing until a worker installs its sender, and at most every :data:`EVERY_S` seconds
after that. A thread that beat on its own would keep a hung worker looking alive: only the thread
that waits may beat.
"""

from __future__ import annotations

import time
from typing import Callable

#: The least time between two beats sent (seconds): the pipe sees a few messages a second at most.
EVERY_S = 0.25

_send: Callable[[], None] | None = None
_last = 0.0


def install(send: Callable[[], None] | None) -> None:
    """Send beats through ``send`` from now on (None: stop)."""
    global _send, _last
    _send, _last = send, 0.0


def beat() -> None:
    """Tell the parent this worker is alive, if a sender is installed and the last beat is old enough."""
    global _last
    if _send is None:
        return
    now = time.monotonic()
    if now - _last >= EVERY_S:
        _last = now
        _send()
