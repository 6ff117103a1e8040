"""Every file cudalab writes or reads goes through here.

Writing (JSON, CSV, plots, records, logs): a run can take minutes of GPU time, so an output path that
cannot be written is refused before it starts (:func:`check_output_path`); the file is written to a
temporary file in the target's own folder and renamed over it (:func:`atomic_write`), so a full disk
or Ctrl-C never leaves half a file and never destroys the old one. A symlink is written *through*
(its target is replaced, the link stays); a target that is not a regular file (``/dev/null``, a
folder, a pipe), a read-only file (for root too), a file with other hard links (the rename would split
them) and a file the command reads (a link to its input) are refused, never replaced.

Reading (saved runs, ncu files, family.toml, cache entries): :func:`read_bytes` refuses what is not
a regular file (``/dev/zero`` reads forever) and what is larger than a limit, and
:func:`load_json` also refuses nesting deeper than a limit (Python's parser recurses). Pure: no
click, no rich.
"""

from __future__ import annotations

import csv
import io
import json
import sys
import os
import re
import secrets
import stat
from itertools import accumulate, repeat
from operator import sub
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from cudalab.errors import CudalabError, UsageError

if TYPE_CHECKING:  # results imports this module (atomic_write)
    from cudalab.records.results import Result

__all__ = ["MAX_DEPTH", "MAX_READ", "WriteError", "atomic_write", "check_input", "check_output_dir", "check_output_path",
           "load_json", "read_bytes", "read_text", "write_bytes", "write_csv", "write_json"]

#: The largest file cudalab reads (bytes): a saved sweep of 1,000 points with raw samples is a few MB.
MAX_READ = 256 * 2**20
#: The deepest nesting of brackets a JSON file may have (a run record has 6).
MAX_DEPTH = 64


class WriteError(CudalabError, OSError):
    """A file could not be written; the old file (if any) is untouched.

    Also an :class:`OSError`, so callers that catch those (a child process writing its result) still do.
    """

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(errno, message)
        self.message = message

    def __str__(self) -> str:  # one line, without OSError's "[Errno 28]" prefix
        return self.message


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


def _target(path: str | os.PathLike) -> Path:
    """The file a write lands in: a symlink's final target (written through, the link kept)."""
    return Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)


def _regular(path: str | os.PathLike, shown: str, missing_ok: bool = False) -> int | None:
    """The size of ``path`` when it is a regular file (symlinks followed); None when it does not exist
    and ``missing_ok`` (a new output file).

    Raises:
        UsageError: one line: no such file (unless ``missing_ok``), a folder, or not a regular file
            (``/dev/null``, ``/dev/zero``, a pipe): a write would replace it, a read would never end.
    """
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):  # for outputs, a parent that is a file is named later
        if missing_ok:
            return None
        raise UsageError(f"{shown}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{shown}: cannot use it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{shown} is a folder, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{shown} is not a regular file (a device, a pipe or a socket)")
    return st.st_size


def _refuse_special(target: Path, path: str | os.PathLike, what: str) -> None:
    """Refuse an output target that exists and is not a regular file: renaming over it would replace it."""
    _regular(target, f"{what} {path}", missing_ok=True)


