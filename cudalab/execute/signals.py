"""The signals the parent owns during a run: Ctrl-C and SIGTERM become a kept, incomplete run."""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass
from typing import Any, Iterator

__all__ = ["Caught", "interrupts"]


@dataclass
class Caught:
    """The signal that interrupted a run (None: none did)."""

    signum: int | None = None


@contextlib.contextmanager
def interrupts() -> Iterator[Caught]:
    """Turn Ctrl-C and SIGTERM into a kept, incomplete run: the block sees KeyboardInterrupt (the
    session then kills its workers and returns what finished), and the signal is remembered for the
    exit code (130, 143). Outside the main thread nothing is installed."""
    caught = Caught()
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def handler(signum: int, frame: Any) -> None:
        if caught.signum is None:  # a second Ctrl-C while the workers are being ended changes nothing
            caught.signum = signum
            raise KeyboardInterrupt

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield caught
    except KeyboardInterrupt:
        if caught.signum is None:  # raised by the interpreter's own Ctrl-C handling
            caught.signum = signal.SIGINT
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
