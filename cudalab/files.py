"""Output files: check a path before the run, write it atomically after.

A run can take minutes of GPU time; an output path that cannot be written must be refused before
it starts (``check_output_path``), and the file must never be left half-written or with other
permissions than the user expects (``atomic_write``). Pure: no click, no rich.
"""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from cudalab.errors import UsageError

if TYPE_CHECKING:  # results imports this module (atomic_write)
    from cudalab.results import Result

__all__ = ["atomic_write", "check_output_dir", "check_output_path", "write_csv", "write_json"]


def _writable_folder(folder: Path, path: str | os.PathLike, what: str) -> None:
    """Refuse ``path`` unless ``folder`` (where it goes) is an existing, writable folder."""
    shown = str(folder) or "."
    if not folder.exists():
        raise UsageError(f"{what} {path}: folder {shown} does not exist")
    if not folder.is_dir():
        raise UsageError(f"{what} {path}: {shown} is not a folder")
    # The atomic write creates its temporary file beside the target, so the folder itself must
    # be writable even when the target file already is.
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: cannot write in folder {shown}")


def check_output_path(path: str | os.PathLike, what: str) -> Path:
    """Check that a result file can be written there, before any work starts.

    Args:
        path: the file the user named.
        what: the option that named it (``--json``), for the message.

    Returns:
        ``path`` as a :class:`~pathlib.Path` (not resolved: messages show what the user typed).

    Raises:
        UsageError: one line, when the path is empty or a folder, when its folder does not exist
            or is not a folder, or when the file or its folder is not writable.
    """
    if not str(path).strip():
        raise UsageError(f"{what} needs a file name (got an empty one)")
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{what} {path} is a folder; name a file in it")
    _writable_folder(p.parent, path, what)
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{what} {path}: the file is not writable")
    return p


def check_output_dir(path: str | os.PathLike, what: str) -> Path:
    """Check that a folder of outputs (``--log DIR``) can be created or written, before any work.

    The folder itself may be new (it is created when the first file is written); its parent must
    exist, so a typo in a parent folder is refused instead of silently creating a tree.

    Raises:
        UsageError: one line, when the path is empty or an existing file, or when the folder (or
            its parent, when it does not exist yet) is not a writable folder.
    """
    if not str(path).strip():
        raise UsageError(f"{what} needs a folder name (got an empty one)")
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UsageError(f"{what} {path} is a file, not a folder")
    _writable_folder(p if p.is_dir() else p.parent, path, what)
    return p


def _open_temp(folder: Path, name: str) -> tuple[int, Path]:
    """Create a new, empty temporary file beside the target.

    Not ``tempfile.mkstemp``: it creates the file with mode 0600, which the rename would hand on
    to the result. ``os.open`` with 0666 lets the kernel apply the process umask, as for any new
    file, without reading the umask (``os.umask`` can only be read by setting it, racing threads).
    """
    for _ in range(100):
        tmp = folder / f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name} in {folder}")


def atomic_write(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename.

    A crash, a full disk or Ctrl-C never leaves half a file: the old file (if any) stays as it
    was. A replaced file keeps its permission bits; a new one gets ``0666 & ~umask``. Missing
    parent folders are created (callers refuse typos earlier with :func:`check_output_path`).

    Raises:
        OSError: the folder or file cannot be written (the old file is untouched).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = _open_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """Write the full run (environment, problem, raw samples) as JSON, atomically."""
    atomic_write(path, json.dumps(payload, indent=2, default=str) + "\n")


CSV_FIELDS = ["variant", "kind", "status", "block", "grid", "median_ms", "iqr_ms", "min_ms", "n",
              "gbs", "gflops", "pct_roofline", "max_error", "reason"]


def write_csv(path: str | os.PathLike, results: Sequence[Result]) -> None:
    """Write one row per variant as CSV, atomically."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    w.writeheader()
    for r in results:
        s = r.stats
        w.writerow({
            "variant": r.variant, "kind": r.kind, "status": r.status, "block": r.block, "grid": r.grid,
            "median_ms": s.median if s else "", "iqr_ms": s.iqr if s else "", "min_ms": s.min if s else "",
            "n": s.n if s else "", "gbs": r.gbs or "", "gflops": r.gflops or "",
            "pct_roofline": r.pct_roofline or "", "max_error": "" if r.max_error is None else r.max_error,
            "reason": r.reason,
        })
    atomic_write(path, buf.getvalue())
