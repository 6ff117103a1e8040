"""The command line: thin commands, one module each (parse, call the library, render).

Family commands (``cudalab transpose``...) are made from the catalog by :mod:`cudalab.cli.family`.
"""

from __future__ import annotations

from cudalab.cli import basic, compare, ncu, report, sanitize  # noqa: F401  (each module registers its commands)
from cudalab.cli.app import cli

__all__ = ["cli", "main"]


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="cudalab")
