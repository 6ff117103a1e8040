"""What a watched run is built from: the rows a request selects, the files each row's build reads, and
the family's own files, with a fingerprint (sha256) of a file's text (no GPU, no click)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path

from cudalab import build
from cudalab.plan import RunRequest
from cudalab.catalog import user
from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.errors import CatalogError

__all__ = ["digest", "family_files", "forget_module", "module_file", "row_sources", "selected"]


def selected(spec: FamilySpec, req: RunRequest) -> list[VariantSpec]:
    """The rows a point runs, in order: the selected variants, then its ``--add`` kernels (as
    :func:`cudalab.plan.precheck` selects them, without its checks).

    Raises:
        UsageError: a bad ``--variant`` list or an ``--add`` name that is a variant's.
    """
    rows = [] if req.add and (req.variants or "").strip() == "none" else spec.select(req.variants)
    return rows + user.variants(req.add, spec)


def module_file(spec: FamilySpec) -> Path | None:
    """The family module's file: ``path:FILE`` for an outside family, else where Python finds it."""
    if spec.module.startswith("path:"):
        return Path(spec.module[len("path:"):])
    name = spec.module[len("entry:"):] if spec.module.startswith("entry:") else f"cudalab.families.{spec.module}"
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return Path(found.origin) if found is not None and found.origin else None


def family_files(spec: FamilySpec) -> list[Path]:
    """The family's own files: its ``family.toml`` and its module."""
    files = [spec.directory / "family.toml"]
    mod = module_file(spec)
    return files + ([mod] if mod is not None else [])


def row_sources(spec: FamilySpec, v: VariantSpec) -> list[Path]:
    """The files a kernel row is compiled from: its source and the local files it includes (none for
    host, driver and library rows)."""
    if v.kind != "kernel" or not v.source:
        return []
    src = Path(v.source) if user.is_user(v) else spec.directory / v.source
    return [src] + build.includes(src)


def digest(path: Path) -> str:
    """sha256 of a file's bytes ('' when it cannot be read: a file being replaced, or gone)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def forget_module(spec: FamilySpec) -> None:
    """Make the next :func:`cudalab.families.load` of this family read its module again (it changed).

    Raises:
        CatalogError: the changed module does not import (one line naming it).
    """
    if spec.module.startswith(("path:", "entry:")):
        from cudalab.catalog import outside  # noqa: PLC0415  (a user's family changed: only then)

        outside.forget(spec.module)  # the one cache of outside families' modules
        if spec.module.startswith("path:"):
            return
        name = spec.module[len("entry:"):]
    else:
        name = f"cudalab.families.{spec.module}"
    mod = sys.modules.get(name)
    if mod is None:
        return
    try:
        importlib.reload(mod)
    except Exception as exc:
        raise CatalogError(f"{getattr(mod, '__file__', name)}: importing it raised {type(exc).__name__}: {exc}") from None


# --- the session ---------------------------------------------------------------------------------------
