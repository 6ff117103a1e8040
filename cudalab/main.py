"""The ``cudalab`` command's entry point: start the GPU worker the command line will want, then parse.

A worker's Python, pycuda and CUDA context take about as long to come up as this process takes to
import click, rich and NumPy and plan the run; started first, the two overlap (see
:func:`cudalab.worker.process.prestart`). This module imports nothing heavy before that.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point (``cudalab``, ``python -m cudalab``)."""
    from cudalab.worker.process import prestart

    prestart(sys.argv[1:])
    from cudalab.cli import main as cli_main

    cli_main()
