"""File events for ``cudalab watch``: the OS's own (``watchfiles``, the ``watch`` extra) or polling.

An event source only says *when to look*: :meth:`Events.wait` returns the paths that may have changed
(or nothing after ``timeout``), and the watcher decides what changed by the files' text (sha256), so
a save that writes the same bytes, an editor's swap file or an event lost between two waits changes
nothing. Folders are watched rather than files, so an editor that saves by writing a new file and
renaming it over the old one is seen too.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Iterable, Protocol

__all__ = ["Events", "PollEvents", "WatchfilesEvents", "best", "POLL_S"]

#: How often polling looks at the watched files (seconds).
POLL_S = 0.25


class Events(Protocol):
    """Something that waits for file events."""

    #: How it watches, for the screen: ``watchfiles`` or ``polling``.
    name: str

    def wait(self, paths: Iterable[Path], timeout: float | None = None) -> set[Path]:
        """Block until one of ``paths`` may have changed; return those (empty after ``timeout`` seconds).

        Raises:
            KeyboardInterrupt: Ctrl-C while waiting.
        """
        ...


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class PollEvents:
    """Looks at each file's modification time, size and inode every ``interval`` seconds."""

    name = "polling"

    def __init__(self, interval: float = POLL_S):
        self.interval = interval

    def wait(self, paths: Iterable[Path], timeout: float | None = None) -> set[Path]:
        files = list(paths)
        before = {p: _stat(p) for p in files}
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            changed = {p for p in files if _stat(p) != before[p]}
            if changed:
                return changed
            if deadline is not None and time.monotonic() >= deadline:
                return set()
            time.sleep(self.interval if deadline is None else max(0.0, min(self.interval, deadline - time.monotonic())))


class WatchfilesEvents:
    """The operating system's file events through ``watchfiles`` (inotify on Linux), on the files' folders."""

    name = "watchfiles"

    def __init__(self, debounce_ms: int = 50):
        import watchfiles  # noqa: PLC0415  (the 'watch' extra; best() falls back to polling without it)

        self._watch = watchfiles.watch
        self.debounce_ms = debounce_ms
        self._fallback: PollEvents | None = None

    def wait(self, paths: Iterable[Path], timeout: float | None = None) -> set[Path]:
        paths = list(paths)
        if self._fallback is not None:
            return self._fallback.wait(paths, timeout)
        try:
            return self._wait(paths, timeout)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:  # no inotify watch left (fs.inotify.max_user_watches), a file system without events
            self._fallback = PollEvents()
            self.name = f"polling: watchfiles failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
            return set(paths)  # look now: something may have changed while it failed

    def _wait(self, paths: list[Path], timeout: float | None) -> set[Path]:
        files = {os.path.abspath(p): Path(p) for p in paths}
        folders = sorted({os.path.dirname(f) for f in files if os.path.isdir(os.path.dirname(f))})
        if not folders:  # nothing left to watch (every folder is gone): look again later
            time.sleep(timeout if timeout is not None else POLL_S)
            return set()
        stop = threading.Event()
        # rust_timeout: a bounded wait, so a timeout is honoured; without one, wake now and then anyway
        ms = int(1000 * (timeout if timeout is not None else 5.0))
        for changes in self._watch(*folders, watch_filter=lambda _c, path: os.path.abspath(path) in files,
                                   debounce=self.debounce_ms, step=20, stop_event=stop, rust_timeout=max(ms, 1),
                                   yield_on_timeout=True, recursive=False, raise_interrupt=True):
            hit = {files[os.path.abspath(p)] for _, p in changes if os.path.abspath(p) in files}
            if hit or timeout is not None:
                stop.set()
                return hit
        return set()


def best(poll: bool = False, interval: float = POLL_S) -> Events:
    """``watchfiles`` where it is installed (and ``poll`` is not asked for), else polling."""
    if not poll:
        try:
            return WatchfilesEvents()
        except ImportError:
            pass
    return PollEvents(interval)
