"""Your own problem: the public contract (:mod:`cudalab.problems.contract`), its adapter onto the
family contract (:mod:`cudalab.problems.adapter`) and problems defined inline for ``cudalab.run``
(:mod:`cudalab.problems.inline`).

A problem folder is ``<name>/family.toml`` (its variants), ``<name>/<name>.py`` (``PROBLEM = Problem(...)``)
and its ``.cu`` kernels; put the folder's parent on ``--family-path`` or ``CUDALAB_PATH``.
"""

from cudalab.problems.adapter import DeviceView, LaunchContext, ProblemFamily
from cudalab.problems.contract import (
    Check,
    Kernel,
    Library,
    Option,
    Output,
    Problem,
    Scalar,
    Scratch,
    Size,
    Tolerance,
    Work,
    ctype,
)

__all__ = ["Check", "DeviceView", "Kernel", "LaunchContext", "Library", "Option", "Output", "Problem",
           "ProblemFamily", "Scalar", "Scratch", "Size", "Tolerance", "Work", "ctype"]
