"""The command line: thin commands, one module each (parse, call the library, render).

Family commands (``cudalab transpose``...) are made from the catalog by :mod:`cudalab.cli.family`.
"""

from __future__ import annotations

import os
import sys

from cudalab.cli import basic, calibrate, compare, judge, ncu, report, roofline, sanitize, sass, truth, tune, watch  # noqa: F401  (each module registers its commands)
from cudalab.cli.app import cli

__all__ = ["cli", "main"]


def main() -> None:
    """Console-script entry point (and ``python -m cudalab``'s)."""
    # Saved runs record sys.argv as the command: the name the user typed, not the path of the
    # console script or of cudalab/__main__.py that Python puts there.
    sys.argv[0] = "cudalab"
    folder = os.environ.get("CUDALAB_PROFILE", "")
    if folder and os.path.isdir(folder):  # a developer's question: where the parent's time goes (docs/testing.md)
        import cProfile  # noqa: PLC0415

        prof = cProfile.Profile()
        try:
            prof.runcall(cli, prog_name="cudalab")
        finally:
            prof.dump_stats(os.path.join(folder, f"parent-{os.getpid()}.prof"))
        return
    cli(prog_name="cudalab")
