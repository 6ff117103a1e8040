"""Stand-ins for subprocess.run that play a tool over the child protocol (no GPU, no ncu, no sanitizer).

A child run (argv ends ``-m cudalab.worker.child PLAN RESULT``) gets its result file written from the
request, as the real child would after running each variant once; ``-o BASE`` (ncu) makes ``BASE.ncu-rep``;
``ncu --import`` returns the CSV the test gives; ``--log-file LOG`` gets ncu's lines and that CSV.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Callable

from cudalab import plan as planning
from cudalab import launch as L
from cudalab.worker.protocol import ChildResult
from cudalab.records.results import PASSED, SKIPPED, Result

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def planned_rows(req: planning.RunRequest, status: dict | None = None) -> list[Result]:
    """The rows the child would write: one per selected kernel variant, with its planned launch log."""
    status = status or {}
    _plan = planning.precheck(replace(req, profile=True))
    _, fam, problem, variants = _plan.spec, _plan.family, _plan.problem, list(_plan.variants)
    rows = []
    for v in variants:
        try:
            lau = planning.plan_launch(v, fam, problem, req.block, req.grid, L.DeviceLimits(), req.defines)
        except Exception as exc:
            rows.append(Result(v.name, v.kind, SKIPPED, reason=str(exc)))
            continue
        st, reason = status.get(v.name, (PASSED, ""))
        rows.append(Result(v.name, v.kind, st, reason=reason, block=L.fmt_dims(lau.block), grid=L.fmt_dims(lau.grid),
                           extra={"launches": [[v.kernel, L.fmt_dims(lau.grid), L.fmt_dims(lau.block)]]}))
    return rows


def ncu_csv(launches: list[tuple[str, str, str, dict[str, tuple[str, str]]]], pid: int = 900) -> str:
    """ncu's ``--csv`` text for launches (kernel, grid ``128x128``, block ``32x32``, {metric: (unit, value)})."""
    def dim3(d: str) -> str:
        p = [int(x) for x in d.split("x")] + [1, 1]
        return f"({p[0]}, {p[1]}, {p[2]})"

    lines = [HEADER]
    for i, (kernel, grid, block, metrics) in enumerate(launches):
        for name, (unit, value) in metrics.items():
            lines.append(",".join(f'"{x}"' for x in (i, pid, "python3", "127.0.0.1", kernel, 1, 7, dim3(block),
                                                        dim3(grid), 0, "9.0", "Command line profiler metrics",
                                                        name, unit, value)))
    return "\n".join(lines) + "\n"


class FakeRun:
    """``subprocess.run`` stand-in. ``rows(req) -> ChildResult | list[Result] | None`` (None: no result file)."""

    def __init__(self, rows: Callable | None = None, output: str | Callable = "", rc: int = 0, csv: str = "",
                 report: bool = True):
        self.rows = rows or (lambda req: planned_rows(req))
        self.output, self.rc, self.csv, self.report = output, rc, csv, report
        self.calls: list[tuple[list[str], dict]] = []

    def __call__(self, argv, **kw):
        self.calls.append((list(argv), kw))
        if "--import" in argv:
            return subprocess.CompletedProcess(argv, 0, self.csv, "")
        req = planning.Plan.from_dict(json.loads(Path(argv[-2]).read_text())).request  # the parent's plan
        got = self.rows(req)
        if got is not None:
            res = got if isinstance(got, ChildResult) else ChildResult(tuple(got))
            Path(argv[-1]).write_text(json.dumps(res.to_dict()))
        if "-o" in argv and self.report:
            Path(argv[argv.index("-o") + 1] + ".ncu-rep").write_bytes(b"NCU")
        out = self.output(req, argv) if callable(self.output) else self.output
        if "--log-file" in argv:  # ncu's own lines and its CSV go to the log, the program's output stays out
            log = "==PROF== Connected to process 900\n" + out + "\n" + (self.csv if self.report else "")
            Path(argv[argv.index("--log-file") + 1]).write_text(log)
            out = ""
        return subprocess.CompletedProcess(argv, self.rc, out, "")
