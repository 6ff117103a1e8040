"""The rich console every table is printed on: the terminal's width on a terminal (tables fit it:
:mod:`cudalab.report.grid`); piped, wide and without line-end padding.

:data:`WIDE` is the command's ``--wide``: every column, and on a terminal a console as wide as a pipe's
(the terminal folds long lines; nothing is cropped).

Every console here is a :class:`CleanConsole`: text it prints that holds a terminal control (a saved run's
hostname with ``\\x1b]0;...``, a kernel name ncu read) shows as escapes (:func:`cudalab.textcells.clean`),
whatever renderable carried it; rich's own colours and cursor moves are untouched.
"""

from __future__ import annotations

import re
import shutil
import sys
from contextvars import ContextVar
from typing import Any, Iterator

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from cudalab.textcells import clean

#: Set by the command line's ``--wide`` (per invocation): every table column, nothing cropped.
WIDE: ContextVar[bool] = ContextVar("cudalab_wide", default=False)


class CleanConsole(Console):
    """A rich console whose printed text never carries a terminal control it did not make itself."""

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterator[Segment]:
        """Render as rich does, each text segment cleaned (rich's control segments pass as they are)."""
        for seg in super().render(renderable, options):
            if seg.control or seg.text.isprintable() or seg.text.replace("\n", "").isprintable():
                yield seg
            else:
                yield Segment(clean(seg.text, lines=True), seg.style, seg.control)


class _NoTrailingSpace:
    """A piped stream without the spaces rich pads each table line with to its widest cell."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> int:
        if " \n" in text or "\t\n" in text:  # a search in C first: most text has nothing to strip
            text = re.sub(r"[ \t]+(?=\n)", "", text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno: the stream's own
        return getattr(self.stream, name)


def console(stderr: bool = False) -> Console:
    """A console wide enough for the tables even when output is piped or captured."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() and not WIDE.get():
        return CleanConsole(file=stream, width=max(shutil.get_terminal_size((200, 24)).columns, 40), soft_wrap=False,
                       highlight=False)
    if stream.isatty():
        return CleanConsole(file=stream, width=400, soft_wrap=False, highlight=False)
    # Piped or captured (logs, CI, tests): wide enough that no column folds, however many a run adds
    return CleanConsole(file=_NoTrailingSpace(stream), width=400, soft_wrap=False, highlight=False)
