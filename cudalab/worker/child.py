"""The child run under a tool (ncu, compute-sanitizer): one GPU worker's point, answered in a file.

The parent writes the typed :class:`~cudalab.worker.executor.RunRequest` it holds to a JSON file and starts::

    [TOOL ARGV...] python -m cudalab.worker.child REQUEST.json RESULT.json

The child runs the family in profile mode (each selected variant: one poisoned, verified launch;
nothing timed, no roofline) with the worker's own code (:class:`cudalab.worker.serve.Worker`), and
writes a :class:`ChildResult` back: one row per variant, each with
the kernels it launched (``extra["launches"]``: kernel, grid, block, in order) so a tool's output
is matched to variants by kernel name and launch shape. A tool only adds its argv prefix and parses
its own output; the child's verdict comes from the result file, never from its printed text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from cudalab.worker import warm

if __name__ == "__main__":  # the child itself: its GPU starts while the imports below run (cudalab.worker.warm)
    try:
        warm.start(int(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")).get("device", 0)))
    except (IndexError, OSError, ValueError, TypeError, AttributeError):
        pass  # main() says what is wrong with the request

from cudalab import catalog  # noqa: E402
from cudalab.errors import CudalabError  # noqa: E402
from cudalab.files import atomic_write  # noqa: E402
from cudalab.records.results import Result  # noqa: E402
from cudalab.worker.executor import RunRequest  # noqa: E402

#: The child's exit status when it could not run at all (its ``error`` says why).
REFUSED = 2


@dataclass(frozen=True)
class ChildResult:
    """What a child run wrote back: its rows, or why it could not run."""

    rows: tuple[Result, ...] = ()
    error: str = ""

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return {"rows": [r.to_dict() for r in self.rows], "error": self.error}

    @classmethod
    def from_dict(cls, d: dict) -> "ChildResult":
        """Read :meth:`to_dict`'s output."""
        return cls(rows=tuple(Result.from_dict(r) for r in d.get("rows", ())), error=str(d.get("error", "")))


def launches(row: Result) -> list[tuple[str, str, str]]:
    """The (kernel, grid, block) launches a child row recorded, in order."""
    return [tuple(x) for x in row.extra.get("launches", ())]  # type: ignore[misc]


def child_env() -> dict[str, str]:
    """The child's environment: this cudalab first on its import path (also when not installed), the
    same kernel folder, the C locale (tools print plain numbers) and UTF-8 output."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["CUDALAB_SRC"] = str(catalog.src_root())
    env["LC_ALL"] = "C"
    env["PYTHONIOENCODING"] = "utf-8"
    return env


def child_argv(request_path: str | os.PathLike, result_path: str | os.PathLike) -> list[str]:
    """``python -m cudalab.worker.child REQUEST RESULT`` with this interpreter."""
    return [sys.executable, "-m", "cudalab.worker.child", str(request_path), str(result_path)]


@dataclass(frozen=True)
class ChildRun:
    """One finished child run under a tool: the tool's exit status and output, and the child's result."""

    returncode: int
    output: str
    result: ChildResult | None
    seconds: float = 0.0


Runner = Callable[..., subprocess.CompletedProcess]


def run_child(req: RunRequest, prefix: Sequence[str], timeout: float, workdir: str | os.PathLike | None = None,
              run: Runner = subprocess.run) -> ChildRun:
    """Run ``prefix + child argv`` (no shell) on ``req`` in profile mode and read its result back.

    Args:
        req: the run; ``profile`` is forced on and the roofline off.
        prefix: the tool's argv (``["ncu", "-o", ...]``); empty runs the child bare.
        timeout: seconds the whole run may take.
        workdir: where the request and result files go (default: a temporary folder).
        run: ``subprocess.run`` (injectable for tests).

    Raises:
        subprocess.TimeoutExpired: past ``timeout`` (the tool decides what that means).
        OSError: the tool could not be started.
    """
    import time

    req = replace(req, profile=True, roofline=False)
    with tempfile.TemporaryDirectory(prefix="cudalab-child-", dir=workdir) as tmp:
        req_path, res_path = Path(tmp) / "request.json", Path(tmp) / "result.json"
        req_path.write_text(json.dumps(req.to_dict()))
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


class _Rows:
    """A worker channel that keeps the rows (a child run answers once, in its result file)."""

    def __init__(self) -> None:
        self.rows: list[Result] = []
        self.refused = ""

    def send(self, **msg: object) -> None:
        if msg.get("ev") == "row":
            self.rows.append(Result.from_dict(msg["row"]))  # type: ignore[arg-type]
        elif msg.get("ev") == "refused":
            self.refused = str(msg.get("message", ""))


def main(argv: Sequence[str] | None = None) -> int:
    """Child entry point: read the request, run it in profile mode, write the result.

    The rows are run by the GPU worker's own code (:class:`cudalab.worker.serve.Worker`), one protocol
    for every run: under a tool the worker's events are kept and written as one result file.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m cudalab.worker.child REQUEST.json RESULT.json", file=sys.stderr)
        return REFUSED
    req_path, res_path = args
    try:
        req = RunRequest.from_dict(json.loads(Path(req_path).read_text(encoding="utf-8")))
        req = replace(req, profile=True, roofline=False)
        warm.start(req.device)  # started at the module's top already, unless main() was called directly
        from cudalab.worker import gpu  # noqa: PLC0415  (after the request parses: errors stay cheap)
        from cudalab.worker import executor as runner  # noqa: PLC0415  (after the request parses: errors stay cheap)
        from cudalab.worker.serve import ContextLost, Worker  # noqa: PLC0415

        run = runner.FamilyRun(req, None)  # precheck before opening the GPU
        if run.variants:
            run.prepare()  # the inputs drawn while the GPU starts (cudalab.worker.warm), as a worker's first point
        dev = gpu.Device(req.device)
        dev.launch_log = []
        chan = _Rows()
        try:
            Worker(chan, dev, None).point(0, req.to_dict(), run)  # type: ignore[arg-type]
        except ContextLost:
            pass  # the row that broke the context is in; the tool's own report says the rest
        finally:
            dev.close()
        if chan.refused:
            raise CudalabError(chan.refused)
        atomic_write(res_path, json.dumps(ChildResult(tuple(chan.rows)).to_dict()))
        return 0
    except CudalabError as exc:
        atomic_write(res_path, json.dumps(ChildResult(error=str(exc)).to_dict()))
        print(f"cudalab: {exc}", file=sys.stderr)
        return REFUSED


if __name__ == "__main__":
    sys.exit(main())
