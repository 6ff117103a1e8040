"""The parent's side of a run: GPU workers (:mod:`cudalab.worker.process`), the points they run and the
watchdog (:mod:`cudalab.session.drive`), and the signals the parent owns (:func:`interrupts`)."""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from cudalab.errors import UsageError
from cudalab.session.drive import Session, WorkerError

__all__ = ["Session", "WorkerError", "interrupts", "Caught", "parse_devices", "device_list"]


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


def parse_devices(text: str | None, default: int) -> list[int] | None:
    """``--devices``: a list of GPU indices, None for ``all``, ``[default]`` when not given.

    Raises:
        UsageError: not ``all`` nor a comma list of distinct whole numbers >= 0.
    """
    if text is None:
        return [default]
    if text.strip().lower() == "all":
        return None
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--devices {text!r} is not 'all' nor a list of GPU indices (example: --devices 0,1)") from None
    if not out or any(d < 0 for d in out) or len(set(out)) != len(out):
        raise UsageError(f"--devices {text!r} must name distinct GPU indices >= 0 (example: --devices 0,1)")
    return out


def device_list(text: str | None, default: int) -> list[int]:
    """``--devices`` as GPU indices, asking a worker how many there are for ``all``.

    Raises:
        UsageError: a bad list.
        WorkerError: ``all`` and no worker could open a GPU.
    """
    devices = parse_devices(text, default)
    if devices is not None:
        return devices
    session = Session([default])
    try:
        return list(range(session.count()))
    finally:
        session.close()
