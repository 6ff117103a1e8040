"""Finding the CUDA toolkit's command-line tools (nvcc, ncu, compute-sanitizer)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cudalab.errors import ToolMissingError


def find_cuda_tool(name: str, label: str, hint: str) -> str:
    """Path of a CUDA tool: PATH, then $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin.

    Args:
        name: the executable (``ncu``).
        label: how messages name it (``ncu (Nsight Compute)``).
        hint: how to get it.

    Raises:
        ToolMissingError: naming where cudalab looked and how to get the tool.
    """
    found = shutil.which(name)
    if found:
        return found
    places = [Path(os.environ[v]) / "bin" / name for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    places.append(Path("/usr/local/cuda/bin") / name)
    for p in places:
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    looked = ", ".join(["PATH"] + [str(p) for p in places])
    raise ToolMissingError(f"{label} not found (looked on {looked}); {hint}")
