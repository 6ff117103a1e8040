"""The command line: thin commands, one module each (parse, call the library, render).

Family commands (``cudalab transpose``...) are made from the catalog by :mod:`cudalab.cli.family`.
"""

from __future__ import annotations

import sys

from cudalab.cli import basic, calibrate, compare, judge, ncu, report, roofline, sanitize, sass, truth, tune, watch  # noqa: F401  (each module registers its commands)
from cudalab.cli.app import cli

__all__ = ["cli", "main"]


def main() -> None:
    """Console-script entry point (and ``python -m cudalab``'s)."""
    # Saved runs record sys.argv as the command: the name the user typed, not the path of the
    # console script or of cudalab/__main__.py that Python puts there.
    sys.argv[0] = "cudalab"
    cli(prog_name="cudalab")
