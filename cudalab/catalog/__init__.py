"""Read ``cuda_src/<family>/family.toml`` into frozen dataclasses and validate them.

This is the one extension point: a variant is a ``.cu`` kernel plus a ``[[variant]]`` table, a
family is a folder here plus a module in ``cudalab/families``. Nothing else lists them.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from cudalab.errors import CatalogError, UsageError
from cudalab.catalog.family_toml import METRICS, validated  # noqa: F401  (METRICS re-exported)
from cudalab.catalog.folder import clear_cache, load_family  # noqa: F401  (re-exported: the catalog's readers)
from cudalab.catalog import discovery
from cudalab.catalog.specs import KINDS, FamilySpec, VariantSpec  # noqa: F401  (re-exported: the catalog's records)

#: The kernels of an installed cudalab: the build ships the repository's cuda_src/ as the
#: ``cudalab.kernels`` package data (pyproject.toml, ``package-dir``).
PACKAGED_ROOT = Path(__file__).resolve().parent.parent / "kernels"
#: The kernels of a checkout or an editable install: cuda_src/ beside the cudalab/ package.
CHECKOUT_ROOT = Path(__file__).resolve().parent.parent.parent / "cuda_src"
#: Names a tree of the user's own families instead (overrides both).
SRC_ENV = "CUDALAB_SRC"


_FAMILIES_PACKAGE = "cudalab.families"
#: Modules of the families package that are not families (cudalab.families.NOT_FAMILIES; not imported
#: from there: that package imports NumPy, and the catalog stays light).
_NOT_FAMILIES = frozenset({"base", "model"})


def src_root() -> Path:
    """Return the folder of families, resolved now (not at import, so tests can set the variable).

    ``$CUDALAB_SRC`` when set; else the kernels shipped inside the installed package; else the
    checkout's ``cuda_src/`` (a plain checkout or an editable install).

    Raises:
        CatalogError: one line, when ``CUDALAB_SRC`` is empty or names no folder, or when neither
            default folder exists.
    """
    raw = os.environ.get(SRC_ENV)
    if raw is None:
        for root in (PACKAGED_ROOT, CHECKOUT_ROOT):
            if root.is_dir():
                return root
        raise CatalogError(f"kernel folder not found: neither {PACKAGED_ROOT} (installed) nor {CHECKOUT_ROOT} "
                           f"(checkout) exists; set {SRC_ENV} to a folder of families")
    if not raw.strip():
        # An empty value is more likely a broken script than a wish for no families.
        raise CatalogError(f"{SRC_ENV} is set but empty; unset it to use cudalab's own kernels, or set it "
                           "to a folder of families (<folder>/<family>/family.toml)")
    root = Path(raw).expanduser()
    if not root.exists():
        raise CatalogError(f"{SRC_ENV}={raw}: no such folder")
    if not root.is_dir():
        raise CatalogError(f"{SRC_ENV}={raw} is a file, not a folder of families")
    return root


def __getattr__(name: str) -> Any:
    """Keep ``catalog.SRC_ROOT`` readable for old callers; it is :func:`src_root` evaluated now."""
    if name == "SRC_ROOT":
        return src_root()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def module_exists(module: str) -> bool:
    """Say whether ``cudalab/families/<module>.py`` (or a package) exists, without importing it.

    Only the ``cudalab.families`` package's location is looked up, so neither it (NumPy) nor the
    family module (whatever it imports) is imported.
    """
    package = importlib.util.find_spec(_FAMILIES_PACKAGE)
    if package is None or not package.submodule_search_locations:
        return False
    return importlib.machinery.PathFinder.find_spec(module, list(package.submodule_search_locations)) is not None



class BrokenFamily(NamedTuple):
    """A family folder that could not be loaded: ``(folder, reason)``, the reason one line."""

    folder: Path
    reason: str

    @property
    def name(self) -> str:
        """The family's name (its folder's)."""
        return self.folder.name


@dataclass(frozen=True, eq=False)
class Catalog(Mapping[str, FamilySpec]):
    """Every family under one root: the good ones by name (a read-only mapping, sorted by name)
    and the broken ones beside them, so one bad family.toml does not hide the others.

    Attributes:
        root: the folder the families were read from.
        families: the families that loaded, by name.
        broken: the folders whose family.toml (or module) is broken, with the reason.
    """

    root: Path
    families: Mapping[str, FamilySpec]
    broken: tuple[BrokenFamily, ...] = ()
    origins: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def origin(self, name: str) -> str:
        """Where family ``name`` comes from: ``built-in``, a ``CUDALAB_PATH`` folder or an entry point."""
        return self.origins.get(name, "built-in")

    def __getitem__(self, name: str) -> FamilySpec:
        return self.families[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.families)

    def __len__(self) -> int:
        return len(self.families)

    def broken_reason(self, name: str) -> str | None:
        """Why family ``name`` is broken, or None when it is not (or does not exist)."""
        return next((b.reason for b in self.broken if b.name == name), None)


#: While :func:`held` is active: the catalogs read, by (root, CUDALAB_SRC, CUDALAB_PATH). None: not held.
_HELD: dict[tuple[str | None, str | None, str | None], Catalog] | None = None


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Within the block, :func:`load_catalog` reads the families once and returns that same catalog (for
    the same root and environment): one command or one ``cudalab.run`` reads its catalog once, however
    many parts of it ask (the command line, each point's precheck, the record). Nested blocks share the
    outer one's. Outside a block each call looks at the folders again (each family.toml still parsed once
    per process while its text stays the same)."""
    global _HELD
    if _HELD is not None:
        yield
        return
    _HELD = {}
    try:
        yield
    finally:
        _HELD = None


