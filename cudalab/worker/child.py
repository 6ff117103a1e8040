"""The child run under a tool (ncu, compute-sanitizer): one GPU worker's point, answered in a file.

The parent (:mod:`cudalab.execute.toolchild`) writes the point it planned (:class:`~cudalab.plan.Plan`) to
a JSON file and starts::

    [TOOL ARGV...] python -m cudalab.worker.child PLAN.json RESULT.json

The child runs the family in profile mode (each selected variant: one poisoned, verified launch;
nothing timed, no roofline) with the worker's own code (:class:`cudalab.worker.serve.Worker`), and
writes a :class:`~cudalab.worker.protocol.ChildResult` back: one row per variant, each with
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
        warm.start(int(json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))["request"].get("device", 0)))
    except (IndexError, KeyError, OSError, ValueError, TypeError, AttributeError):
        pass  # main() says what is wrong with the plan

from cudalab import catalog  # noqa: E402
from cudalab.errors import CudalabError  # noqa: E402
from cudalab.files import atomic_write  # noqa: E402
from cudalab.records.results import Result  # noqa: E402
from cudalab.worker.protocol import ChildResult  # noqa: E402
from cudalab.plan import Plan  # noqa: E402

#: The child's exit status when it could not run at all (its ``error`` says why).
REFUSED = 2


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
    """Child entry point: read the planned point, run it in profile mode, write the result.

    The rows are run by the GPU worker's own code (:class:`cudalab.worker.serve.Worker`), one protocol
    for every run: under a tool the worker's events are kept and written as one result file.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m cudalab.worker.child PLAN.json RESULT.json", file=sys.stderr)
        return REFUSED
    req_path, res_path = args
    try:
        data = json.loads(Path(req_path).read_text(encoding="utf-8"))
        plan = Plan.from_dict(data).with_request(profile=True, roofline=False)
        warm.start(plan.request.device)  # started at the module's top already, unless main() was called directly
        from cudalab.worker import gpu  # noqa: PLC0415  (after the plan reads: errors stay cheap)
        from cudalab.worker.executor import FamilyRun  # noqa: PLC0415  (likewise)
        from cudalab.worker.serve import ContextLost, Worker  # noqa: PLC0415  (likewise)

        run = FamilyRun(plan, None)  # read before opening the GPU; the parent planned it
        if run.variants:
            run.prepare()  # the inputs drawn while the GPU starts (cudalab.worker.warm), as a worker's first point
        dev = gpu.Device(plan.request.device)
        dev.launch_log = []
        chan = _Rows()
        try:
            Worker(chan, dev, None).point(0, plan.to_dict(), run)  # type: ignore[arg-type]
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
