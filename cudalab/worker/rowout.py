"""What a row printed: a kernel's ``printf``, kept with its row instead of flooding the terminal.

CUDA's device ``printf`` lands in the worker's C ``stdout`` (file descriptor 1) when the driver empties
the device's printf buffer (at a launch, a synchronize, a blocking copy), through C stdio's buffer. The
parent echoes whatever the worker writes there, so 2,560 lines of a kernel's printf used to scroll
between the progress lines. While a point's rows run, :class:`RowOutput` points fd 1 at a private
temporary file; after each row, :meth:`RowOutput.attach` empties C stdio's buffer and Python's into it,
reads what the row printed and puts it in the row's ``extra["stdout"]`` (the first :data:`LIMIT` bytes;
``extra["stdout_dropped"]`` counts the rest). The run table shows a few lines under the row; the JSON
keeps the text.

A temporary file, not a pipe: a kernel may print more than a pipe holds before anyone reads it.
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
from dataclasses import replace
from typing import Any

#: Bytes of a row's output kept in its row (and the JSON); what follows is counted, not kept.
LIMIT = 1 << 20


def _flush() -> None:
    """Empty Python's and C stdio's buffers into fd 1 as it is now (the driver's printf goes through the
    latter: to a file, C stdio holds up to 4 KiB until flushed)."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # no C library to ask (not on Linux): nothing buffered there either
        pass


class RowOutput:
    """fd 1 sent to a private temporary file between ``__enter__`` and ``__exit__``; a context manager.

    Capture is off (rows get nothing, fd 1 is left alone) when fd 1 cannot be redirected: closed, say.
    """

    def __init__(self, limit: int = LIMIT):
        self.limit = limit
        self._file: Any = None
        self._saved: int | None = None

    def __enter__(self) -> "RowOutput":
        _flush()  # what was printed before belongs where fd 1 pointed then
        try:
            self._file = tempfile.TemporaryFile(prefix="cudalab-row-")
            self._saved = os.dup(1)
            os.dup2(self._file.fileno(), 1)
        except OSError:
            self._close()
        return self

    def take(self) -> tuple[str, int]:
        """What was printed since the last take: (the text of its first :attr:`limit` bytes, bytes dropped)."""
        if self._saved is None:
            return "", 0
        _flush()
        fd = self._file.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, min(size, self.limit), 0) if size else b""
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)  # fd 1 shares this offset: the next row writes from the start
        return data.decode("utf-8", errors="replace"), size - len(data)

    def attach(self, row: Any) -> Any:
        """``row`` (a :class:`cudalab.records.results.Result`) with what was printed since the last row."""
        text, dropped = self.take()
        if not text and not dropped:
            return row
        extra = dict(row.extra, stdout=text)
        if dropped:
            extra["stdout_dropped"] = dropped
        return replace(row, extra=extra)

    def __exit__(self, *exc: Any) -> None:
        if self._saved is not None:
            _flush()  # what is left in C stdio's buffer still goes to the capture, not the terminal
            os.dup2(self._saved, 1)
        self._close()

    def _close(self) -> None:
        if self._saved is not None:
            os.close(self._saved)
            self._saved = None
        if self._file is not None:
            self._file.close()
            self._file = None
