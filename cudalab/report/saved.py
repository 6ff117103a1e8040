"""A run on the console: a saved one (``cudalab report``, :func:`print_record`): its lines about itself, then its
points in the layout asked for, or the one its size calls for; a finished one as the family command prints it
(:func:`print_run`).

One table per point repeats the GPU, protocol and legend lines for each point: right for a sweep of a few
sizes, but a run of 100,000 points (a ``-D`` sweep) would print a million lines of headers, and rich's cost per
print made it take minutes. Above :data:`POINTS_LAYOUT_MAX` points a report shows the long layout instead: one
table per group of consecutive points that share their family, metric and timing protocol, a point column, every
row; ``--layout points`` still asks for a table per point.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

from rich.console import Console

from cudalab.report import core

#: The most points a saved run shows as one table per point unless ``--layout points`` asks.
POINTS_LAYOUT_MAX = 1000

Columns = Callable[[str], tuple[tuple[str, str], ...]]


def print_record(con: Console, record: Any, source: str, layout: str | None = None,
                 columns: Columns = lambda family: ()) -> None:
    """Print a saved run: where it came from, then every point's rows.

    Args:
        con: where to print.
        record: the :class:`cudalab.records.results.RunRecord`.
        source: the file it was read from (named in the first line).
        layout: ``points`` (a table per point), ``long`` (a table per group of points) or None: ``points`` up
            to :data:`POINTS_LAYOUT_MAX` points, ``long`` above (a line says so).
        columns: a family's extra table columns (its ``EXTRA_COLUMNS``), by family name.
    """
    points = record.points
    long = layout == "long" or (layout is None and len(points) > POINTS_LAYOUT_MAX)
    lines = core.saved_lines(record, source)
    if long and layout is None:
        lines.append(f"{len(points):,} points: shown as one table per family and timing protocol, a point column "
                     f"(above {POINTS_LAYOUT_MAX:,} points; --layout points shows a table per point)")
    con.print("\n".join(lines), markup=False, highlight=False)
    if not points:
        con.print("(no points: the run saved no rows)", markup=False)
        return
    long = long and len(points) > 1
    for n, group in enumerate(core.point_groups(points) if long else [[p] for p in points]):
        if n or not long:
            con.print("")
        core.print_table(con, record, group, columns(group[0].family), long=long)


def print_run(con: Console, record: Any, extra_columns: Sequence[tuple[str, str]] = (), long: bool = False,
              family: Any = None, runs: Sequence[Any] = ()) -> None:
    """Print a finished run as the family command does: a table per point (``--layout long``: one table), each
    followed by the views its rows hold and, with ``--show``, the inputs and each variant's result; then
    :func:`print_logs`.

    Args:
        con: where to print.
        record: the run's :class:`cudalab.records.results.RunRecord`.
        extra_columns: the family's own table columns (its ``EXTRA_COLUMNS``).
        long: one long table with a point column (a single point still gets its own table).
        family: the family whose ``show`` renders a point's arrays when the run kept them (``--show``); None:
            one that shows nothing.
        runs: the run's points as they ran (:class:`cudalab.execute.point.Point`, one per record point): their
            arrays, for ``family.show``.
    """
    long = long and len(record.points) > 1
    for i, group in enumerate([record.points] if long else [[p] for p in record.points]):
        core.print_table(con, record, group, extra_columns, long=long, header=False)
        if family is not None and not long and group[0].results and runs[i].outputs:
            con.print(family.show(runs[i].problem, runs[i].inputs, None), markup=False)
            for name, out in runs[i].outputs.items():
                con.print(f"--- {name}", markup=False)
                con.print(family.show(runs[i].problem, {}, out), markup=False)
    print_logs(record)


def print_logs(record: Any) -> None:
    """The nvcc log of every row that did not compile (on stderr, after the tables), each once."""
    seen = set()
    for r in (r for p in record.points for r in p.results):
        log = r.extra.get("log", "")
        if log and "nvcc" in log.splitlines()[0] and log not in seen:
            seen.add(log)
            print(f"--- {r.variant}: {log}", file=sys.stderr)
