"""The rivals' rows a judge measured (reference, best variant) and the point's roofline, kept for the next
candidate of the same point on the same GPU for :data:`KEEP_S` seconds: in the judge's memory and on disk.

A loop that calls ``cudalab judge`` (a new process each call) would otherwise measure three rows and a
roofline copy for every candidate, one of them through CuPy's import; a loop that calls ``cudalab.judge``
keeps them in its process. The key names everything the figures depend on: the GPU (its name, index,
memory, driver and ``CUDA_VISIBLE_DEVICES``), cudalab's version, the point's request without its candidate,
the rows, and the bytes of the family's code (its kernels and its Python module); an entry older than
:data:`KEEP_S` is measured again, as one whose key differs in anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cudalab import __version__, private
from cudalab.records.results import Result, Roofline

__all__ = ["KEEP_S", "Kept", "key", "code_digest", "load", "save"]

#: Seconds a measured reference, best row and roofline serve later candidates of the same point and GPU.
KEEP_S = 60.0
#: The folder (under :func:`cudalab.private.private_folder`) and the files' prefix.
FOLDER, PREFIX = "cudalab-judge", "rivals-"


@dataclass(frozen=True)
class Kept:
    """Rows and a roofline measured ``age_s`` seconds ago (``roofline`` None: the point had none)."""

    rows: dict[str, Result]
    roofline: Roofline | None
    roofline_note: str
    measured: float  # time.time() when measured

    @property
    def age_s(self) -> float:
        """Seconds since they were measured."""
        return max(0.0, time.time() - self.measured)


def code_digest(directory: Path | None, module_file: str | None) -> str:
    """A hash of a family's code: every file of its kernel folder and its Python module ('' parts where absent)."""
    h = hashlib.sha256()
    files = sorted(p for p in Path(directory).rglob("*") if p.is_file() and "__pycache__" not in p.parts) \
        if directory else []
    for p in [*files, *([Path(module_file)] if module_file else [])]:
        try:
            h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
        except OSError:
            h.update(str(p).encode() + b"\0missing\0")
    return h.hexdigest()


def key(gpu: dict[str, Any], request: Any, rows: tuple[str, ...], code: str) -> str:
    """The key of a point's rivals on one GPU (see the module's docstring for what it names)."""
    who = {k: gpu.get(k) for k in ("name", "index", "total_memory", "driver_version", "cuda_version", "sm_count")}
    text = json.dumps([who, os.environ.get("CUDA_VISIBLE_DEVICES"), __version__, repr(request), list(rows), code],
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def folder() -> Path:
    """Where the entries are written (this user's private folder; tests point it elsewhere)."""
    return private.private_folder(FOLDER)


def _path(k: str) -> Path:
    return folder() / f"{PREFIX}{k}.json"


def load(k: str, keep_s: float = KEEP_S) -> Kept | None:
    """The entry under ``k`` if one younger than ``keep_s`` is on disk (else None: unreadable counts as none)."""
    if keep_s <= 0:
        return None
    try:
        d = json.loads(_path(k).read_text())
        kept = Kept({n: Result.from_dict(r) for n, r in d["rows"].items()}, Roofline.from_dict(d.get("roofline")),
                    str(d.get("roofline_note") or ""), float(d["measured"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return kept if 0 <= time.time() - kept.measured < keep_s else None


def save(k: str, kept: Kept) -> None:
    """Write the entry under ``k`` (atomically; a failed write leaves the next call to measure again)."""
    d = {"measured": kept.measured, "rows": {n: r.to_dict() for n, r in kept.rows.items()},
         "roofline": kept.roofline.to_dict() if kept.roofline is not None else None,
         "roofline_note": kept.roofline_note}
    try:
        private.write_private(folder(), _path(k).name, json.dumps(d))
    except OSError:
        pass
