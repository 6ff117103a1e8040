"""A worker's sign of life between GPU waits, for the parent's watchdog.

The parent kills a worker whose kernel has not finished within the run's timeout; it can only tell a
hung kernel from a long run by hearing from the worker's main thread between waits. GPU waits
(:meth:`cudalab.worker.gpu.Device.synchronize`, an event's end, a chunk of a download) call :func:`beat`,
which does nothing until a worker installs its sender, and at most every :data:`EVERY_S` seconds
after that. A thread that beat on its own would keep a hung worker looking alive: only the thread
that waits may beat, except inside :func:`host_work`, where the worker computes on the host (inputs,
references, checks: cudalab's own NumPy, no kernel awaited) and a 46340-cubed matmul's inputs and sketch
took longer than the watchdog's first 10 s.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable, Iterator

#: The least time between two beats sent (seconds): the pipe sees a few messages a second at most.
EVERY_S = 0.25

_send: Callable[[], None] | None = None
_last = 0.0


def install(send: Callable[[], None] | None) -> None:
    """Send beats through ``send`` from now on (None: stop)."""
    global _send, _last
    _send, _last = send, 0.0


_LOCK = threading.Lock()


def beat() -> None:
    """Tell the parent this worker is alive, if a sender is installed and the last beat is old enough."""
    global _last
    send = _send
    if send is None:
        return
    with _LOCK:
        now = time.monotonic()
        if now - _last < EVERY_S:
            return
        _last = now
    send()


_DEPTH = 0  # host_work blocks open now (any thread)
_HOST = threading.Condition()
_TICKER: threading.Thread | None = None


def _tick() -> None:
    """The one thread that beats while a :func:`host_work` block is open (started once: a thread started and
    joined per block cost milliseconds a check on a GPU machine's host, several a tuning trial)."""
    while True:
        with _HOST:
            while _DEPTH == 0:
                _HOST.wait()
            _HOST.wait(EVERY_S)
            busy = _DEPTH > 0
        if busy:
            beat()


@contextlib.contextmanager
def host_work() -> Iterator[None]:
    """Beat from a helper thread while the block runs: host computation only (drawing inputs, a NumPy
    reference, a check), never a wait on a kernel, so nothing a user wrote can hang in it."""
    global _DEPTH, _TICKER
    if _send is None:
        yield
        return
    with _HOST:
        if _TICKER is None:
            _TICKER = threading.Thread(target=_tick, name="cudalab-host-beat", daemon=True)
            _TICKER.start()
        _DEPTH += 1
        _HOST.notify_all()
    try:
        yield
    finally:
        with _HOST:
            _DEPTH -= 1
