"""One family folder read: its family.toml parsed and validated into a frozen spec (cached per text).

Used by the catalog (:mod:`cudalab.catalog`) for the built-in families and by :mod:`cudalab.catalog.discovery`
for folders outside the package.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from cudalab.catalog.family_toml import validated
from cudalab.catalog.specs import FamilySpec
from cudalab.errors import CatalogError, UsageError
from cudalab.files import read_text

__all__ = ["clear_cache", "load_family"]


#: Every family.toml this process has parsed: its path -> (its text, its tables or the parse error). A
#: command reads the catalog several times (the command line, the precheck of each point, the record), and
#: parsing every family.toml each time cost ~40 ms a read; keyed on the text, so an edited file is parsed again.
_PARSED: dict[str, tuple[str, dict[str, Any] | str]] = {}
#: The specs built from them: ``str(directory)`` -> (the text, the spec). A hit still checks that the kernel
#: sources are there (a .cu removed since is refused as a fresh read would).
_SPECS: dict[str, tuple[str, FamilySpec]] = {}


def clear_cache() -> None:
    """Forget every family.toml parsed in this process (tests; a long-lived process that wants a fresh read
    need not: an edited file is parsed again)."""
    _PARSED.clear()
    _SPECS.clear()


def _tables(path: Path, text: str) -> dict[str, Any]:
    """``tomllib.loads(text)`` of ``path``, once per process per text (the dict is shared: read, never change it).

    Raises:
        CatalogError: not TOML (the same message every time it is asked).
    """
    hit = _PARSED.get(str(path))
    if hit is None or hit[0] != text:
        try:
            hit = (text, tomllib.loads(text))
        except (tomllib.TOMLDecodeError, RecursionError) as exc:
            hit = (text, f"{path}: {exc if not isinstance(exc, RecursionError) else 'nested too deeply'}")
        _PARSED[str(path)] = hit
    if isinstance(hit[1], str):
        raise CatalogError(hit[1])
    return hit[1]


def _sources_present(spec: FamilySpec) -> bool:
    return all((spec.directory / v.source).is_file() for v in spec.variants if v.kind == "kernel")


def load_family(directory: Path) -> FamilySpec:
    """Read and validate one family folder (parsed once per process while its text stays the same).

    Raises:
        CatalogError: naming the file and the rule broken.
    """
    path = directory / "family.toml"
    try:  # bounded: a family.toml is a page of text, never /dev/zero or a gigabyte
        text = read_text(path, limit=2**20)
    except UsageError as exc:
        raise CatalogError(str(exc)) from None
    hit = _SPECS.get(str(directory))
    if hit is not None and hit[0] == text and _sources_present(hit[1]):
        return hit[1]
    spec = validated(directory, path, _tables(path, text))
    _SPECS[str(directory)] = (text, spec)
    return spec
