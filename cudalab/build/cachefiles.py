"""The cache is input too: what cudalab reads back from its cache folder (the noise floor, the measured ceilings,
the calibration kernel) is read as untrusted, and written only as a file of its own.

A cache file that is not a small regular JSON file of the expected form (a FIFO, a link to ``/dev/zero``, a huge
file, wrong field types) is ignored with one warning line on stderr, and the command goes on as if it were not
there; a link planted where cudalab writes is replaced, never written through.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable, TypeVar

from cudalab.errors import CudalabError, UsageError
from cudalab.files import atomic_write, load_json

__all__ = ["read", "write", "MAX_CACHE_READ"]

#: The largest cache file read (every one cudalab writes is a few KB).
MAX_CACHE_READ = 1 << 20
T = TypeVar("T")
_warned: set[str] = set()


def read(path: Path, what: str, parse: Callable[[Any], T | None]) -> T | None:
    """``parse`` of the JSON at ``path`` (None: no such file, or it is ignored with one warning line).

    Args:
        path: the cache file (a link is followed only to a regular file; a FIFO or a device is never opened).
        what: how the warning names it ("the noise floor").
        parse: the JSON -> the value, None (or a TypeError, ValueError, KeyError) when it is not one.
    """
    if not os.path.lexists(path):
        return None
    try:
        got = parse(load_json(path, limit=MAX_CACHE_READ))
        why = "" if got is not None else "its fields are not what cudalab writes"
    except (CudalabError, OSError) as exc:
        got, why = None, str(exc).split(": ", 1)[-1] if str(exc) else type(exc).__name__
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        got, why = None, f"its fields are not what cudalab writes ({type(exc).__name__})"
    if got is None and str(path) not in _warned:
        _warned.add(str(path))
        print(f"warning: ignoring {what} in the cache, {path}: {why[:200]} (delete it; it is measured again)",
              file=sys.stderr)
    return got


def write(path: Path, text: str) -> None:
    """Write a cache file as a file of cudalab's own: a link (or a FIFO...) planted at ``path`` is removed first,
    and a linked folder refused, so nothing outside the cache is written.

    Raises:
        UsageError: the folder is a link, or ``path`` is a folder.
    """
    if path.parent.is_symlink():
        raise UsageError(f"{path.parent} is a symbolic link: cudalab writes its cache only to folders of its own "
                         "(remove the link)")
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(path) and (path.is_symlink() or not path.is_file()):
        if path.is_dir() and not path.is_symlink():
            raise UsageError(f"{path} is a folder where cudalab keeps a cache file (remove it)")
        path.unlink()
    atomic_write(path, text)