def reread() -> None:
    """Within a :func:`held` block, read the families again at the next ask (``cudalab watch``: each
    version of a watched session reads the family.toml it runs; each file is still parsed only when its
    text changed)."""
    if _HELD is not None:
        _HELD.clear()


def load_catalog(root: Path | None = None) -> Catalog:
    """Read every family under ``root`` (default :func:`src_root`), each on its own.

    A family that fails to load is recorded in ``Catalog.broken`` and the others still load. With no
    ``root`` given, the families of ``--family-path`` / ``CUDALAB_PATH`` and of the
    ``cudalab.families`` entry points follow (:mod:`cudalab.catalog.discovery`).

    Raises:
        CatalogError: one line, when the root itself is unusable: ``CUDALAB_SRC`` is bad (see
            :func:`src_root`), or the folder holds no ``<family>/family.toml`` at all.
    """
    held_now = _HELD
    key = (None if root is None else str(root), os.environ.get(SRC_ENV), os.environ.get("CUDALAB_PATH"))  # discovery.PATH_ENV
    if held_now is not None and key in held_now:
        return held_now[key]
    cat = _read_catalog(root)
    if held_now is not None:
        held_now[key] = cat
    return cat


def _read_catalog(root: Path | None) -> Catalog:
    """:func:`load_catalog` without :func:`held`: the folders read now."""
    from_env = root is None and os.environ.get(SRC_ENV) is not None
    extend = root is None
    root = root if root is not None else src_root()
    where = f"{SRC_ENV}={root}" if from_env else f"kernel folder {root}"
    if not root.is_dir():
        raise CatalogError(f"{where} not found")
    try:
        folders = sorted(d for d in root.iterdir() if os.path.lexists(d / "family.toml"))  # a FIFO too: said
    except OSError as exc:
        raise CatalogError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    if not folders:
        hint = ("; it is one family's folder, point at its parent" if (root / "family.toml").is_file()
                else " (expected <folder>/<family>/family.toml)")
        raise CatalogError(f"{where} holds no family{hint}")
    good: dict[str, FamilySpec] = {}
    broken: list[BrokenFamily] = []
    for d in folders:
        try:
            spec = load_family(d)
            # Checked here, not in load_family: a family.toml is valid on its own (and tested so),
            # but a command needs the family's code too.
            if spec.module in _NOT_FAMILIES:
                raise CatalogError(f"{d / 'family.toml'}: module {spec.module!r} is cudalab's family contract "
                                   "(cudalab/families/base.py), not a family module; name the family's own module")
            if not module_exists(spec.module):
                raise CatalogError(f"{d / 'family.toml'}: no module {_FAMILIES_PACKAGE}.{spec.module} (a family "
                                   f"needs cudalab/families/{spec.module}.py; 'module' in [family] names another)")
        except CatalogError as exc:
            broken.append(BrokenFamily(d, str(exc)))
        else:
            good[d.name] = spec
    origins: dict[str, str] = {}
    if extend:
        more, bad = discovery.outside(set(good) | {b.name for b in broken})
        for spec, origin in more:
            good[spec.name] = spec
            origins[spec.name] = origin
        broken.extend(BrokenFamily(folder, reason) for folder, reason in bad)
        good = dict(sorted(good.items()))
    return Catalog(root=root, families=MappingProxyType(good), broken=tuple(broken),
                   origins=MappingProxyType(origins))


def family(name: str, root: Path | None = None) -> FamilySpec:
    """Return one family by name.

    Raises:
        CatalogError: the family exists but is broken (its reason).
        UsageError: no such family, naming the valid ones.
    """
    cat = load_catalog(root)
    if name in cat:
        return cat[name]
    reason = cat.broken_reason(name)
    if reason is not None:
        raise CatalogError(f"broken family {name}: {reason}")
    if not len(cat):  # every family folder is broken: say so, not "valid: " and nothing
        broken = "; ".join(f"{b.name}: {b.reason}" for b in cat.broken)
        raise CatalogError(f"no family {name!r}, and no family under {cat.root} works ({broken})")
    raise UsageError(f"no family {name!r}; valid: {', '.join(cat)}")
