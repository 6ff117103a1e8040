"""Facts about the host a run happened on, for the saved record (pure Python; no GPU)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from importlib import metadata
from typing import Any

from cudalab import catalog


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _git_revision(root: Path, *paths: str) -> str:
    """HEAD of the checkout at ``root`` (12 characters), ``+dirty`` when ``paths`` under it have changes (untracked
    files too); '' outside git."""
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=5)
        if rev.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", *paths], capture_output=True,
                               text=True, timeout=5)
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def kernel_revision() -> str:
    """The git revision of the kernel folder (``+dirty`` when it has changes), or '' outside git."""
    return _git_revision(catalog.src_root(), ".")


def code_revision(root: Path | None = None) -> str:
    """The git revision of cudalab's own checkout, ``+dirty`` when its code (``cudalab``, ``scripts``,
    ``cuda_src``) differs from it; '' outside git. A GPU machine gets a session's working tree over the
    session's first commit: HEAD alone would name code that did not run, so a call that knows the revision
    says it in ``CUDALAB_CODE`` (``CUDALAB_CODE=$(git rev-parse --short HEAD)`` typed where the tree was
    committed), which this returns as it is."""
    if os.environ.get("CUDALAB_CODE"):
        return os.environ["CUDALAB_CODE"]
    return _git_revision(root or Path(__file__).resolve().parents[2], "cudalab", "scripts", "cuda_src")


def facts() -> dict[str, Any]:
    """Host name, Python, NumPy, pycuda and CuPy versions, and the kernel tree's revision."""
    return {
        "hostname": platform.node(), "python": platform.python_version(), "numpy": _version("numpy"),
        "pycuda": _version("pycuda"), "cupy": _version("cupy-cuda13x") or _version("cupy-cuda12x") or _version("cupy"),
        "kernel_revision": kernel_revision(),
    }
