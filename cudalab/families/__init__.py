"""Family modules: the contract (:mod:`cudalab.families.base`), the data they exchange with the runner
(:mod:`cudalab.families.model`), and :func:`load`.

A family module ``cudalab/families/<module>.py`` (``-`` in the family name becomes ``_``) defines a
subclass of :class:`~cudalab.families.base.Family` and an instance of it named ``FAMILY``.
"""

from __future__ import annotations

import importlib
from typing import Any

from cudalab.errors import CatalogError

from cudalab.families.base import Family
from cudalab.families.model import Case, Check, FamilyOption, Launch, SetupContext, Size, Work, compare, old_name

__all__ = ["Case", "Check", "Family", "FamilyOption", "Launch", "Size", "SetupContext", "Work", "compare", "load"]


#: Modules of this package that hold the contract, not a family: a family.toml naming one is broken.
NOT_FAMILIES = frozenset({"base", "model"})


def load(module_name: str) -> Family:
    """Import ``cudalab.families.<module_name>`` and return its ``FAMILY`` (an outside family's
    ``path:FILE`` / ``entry:MODULE``: its module's ``PROBLEM`` or ``FAMILY``, see :mod:`cudalab.catalog.outside`).

    Raises:
        CatalogError: the module defines no ``FAMILY`` that is a :class:`Family` (a family.toml whose
            ``module`` names ``base``, say).
    """
    if module_name.startswith(("path:", "entry:")):  # a family from outside the package (cudalab.catalog.discovery)
        from cudalab.catalog.outside import load_outside  # noqa: PLC0415  (the user's Size contract: only when asked)

        return load_outside(module_name)
    if module_name in NOT_FAMILIES:
        raise CatalogError(f"module {module_name!r} is cudalab's family contract, not a family module")
    module = importlib.import_module(f"cudalab.families.{module_name}")
    fam = getattr(module, "FAMILY", None)
    if not isinstance(fam, Family):
        raise CatalogError(f"cudalab.families.{module_name} defines no FAMILY (an instance of a Family subclass)")
    return fam


def __getattr__(name: str) -> Any:
    """``Problem``, the advanced form's size type before it served both forms: kept one release, with a warning."""
    return old_name(__name__, name)
