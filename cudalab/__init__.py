"""cudalab: a command-line lab for CUDA kernel variants.

The public Python surface, imported on first use so ``import cudalab`` stays light (no pycuda, no
rich, no NumPy until a name needs them)::

    import cudalab
    rec = cudalab.run("transpose", variants=["naive", "bankopt"], n=4096)   # a RunRecord
    old = cudalab.load_record("base.json")
    cmp = cudalab.compare_runs(old, rec)                                  # verdicts per row
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: name -> (module, attribute): what ``cudalab.<name>`` is, imported when first used.
_LAZY = {
    "run": ("cudalab.api", "run"),
    "tune": ("cudalab.tuning", "tune"),
    "tune_kernel": ("cudalab.tuning.kernel", "tune_kernel"),
    "judge": ("cudalab.judging", "judge"),
    "Judge": ("cudalab.judging", "Judge"),
    "load_record": ("cudalab.api", "load_record"),
    "save_record": ("cudalab.records.results", "save_record"),
    "RunRecord": ("cudalab.records.results", "RunRecord"),
    "RunPoint": ("cudalab.records.results", "RunPoint"),
    "Result": ("cudalab.records.results", "Result"),
    "Status": ("cudalab.records.results", "Status"),
    "compare_runs": ("cudalab.records.compare", "compare"),
    "Comparison": ("cudalab.records.compare", "Comparison"),
    "Family": ("cudalab.families", "Family"),
    "SetupContext": ("cudalab.families", "SetupContext"),
    "Case": ("cudalab.families", "Case"),
    "family": ("cudalab.catalog", "family"),
    "load_catalog": ("cudalab.catalog", "load_catalog"),
    "Problem": ("cudalab.problems", "Problem"),
    "Output": ("cudalab.problems", "Output"),
    "Scratch": ("cudalab.problems", "Scratch"),
    "Scalar": ("cudalab.problems", "Scalar"),
    "Tolerance": ("cudalab.problems", "Tolerance"),
    "Library": ("cudalab.problems", "Library"),
    "Kernel": ("cudalab.problems", "Kernel"),
    "Option": ("cudalab.problems", "Option"),
    "Work": ("cudalab.problems", "Work"),
    "Check": ("cudalab.problems", "Check"),
    "Size": ("cudalab.problems", "Size"),
    "ProblemFamily": ("cudalab.problems", "ProblemFamily"),
    "CudalabError": ("cudalab.errors", "CudalabError"),
    "UsageError": ("cudalab.errors", "UsageError"),
    "SkipRow": ("cudalab.errors", "SkipRow"),
    "load_ipython_extension": ("cudalab.magic", "load_ipython_extension"),  # %load_ext cudalab
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    """``cudalab.run`` and the other public names, each imported on first use."""
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module 'cudalab' has no attribute {name!r}")


def __dir__() -> list[str]:
    """What ``dir(cudalab)`` and completion show: the public names (before any is imported), the
    subpackages already imported, and the module's dunders; not the helpers this file imports."""
    helpers = {"annotations", "importlib", "Any"}
    return sorted((set(globals()) - helpers) | set(_LAZY))
