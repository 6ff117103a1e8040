"""The parent's side of a child run under a tool (ncu, compute-sanitizer): start it, read its result.

The parent writes the point it planned (:class:`~cudalab.plan.Plan`) to a JSON file and starts::

    [TOOL ARGV...] python -m cudalab.worker.child PLAN.json RESULT.json

The child (:mod:`cudalab.worker.child`, a GPU process) runs it in profile mode and writes a
:class:`~cudalab.worker.protocol.ChildResult` back. A tool only adds its argv prefix and parses its own
output; the child's verdict comes from the result file, never from its printed text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from cudalab import catalog
from cudalab.plan import Plan
from cudalab.records.results import Result
from cudalab.worker.protocol import ChildResult

__all__ = ["ChildRun", "child_argv", "child_env", "launches", "run_child"]


def launches(row: Result) -> list[tuple[str, str, str]]:
    """The (kernel, grid, block) launches a child row recorded, in order."""
    return [tuple(x) for x in row.extra.get("launches", ())]  # type: ignore[misc]


def child_env() -> dict[str, str]:
    """The child's environment: this cudalab first on its import path (also when not installed), the
    same kernel folder, the C locale (tools print plain numbers) and UTF-8 output."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the folder that holds this cudalab package
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["CUDALAB_SRC"] = str(catalog.src_root())
    env["LC_ALL"] = "C"
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def child_argv(plan_path: str | os.PathLike, result_path: str | os.PathLike) -> list[str]:
    """``python -m cudalab.worker.child PLAN RESULT`` with this interpreter."""
    return [sys.executable, "-m", "cudalab.worker.child", str(plan_path), str(result_path)]


@dataclass(frozen=True)
class ChildRun:
    """One finished child run under a tool: the tool's exit status and output, and the child's result."""

    returncode: int
    output: str
    result: ChildResult | None
    seconds: float = 0.0


Runner = Callable[..., subprocess.CompletedProcess]


def run_child(plan: Plan, prefix: Sequence[str], timeout: float, workdir: str | os.PathLike | None = None,
              run: Runner = subprocess.run) -> ChildRun:
    """Run ``prefix + child argv`` (no shell) on a planned point in profile mode and read its result back.

    Args:
        plan: the point, planned in the parent in profile mode (:func:`cudalab.plan.precheck`); the roofline
            is forced off.
        prefix: the tool's argv (``["ncu", "-o", ...]``); empty runs the child bare.
        timeout: seconds the whole run may take.
        workdir: where the request and result files go (default: a temporary folder).
        run: ``subprocess.run`` (injectable for tests).

    Raises:
        subprocess.TimeoutExpired: past ``timeout`` (the tool decides what that means).
        OSError: the tool could not be started.
    """
    plan = plan.with_request(profile=True, roofline=False)
    with tempfile.TemporaryDirectory(prefix="cudalab-child-", dir=workdir) as tmp:
        req_path, res_path = Path(tmp) / "plan.json", Path(tmp) / "result.json"
        req_path.write_text(json.dumps(plan.to_dict()))
        t0 = time.perf_counter()
        proc = run([*prefix, *child_argv(req_path, res_path)], capture_output=True, text=True, encoding="utf-8",
                   errors="replace", env=child_env(), timeout=timeout)
        seconds = time.perf_counter() - t0
        result = None
        if res_path.is_file():
            try:
                result = ChildResult.from_dict(json.loads(res_path.read_text(encoding="utf-8")))
            except (ValueError, KeyError, TypeError):
                result = None  # a half-written file: the child died while writing it
    output = (proc.stdout or "") + ("\n" if proc.stdout and proc.stderr else "") + (proc.stderr or "")
    return ChildRun(proc.returncode, output, result, seconds)
