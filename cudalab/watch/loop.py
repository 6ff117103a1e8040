"""The ``cudalab watch`` session: the first version, then one per saved change, until Ctrl-C."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from cudalab.execute.signals import interrupts
from cudalab.watch.core import Version, Watcher

__all__ = ["RECHECK_S", "loop"]

#: How often the watcher looks at the files' texts even without an event (seconds): an event lost
#: between two waits costs at most this long.
RECHECK_S = 2.0


def loop(watcher: Watcher, events: Any, show: Callable[[Version], None], announce: Callable[[Sequence[Path]], None],
         save: Callable[[], None] = lambda: None) -> int:
    """The session: the first version, then one per change until Ctrl-C (or SIGTERM); returns the exit code.

    Ctrl-C while waiting ends the session cleanly (0); during a run it keeps what was measured and ends it
    as a run ends (130, or 143 for SIGTERM).

    Args:
        watcher: the versions.
        events: a :class:`cudalab.watch.events.Events`.
        show: draws a version.
        announce: says which files changed, before their rows are rebuilt.
        save: writes the session file (``--json``) after every version.
    """
    try:
        version = watcher.run_version()
        show(version)
        save()
        while not version.exit_code:
            watcher.warm()
            with interrupts() as caught:
                try:
                    events.wait(watcher.watched(), RECHECK_S)
                    changed = watcher.changed_files()
                    if changed:
                        watcher.settle(changed)
                        changed = watcher.changed_files() or changed
                except KeyboardInterrupt:
                    caught.signum = caught.signum or 2
            if caught.signum is not None:
                return 0
            if not changed:
                continue
            announce(changed)
            version = watcher.run_version(changed)
            show(version)
            save()
        return version.exit_code
    finally:
        watcher.close()
