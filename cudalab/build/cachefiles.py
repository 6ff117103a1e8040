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

__all__ = ["read", "write", "cache_root", "own_folder", "MAX_CACHE_READ"]

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


def cache_root() -> Path:
    """``$CUDALAB_CACHE``, else ``$XDG_CACHE_HOME/cudalab``, else ``~/.cache/cudalab`` (builds in its ``build/``)."""
    if os.environ.get("CUDALAB_CACHE"):
        return Path(os.environ["CUDALAB_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "cudalab"
    return Path.home() / ".cache" / "cudalab"


def own_folder(folder: Path, make: bool = True) -> Path:
    """``folder`` of the cache (made where missing), once no folder on the way to it from the cache's root is a link.

    The root (``$CUDALAB_CACHE``, else ``$XDG_CACHE_HOME/cudalab``, else ``~/.cache/cudalab``) is the user's to
    choose, a link to another disk included. Below it cudalab makes folders only, never a link: a link there
    (``build`` -> a folder elsewhere) was planted, and is not written through. A folder outside the cache (a test's)
    is taken as it is.

    Raises:
        UsageError: a folder of the cache is a link (one line: which, and how to keep the cache elsewhere).
    """
    root = cache_root()
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        parts = ()
    p = root
    for part in parts:
        p = p / part
        if p.is_symlink():
            raise UsageError(f"{p} is a symbolic link in cudalab's cache: cudalab writes there only to folders of its "
                             f"own (remove the link; to keep the cache elsewhere, set CUDALAB_CACHE to that folder)")
    if make:
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def write(path: Path, text: str) -> None:
    """Write a cache file as a file of cudalab's own: a link (or a FIFO...) planted at ``path`` is removed first,
    and a linked folder refused (:func:`own_folder`), so nothing outside the cache is written.

    Raises:
        UsageError: a folder on the way is a link, or ``path`` is a folder.
    """
    if path.parent.is_symlink():  # outside the cache too (a test's folder): never through a linked folder
        raise UsageError(f"{path.parent} is a symbolic link: cudalab writes its cache only to folders of its own "
                         "(remove the link)")
    own_folder(path.parent)
    if os.path.lexists(path) and (path.is_symlink() or not path.is_file()):
        if path.is_dir() and not path.is_symlink():
            raise UsageError(f"{path} is a folder where cudalab keeps a cache file (remove it)")
        path.unlink()
    atomic_write(path, text)
