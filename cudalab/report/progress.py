"""Progress of a run on stderr: a rich bar with ETA on a terminal, one line per row in logs, or nothing.

:func:`for_stderr` picks the kind of :class:`cudalab.progress.Observer`: :class:`Bar` when stderr is a terminal,
:class:`Lines` when it is not (logs stay readable), :class:`~cudalab.progress.Observer` (silent) with ``quiet``.
rich is imported only inside :class:`Bar`; it leaves colour out under ``NO_COLOR`` and when stderr is not a
terminal.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from cudalab.progress import Observer

__all__ = ["Observer", "Lines", "Bar", "for_stderr", "DELAY_S"]

#: A bar appears only for runs that last longer than this (seconds): short runs stay quiet.
DELAY_S = 1.0


class Lines(Observer):
    """One line per finished row (the progress when stderr is a log file)."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.family = ""
        self.prefix = ""

    def start(self, total: int, family: str = "") -> None:
        self.family = family

    def point(self, index: int, count: int, label: str) -> None:
        self.prefix = f"[{index + 1}/{count} {label}] " if count > 1 else ""

    def result(self, row: Any) -> None:
        ms = getattr(row, "median_ms", None)
        t = f"{ms:.4f} ms" if ms is not None else ""
        line = f"  {self.prefix}{self.family}/{row.variant}: {row.status} {t} {getattr(row, 'reason', '')}"
        print(line.rstrip(), file=self.stream, flush=True)


class Bar(Observer):
    """A rich progress bar with elapsed time and ETA, shown after :data:`DELAY_S` and removed at the end."""

    def __init__(self, stream: TextIO | None = None, delay_s: float = DELAY_S):
        from rich.console import Console  # noqa: PLC0415
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(file=stream or sys.stderr)
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=console, transient=True)
        self.task = self.progress.add_task("starting", total=None)
        self.family = ""
        self.where = ""
        self.failed = 0
        self._shown = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(delay_s, self._show)
        self._timer.daemon = True
        self.started = time.monotonic()

    def _show(self) -> None:
        with self._lock:
            if not self._shown:
                self._shown = True
                self.progress.start()

    def start(self, total: int, family: str = "") -> None:
        self.family = family
        self.progress.update(self.task, total=total or None, description=family)
        self._timer.start()

    def point(self, index: int, count: int, label: str) -> None:
        self.where = f"{index + 1}/{count} {label} · " if count > 1 else ""

    def stage(self, variant: str, stage: str) -> None:
        self.progress.update(self.task, description=f"{self.family} {self.where}{variant}: {stage}")

    def result(self, row: Any) -> None:
        self.progress.advance(self.task)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            if self._shown:
                self.progress.stop()
                self._shown = False


def for_stderr(quiet: bool = False, stream: TextIO | None = None) -> Observer:
    """The progress for this process: nothing when ``quiet``, a bar on a terminal, lines otherwise."""
    stream = stream or sys.stderr
    if quiet:
        return Observer()
    isatty = getattr(stream, "isatty", None)
    if callable(isatty) and isatty():
        return Bar(stream)
    return Lines(stream)
