"""Family modules: the contract (:mod:`cudalab.families.base`), the data they exchange with the runner
(:mod:`cudalab.families.model`), and :func:`load`.

A family module ``cudalab/families/<module>.py`` (``-`` in the family name becomes ``_``) defines a
subclass of :class:`~cudalab.families.base.Family` and an instance of it named ``FAMILY``.
"""

from __future__ import annotations

import importlib

from cudalab.families.base import Family
from cudalab.families.model import Case, Check, FamilyOption, Launch, Problem, Work, compare

__all__ = ["Case", "Check", "Family", "FamilyOption", "Launch", "Problem", "Work", "compare", "load"]


def load(module_name: str) -> Family:
    """Import ``cudalab.families.<module_name>`` and return its ``FAMILY``."""
    module = importlib.import_module(f"cudalab.families.{module_name}")
    return module.FAMILY
