"""The ``cudalab`` command's entry point: start the GPU worker the command line will want, then parse.

A worker's Python, pycuda and CUDA context take about as long to come up as this process takes to
import click, rich and NumPy and plan the run; started first, the two overlap (see
:func:`cudalab.execute.local.process.prestart`). This module imports nothing heavy before that.
"""

from __future__ import annotations

import sys


def _tolerant_streams() -> None:
    """Let a terminal that cannot show '–', '·' or '≥' (``PYTHONIOENCODING=ascii``, a C locale) get '?'
    for them instead of a UnicodeEncodeError in the middle of a table."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and getattr(stream, "errors", "") == "strict":
            stream.reconfigure(errors="replace")


def main() -> None:
    """Console-script entry point (``cudalab``, ``python -m cudalab``)."""
    _tolerant_streams()
    try:  # Ctrl-C while the imports run comes before click's own handling: a traceback of an import otherwise
        from cudalab.catalog.discovery import add_paths, split_global
        from cudalab.execute.local.process import prestart

        paths, rest = split_global(sys.argv[1:])
        if paths:  # before the early worker starts: it inherits CUDALAB_PATH and finds the same families
            add_paths(paths)
        prestart(rest)
        from cudalab.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("cudalab: interrupted while starting; nothing was run\n")
        sys.exit(130)
    cli_main()
