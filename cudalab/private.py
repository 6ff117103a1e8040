"""This user's own folders in the temporary folder (``--add`` preludes, notebook cells), safe from other
local users: made 0700, refused when someone else made them, written without following a planted link."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from cudalab.errors import UsageError
from cudalab.files import _open_temp

__all__ = ["private_folder", "write_private"]


def private_folder(name: str) -> Path:
    """This user's own folder ``$TMPDIR/NAME-UID``, made with mode 0700: one no other local user can write in.

    The name is predictable (a stable name keeps compiler caches warm), so another user may have made it
    first, to plant a symlink in it that a later write would follow. An existing one is used only when it
    is a real folder (not a symlink), owned by this user and not writable by group or others.

    Raises:
        UsageError: one line naming the folder, what is wrong with it and what to do.
    """
    uid = os.getuid() if hasattr(os, "getuid") else None
    folder = Path(tempfile.gettempdir()) / f"{name}-{uid if uid is not None else 0}"
    fix = "remove it, or set TMPDIR to a folder of your own"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UsageError(f"cannot make the private folder {folder} ({exc.strerror or exc}); "
                         "set TMPDIR to a folder of your own") from None
    try:
        st = os.lstat(folder)
    except OSError as exc:
        raise UsageError(f"cannot use the private folder {folder} ({exc.strerror or exc})") from None
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{folder} is a symlink, not a private folder cudalab made: {fix}")
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{folder} is a file, not the private folder cudalab keeps there: {fix}")
    if uid is not None and st.st_uid != uid:
        raise UsageError(f"{folder} belongs to another user (uid {st.st_uid}), who could plant files in it: "
                         "set TMPDIR to a folder of your own")
    if st.st_mode & 0o022:
        raise UsageError(f"{folder} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}), who could "
                         f"plant files in it: chmod 700 it, {fix}")
    return folder


def write_private(folder: Path, name: str, text: str) -> Path:
    """Write ``text`` as ``folder/name`` (a :func:`private_folder`) unless it already holds exactly that.

    Never follows a symlink at that name, neither to read nor to write: the file is made under a fresh
    name (``O_EXCL``) and renamed over whatever is there, which replaces a link, never its target.

    Raises:
        UsageError: the folder cannot be written.
    """
    path = folder / name
    data = text.encode("utf-8")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:  # missing, a symlink (ELOOP), unreadable: written anew
        same = False
    else:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            same = stat.S_ISREG(st.st_mode) and st.st_size == len(data) and f.read(len(data) + 1) == data
    if same:
        return path
    try:
        fd, tmp = _open_temp(folder, name)
    except OSError as exc:
        raise UsageError(f"cannot write in {folder} ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise UsageError(f"cannot write {path} ({exc.strerror or exc})") from None
        raise
    return path
