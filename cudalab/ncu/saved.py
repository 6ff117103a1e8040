"""``cudalab ncu FAMILY --json FILE``: an ncu report as a run record (one point, one row per variant).

Each row keeps the figures its metric set keeps (``ncu_ld_wpr``...; the point carries the set's columns and
legend: :meth:`cudalab.ncu.metrics.MetricSet.instrument`), and with ``--source``
the per-line figures and the rules that fired (``extra["ncu_lines"]``, ``extra["ncu_rules"]``), so
``cudalab report FILE`` shows the table, the hot lines and the advice again, on any machine.
"""

from __future__ import annotations

import time
from typing import Sequence

from cudalab.ncu.profile import source_extra
from cudalab.ncu.rows import NcuReport
from cudalab.records.results import Result, RunPoint, RunRecord


def to_record(rep: NcuReport, command: Sequence[str], metric: str = "none") -> RunRecord:
    """The record of one ``cudalab ncu`` report (nothing timed: every row's figures are ncu's)."""
    from cudalab import __version__  # noqa: PLC0415
    from cudalab.records import machine  # noqa: PLC0415

    rows = []
    for r in rep.rows:
        extra = {}
        if r.launch is not None:
            extra.update(rep.metric_set.values(r))
            extra.update(source_extra(r))
        ln = r.launch
        rows.append(Result(variant=r.variant, kind="kernel" if r.kernel else "host", status=r.status, reason=r.note,
                           block=ln.block if ln else "", grid=ln.grid if ln else "",
                           extra={"ncu_kernel": r.kernel, **extra}))
    point = RunPoint(family=rep.family, metric=metric, problem=dict(rep.problem_data), results=tuple(rows),
                     instruments=(rep.metric_set.instrument(),))
    # ncu's details page does not name the GPU: the record has no device line (the command says where from)
    return RunRecord(cudalab=__version__, command=tuple(command), started=time.time(), device={},
                     points=(point,), incomplete=bool(rep.incomplete), machine=machine.facts())
