"""What ``cudalab watch`` shows: one screen per version (the table with a ``vs last`` column, each
verdict's figures, nvcc's log in place), redrawn on a terminal and appended in a pipe."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from rich.console import Console

from cudalab import report
from cudalab import instruments as instrument
from cudalab.records.compare import FASTER, SAME, SLOWER, UNSURE
from cudalab.report.core import _point_title
from cudalab.report.runtable import LEGEND
from cudalab.records.results import FAILED, PASSED, RunRecord
from cudalab.watch.core import Version, Watcher

__all__ = ["render", "announce", "vs_cell", "short"]

#: The key of the ``vs last`` cell in a shown row's ``extra`` (never saved).
VS_KEY = "watch_vs"
VS_HEADER = "vs last"
#: Lines of an nvcc log shown under the table.
LOG_LINES = 14
_STYLE = {FASTER: "bold green", SLOWER: "bold red", SAME: "", UNSURE: "yellow"}


def short(path: Path | str) -> str:
    """A path as the screen names it: relative to the working folder when inside it, else to cudalab's own
    tree (``cuda_src/transpose/transpose.cu``, ``cudalab/families/transpose.py``), else as it is."""
    text = str(path)
    own = Path(__file__).resolve().parent.parent.parent  # the folder that holds the cudalab package
    for base in (os.getcwd(), str(own)):
        try:
            rel = os.path.relpath(text, base)
        except ValueError:
            continue
        if not rel.startswith(".."):
            return rel
    return text


def vs_cell(version: Version, label: str, row: Any) -> tuple[str, str]:
    """The ``vs last`` cell of one row, and its style: the verdict against its last passed version; ``new``
    for a re-run row that passed with no earlier pass to compare; ``kept vN`` for a row that did not change."""
    key = (label, row.variant)
    judged = version.verdicts.get(key)
    if judged is not None:
        v = judged.verdict
        ratio = f" {v.ratio:.2f}×" if v.ratio is not None else ""
        return f"{v.verdict}{ratio} vs v{judged.against}", _STYLE.get(v.verdict, "")
    if key in version.rerun:
        return ("new", "") if row.status == PASSED else ("–", "")
    n = version.measured.get(key)
    return (f"kept v{n}" if n else "–"), "dim"


def _rows_with_cells(version: Version, point: Any) -> list[Any]:
    return [replace(r, extra={**r.extra, VS_KEY: vs_cell(version, point.label, r)[0]}) for r in point.results]


def _style_column(grid: Any, version: Version, labels: Sequence[str], rows: Sequence[Any]) -> None:
    """Colour the verdict cells (the table prints cell text; the style is set here)."""
    idx = next((i for i, c in enumerate(grid.columns) if c.header == VS_HEADER), None)
    if idx is None:
        return
    for cells, label, r in zip(grid.rows, labels, rows):
        _, style = vs_cell(version, label, r)
        cells[idx] = (cells[idx][0], style)


def header(watcher: Watcher, version: Version, record: RunRecord | None) -> list[str]:
    """The lines above the tables: what this version is, the GPU, the timing protocol."""
    when = time.strftime("%H:%M:%S", time.localtime(version.at))
    what = "first run" if version.number == 1 else (
        f"{', '.join(short(p) for p in version.changed)} changed" if version.changed else "no change")
    rows = sum(len(p.results) for p in record.points) if record is not None else 0
    if version.number > 1 and not version.error:
        names = sorted({v for _, v in version.rerun})
        what += (f" → re-ran {', '.join(names)} ({len(version.rerun)} of {rows} rows"
                 + ("" if watcher.rerun_all or len(version.rerun) == rows else "; the others kept: --all re-runs every row")
                 + ")" if version.rerun else " → no row uses it: nothing to re-run")
    lines = [f"cudalab watch · v{version.number} at {when} · {what}"]
    if record is None or not record.points:
        return lines
    first = record.points[0]
    results = [r for p in record.points for r in p.results]
    more = report.header_lines(record.device, "", "", report.core._protocol(first.protocol), None, results)
    return lines + [ln for ln in more[1:] if ln]


def render(con: Console, watcher: Watcher, version: Version, events: str = "polling",
           extra_columns: Iterable[tuple[str, str]] = (), wide: bool = False, layout: str = "points",
           clear: bool = False) -> None:
    """Draw one version: header, a table per point (or one long table), verdicts, nvcc logs, error, footer."""
    if clear:
        con.clear()
    else:
        con.rule(f"v{version.number}", style="dim")
    record = version.record
    con.print("\n".join(header(watcher, version, record)), markup=False, highlight=False)
    if record is not None and record.points:
        _tables(con, record, version, list(extra_columns), wide, layout)
        _verdicts(con, record, version)
        _logs(con, record, version)
    elif not version.error:
        con.print("nothing ran", markup=False)
    if version.error:
        con.print(f"cudalab: {version.error}", style="bold red", markup=False, highlight=False)
        if record is not None:
            con.print("(the table is the last one that ran; save again to retry)", style="dim", markup=False)
    if version.incomplete:
        con.print("interrupted: the rows measured so far are kept (marked incomplete)", markup=False)
        return
    files = watcher.watched()
    names = ", ".join(short(p) for p in files[:5]) + (f" (+{len(files) - 5} more)" if len(files) > 5 else "")
    con.print(f"watching {len(files)} file{'s' if len(files) != 1 else ''} ({events}): {names}", style="dim",
              markup=False, highlight=False)
    con.print("save one to rebuild, re-verify and re-time what it changed · Ctrl-C ends", style="dim", markup=False)


def _tables(con: Console, record: RunRecord, version: Version, extra: list[tuple[str, str]], wide: bool,
            layout: str) -> None:
    from cudalab.report.runtable import results_table  # noqa: PLC0415

    judged = version.number > 1
    vs = [instrument.Column(VS_KEY, VS_HEADER)] if judged else []
    points = record.points
    metric = points[0].metric
    if layout == "long" and len(points) > 1:
        rows = [r for p in points for r in _rows_with_cells(version, p)]
        labels = [p.label for p in points for _ in p.results]
        ncu = instrument.columns_of([i for p in points for i in instrument.of(p)], rows)
        grid = results_table(rows, metric, extra, ncu + vs, points=labels, wide=wide)
        _style_column(grid, version, labels, rows)
        con.print(grid)
    else:
        for p in points:
            title, line = _point_title(record, p)
            lines = [f"{title} · {line.replace('size ', '', 1)}"]
            if p.roofline:
                r = p.roofline
                kern = f", copy kernel {r.kernel_gbs:,.0f}" if r.kernel_gbs else ""
                lines.append(f"roofline {r.gbs:,.0f} GB/s = {r.source} (memcpy_dtod {r.dtod_gbs:,.0f}{kern})")
            elif p.roofline_note:
                lines.append(f"roofline unavailable: {p.roofline_note}")
            con.print("\n".join(lines), markup=False, highlight=False)
            rows = _rows_with_cells(version, p)
            ncu = instrument.columns_of(instrument.of(p), rows)
            grid = results_table(rows, p.metric, extra, ncu + vs, wide=wide)
            _style_column(grid, version, [p.label] * len(rows), rows)
            con.print(grid)
    notes = [LEGEND.get(metric, LEGEND["none"])]
    if judged:
        notes.append("vs last: a re-run row's time against its last version that passed (median ratio; the verdict "
                     "from the raw samples, as cudalab compare judges them); kept vN: unchanged, measured in vN.")
    con.print("\n".join(notes), style="dim", markup=False, highlight=False)


def _verdicts(con: Console, record: RunRecord, version: Version) -> None:
    lines = []
    for p in record.points:
        for r in p.results:
            j = version.verdicts.get((p.label, r.variant))
            if j is None:
                continue
            v = j.verdict
            where = f" [{p.label}]" if len(record.points) > 1 else ""
            figs = []
            if v.low is not None and v.high is not None:
                figs.append(f"95% CI {v.low:.3f}–{v.high:.3f}")
            if v.p is not None:
                figs.append(f"p {v.p:.2g}")
            if v.note:
                figs.append(v.note)
            text = f"{r.variant}{where}: {v.verdict} than v{j.against}" if v.verdict in (FASTER, SLOWER) else \
                f"{r.variant}{where}: {v.verdict} vs v{j.against}"
            ratio = f" — {v.ratio:.3f}× the time" if v.ratio is not None else ""
            lines.append((text + ratio + (f" ({'; '.join(figs)})" if figs else ""), _STYLE.get(v.verdict, "")))
    for text, style in lines:
        con.print(text, style=style or None, markup=False, highlight=False)


def _logs(con: Console, record: RunRecord, version: Version) -> None:
    """nvcc's log of each re-run row that did not compile, where the user looks: under the table."""
    seen = set()
    for p in record.points:
        for r in p.results:
            log = str(r.extra.get("log") or "")
            if r.status != FAILED or not log or (p.label, r.variant) not in version.rerun or log in seen:
                continue
            seen.add(log)
            lines = log.strip().splitlines()
            cut = len(lines) > LOG_LINES
            text = "\n".join(lines[:LOG_LINES]) + (f"\n… ({len(lines) - LOG_LINES} more lines)" if cut else "")
            con.print(f"--- {r.variant}: {text}", style="red", markup=False, highlight=False)


def announce(con: Console, version: int, changed: Sequence[Path]) -> None:
    """The line shown while a change is rebuilt (the last table stays on screen above it)."""
    names = ", ".join(short(p) for p in changed)
    con.print(f"v{version}: {names} changed: rebuilding, verifying, timing…", style="bold", markup=False,
              highlight=False)
