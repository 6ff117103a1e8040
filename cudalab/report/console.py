"""The rich console every table is printed on: terminal width on a terminal; piped, wide and without
line-end padding."""

from __future__ import annotations

import re
import shutil
import sys
from typing import Any

from rich.console import Console


class _NoTrailingSpace:
    """A piped stream without the spaces rich pads each table line with to its widest cell."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(re.sub(r"[ \t]+(?=\n)", "", text))

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno: the stream's own
        return getattr(self.stream, name)


def console(stderr: bool = False) -> Console:
    """A console wide enough for the tables even when output is piped or captured."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(file=stream, width=max(shutil.get_terminal_size((200, 24)).columns, 100), soft_wrap=False,
                       highlight=False)
    # Piped or captured (logs, CI, tests): wide enough that no column folds, however many a run adds
    return Console(file=_NoTrailingSpace(stream), width=400, soft_wrap=False, highlight=False)