def check_output_path(path: str | os.PathLike, what: str, inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """Check that a result file can be written there, before any work starts.

    Args:
        path: the file the user named (a symlink is followed: its target is what is written).
        what: the option that named it (``--json``), for the message.
        inputs: files the command reads (a saved run, another output): the output may not be one of
            them, under any name (a symlink or a hard link to it).

    Returns:
        ``path`` as a :class:`~pathlib.Path` (not resolved: messages show what the user typed).

    Raises:
        UsageError: one line, when the path is empty, a folder or not a regular file, when its folder
            does not exist or is not a folder, when the file or its folder is not writable, when the
            file is read-only (no write bit: refused for root too) or has other hard links, or when it
            is one of ``inputs``.
    """
    if not str(path).strip():
        raise UsageError(f"{what} needs a file name (got an empty one)")
    if str(path).endswith(("/", os.sep)):  # Path() drops the slash: 'run.png/' wrote a file run.png
        raise UsageError(f"{what} {path} ends in '/', a folder's name: give a file name")
    p = Path(path)
    target = _target(p)
    _refuse_special(target, path, what)
    _writable_folder(target.parent, path, what)
    for other in inputs:
        if _same_file(target, other):
            raise UsageError(f"{what} {path} is {other}, which this command also reads or writes: "
                             "give another file name")
    try:
        st = os.stat(target)
    except OSError:  # a new file
        return p
    _refuse_replacing(st, target, f"{what} {path}", UsageError)
    return p


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two names are one file: the same path once links are resolved, or the same inode."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def _refuse_replacing(st: os.stat_result, target: Path, shown: str, error: type) -> None:
    """Refuse to replace a file that says it must not be (no write bit) or that has other names.

    The write renames a new file over the target: the kernel checks only the folder's permission, so a
    read-only file (0444) would be replaced (by root, or by its owner), and a hard-linked one split: the
    other names would keep the old content while this one got the new. Both are said instead.
    """
    if not st.st_mode & 0o222:
        raise error(f"{shown}: the file is read-only (mode {stat.S_IMODE(st.st_mode):04o}); "
                    "make it writable or give another file name")
    if not os.access(target, os.W_OK):
        raise error(f"{shown}: the file is not writable")
    if st.st_nlink > 1:
        raise error(f"{shown}: the file has {st.st_nlink} hard links; writing it would leave the other "
                    "names with the old content: remove the other links or give another file name")


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


def write_bytes(path: str | os.PathLike, data: bytes, what: str = "") -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    A crash, a full disk or Ctrl-C never leaves half a file: the old file (if any) stays as it
    was. A replaced file keeps its permission bits; a new one gets ``0666 & ~umask``. A symlink is
    written through (its target replaced, the link kept). Missing parent folders are created
    (callers refuse typos earlier with :func:`check_output_path`).

    Args:
        path: the file.
        data: its new content.
        what: the option that named it (``--plot``), for messages.

    Raises:
        UsageError: the target exists and is not a regular file (a folder, ``/dev/null``).
        WriteError: the folder or file cannot be written, or the file is read-only or has other hard
            links (the old file is untouched).
    """
    shown = f"{what} {path}" if what else str(path)
    target = _target(path)
    _refuse_special(target, path, what or "cannot write")
    try:
        st: os.stat_result | None = target.stat()
    except OSError:  # a new file (or one the write below names)
        st = None
    if st is not None:
        _refuse_replacing(st, target, f"cannot write {shown}", WriteError)  # as check_output_path did
    mode = stat.S_IMODE(st.st_mode) if st is not None else None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _open_temp(target.parent, target.name)
    except OSError as exc:
        raise WriteError(f"cannot write {shown}: {exc.strerror or exc}", exc.errno) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            kept = " (the old file is unchanged)" if mode is not None else ""
            raise WriteError(f"cannot write {shown}: {exc.strerror or exc}{kept}", exc.errno) from None
        raise


def atomic_write(path: str | os.PathLike, text: str, what: str = "") -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: see :func:`write_bytes`."""
    write_bytes(path, text.encode("utf-8"), what)


# --- reading --------------------------------------------------------------------------------------------

def check_input(path: str | os.PathLike, what: str = "") -> int:
    """Refuse, in one line, what cannot be read as a file: missing, a folder, a device or a pipe.

    Returns:
        The file's size in bytes.

    Raises:
        UsageError: naming the path (after ``what``) and what it is instead.
    """
    return _regular(path, f"{what} {path}" if what else str(path)) or 0


def read_bytes(path: str | os.PathLike, what: str = "", limit: int = MAX_READ) -> bytes:
    """Read a whole regular file of at most ``limit`` bytes.

    Args:
        path: the file.
        what: how messages name it (``--import``); messages start with the path otherwise.
        limit: the most bytes read; a larger file is refused rather than read into memory.

    Raises:
        UsageError: one line: no such file, a folder, not a regular file (``/dev/zero``, a pipe),
            larger than ``limit``, or unreadable.
    """
    shown = f"{what} {path}" if what else str(path)
    size = check_input(path, what)
    if size > limit:
        raise UsageError(f"{shown} is {_mib(size)}; cudalab reads files up to {_mib(limit)}")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)  # the file may have grown since the stat
    except FileNotFoundError:
        raise UsageError(f"{shown}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{shown}: cannot read it ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise UsageError(f"{shown} is larger than {_mib(limit)}, the most cudalab reads")
    return data


def read_text(path: str | os.PathLike, what: str = "", limit: int = MAX_READ) -> str:
    """Read a UTF-8 text file through :func:`read_bytes`.

    Raises:
        UsageError: as :func:`read_bytes`, and for a file that is not UTF-8 text (binary bytes are
            named by their offset, never printed).
    """
    data = read_bytes(path, what, limit)
    shown = f"{what} {path}" if what else str(path)
    if data[:2] == b"\x1f\x8b":  # gzip (the committed runs are .json.gz): its text, bounded as a file's
        import gzip  # noqa: PLC0415
        import zlib  # noqa: PLC0415

        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as z:
                data = z.read(limit + 1)
        except (OSError, EOFError, zlib.error) as exc:
            raise UsageError(f"{shown}: a gzip file that does not decompress ({exc})") from None
        if len(data) > limit:
            raise UsageError(f"{shown} decompresses to more than {_mib(limit)}, the most cudalab reads")
    if b"\0" in data:
        raise UsageError(f"{shown} is a binary file (a NUL byte at offset {data.index(0)}), not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{shown} is not UTF-8 text (byte {exc.start})") from None


#: Bytes other than JSON's brackets and quotes (deleted before the depth is counted).
_NOT_MARKS = bytes(c for c in range(256) if chr(c) not in '[]{}"')
#: An opening bracket as 2, a closing one as 0: one less is the step in depth.
_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON text (brackets inside strings do not count).

    Passes in C (a Python loop over a 200 MB record's brackets took seconds): escaped backslashes and quotes out
    (left to right, as JSON reads them), then all but brackets and quotes, then the strings."""
    data = text.encode("utf-8", "surrogatepass").replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = re.sub(rb'"[^"]*"', b"", data.translate(None, _NOT_MARKS)).replace(b'"', b"")
    return max(0, max(accumulate(map(sub, marks.translate(_STEPS), repeat(1))), default=0))


def load_json(path: str | os.PathLike, what: str = "", limit: int = MAX_READ, max_depth: int = MAX_DEPTH) -> Any:
    """Read a JSON file with a size and a nesting limit.

    Raises:
        UsageError: as :func:`read_text`; not JSON (with the line); nested deeper than ``max_depth``.
    """
    return parse_json(read_text(path, what, limit), f"{what} {path}" if what else str(path), max_depth)


def parse_json(text: str, shown: str, max_depth: int = MAX_DEPTH) -> Any:
    """JSON text read from a file (``shown`` names it), by the rule every file cudalab reads follows.

    Raises:
        UsageError: not JSON (with the line); nested deeper than ``max_depth``; a number too long to read.
    """
    depth = json_depth(text)
    if depth > max_depth:
        raise UsageError(f"{shown}: JSON nested {depth} levels deep; cudalab reads at most {max_depth}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{shown}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:  # the scan above is the guard; this is its backstop
        raise UsageError(f"{shown}: JSON nested too deeply") from None
    except ValueError:  # Python refuses integers of more than 4,300 digits (a quadratic conversion)
        raise UsageError(f"{shown}: holds a number too long to read (more than {sys.get_int_max_str_digits():,} "
                         f"digits)") from None


def _mib(n: int) -> str:
    return f"{n:,} bytes" if n < 10 * 2**20 else f"{n / 2**20:,.1f} MiB"


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
