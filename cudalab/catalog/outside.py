"""Loading a family module from outside the package (``path:FILE`` or ``entry:MODULE``, found by
:mod:`cudalab.catalog.discovery`): the user's module imported safely, its ``PROBLEM`` or ``FAMILY`` taken,
a Problem's whole contract checked as it loads.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import zlib
from pathlib import Path
from typing import Any

from cudalab import catalog
from cudalab.catalog import userimport
from cudalab.catalog.discovery import ENTRY_PREFIX, PATH_PREFIX
from cudalab.errors import CatalogError, CudalabError
from cudalab.families.base import Family
from cudalab.problems.adapter import ProblemFamily
from cudalab.problems.checks import check_problem
from cudalab.problems.contract import Problem

__all__ = ["load_outside", "family_of", "forget"]

#: Outside families' modules imported by this process: key -> its Family (the one cache of them).
_LOADED: dict[str, Any] = {}


def forget(key: str) -> None:
    """Drop the module of ``key`` from the cache (``cudalab watch`` after its Python changed)."""
    _LOADED.pop(key, None)


def load_outside(key: str) -> Any:
    """Import an outside family's module (``path:FILE`` or ``entry:MODULE``) and return its Family.

    The module defines ``PROBLEM`` (a :class:`cudalab.Problem`) or ``FAMILY`` (a Family, or a Problem).

    The module is imported in this process only once a time-limited child has imported it
    (:mod:`cudalab.catalog.userimport`): a module that calls ``os._exit`` or never finishes at import is one
    line, and so is one that raises anything, ``SystemExit`` included.

    Raises:
        CatalogError: one line naming the file (and line) when the module raises on import, ends or
            hangs the process importing it, or defines neither; for a Problem, also naming the field
            of its contract that cannot run (:func:`cudalab.problems.checks.check_problem`).
    """
    if key in _LOADED:
        return _LOADED[key]
    why = userimport.check([key]).get(key)  # os._exit or an endless loop at import: found in a child
    if why:
        raise CatalogError(why)
    if key.startswith(PATH_PREFIX):
        path = key[len(PATH_PREFIX):]
        name = "cudalab_family_" + re.sub(r"\W", "_", Path(path).parent.name if Path(path).name == "__init__.py"
                                          else Path(path).stem) + f"_{zlib.crc32(path.encode()):08x}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise CatalogError(f"{path}: cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        where = path
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:  # noqa: BLE001  (sys.exit and Ctrl-C at import too: one line, not the end)
            sys.modules.pop(name, None)
            raise CatalogError(userimport.import_error(exc, path)) from None
    else:
        modname = key[len(ENTRY_PREFIX):]
        try:
            module = importlib.import_module(modname)
        except BaseException as exc:  # noqa: BLE001  (as above)
            try:
                found = importlib.util.find_spec(modname) if modname in sys.modules else None
            except (ImportError, ValueError):
                found = None
            raise CatalogError(userimport.import_error(exc, getattr(found, "origin", None) or modname)) from None
        where = getattr(module, "__file__", None) or modname
    try:
        fam = family_of(module, where)
        if isinstance(fam, ProblemFamily):  # the whole contract, now: one line naming the file and the field
            check_problem(fam, _variants(key))
    except CudalabError:
        raise
    except Exception as exc:  # noqa: BLE001  (the user's Family or Problem code, run as it loads)
        raise CatalogError(userimport.import_error(exc, where).replace("importing it", "loading it")) from None
    _LOADED[key] = fam
    return fam


def _variants(key: str) -> tuple[Any, ...]:
    """The family.toml variants of the outside family whose module is ``key`` (none if it is not listed)."""
    return next((spec.variants for spec in catalog.load_catalog().values() if spec.module == key), ())


def family_of(module: Any, where: str) -> Any:
    """The Family a module defines: its ``FAMILY`` (a Family or a Problem) or its ``PROBLEM``."""
    for attr in ("FAMILY", "PROBLEM"):
        value = getattr(module, attr, None)
        if isinstance(value, Family):
            return value
        if isinstance(value, Problem):
            return ProblemFamily(value, where)
        if value is not None:
            raise CatalogError(f"{where}: {attr} is a {type(value).__name__}, not a cudalab.Problem or Family")
    raise CatalogError(f"{where}: defines no PROBLEM (a cudalab.Problem) or FAMILY (a cudalab.Family)")
