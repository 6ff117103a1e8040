"""``cudalab ncu``'s table, formatted from the report's metric set (pure): :func:`cudalab.report.print_table`
prints it without knowing ncu."""

from __future__ import annotations

from cudalab.instruments import BAD, OK, WARN, Table, fmt
from cudalab.ncu.metrics import Figure
from cudalab.ncu.rows import NcuReport, NcuRow
from cudalab.records.results import FAILED, FINDINGS, INCORRECT, MISSING, PASSED, SKIPPED

_TONE = {PASSED: OK, INCORRECT: BAD, FAILED: BAD, FINDINGS: BAD, SKIPPED: WARN, MISSING: WARN}


def table(rep: NcuReport) -> Table:
    """One row per variant: its launch, the set's columns, status; the report's notes and the set's legend under it."""
    figures = rep.metric_set.table()
    rows = []
    for i, r in enumerate(rep.rows, 1):
        ln = r.launch
        cells = [(str(i), ""), (r.variant, ""), (r.kernel or "–", ""), (ln.block if ln else "–", ""),
                 (ln.grid if ln else "–", "")]
        cells += [_cell(f, r) if ln is not None else ("–", "") for f in figures]
        cells.append((str(r.status) + (f": {r.note}" if r.note else ""), _TONE.get(r.status, "")))
        rows.append(tuple(cells))
    head = [f"cudalab ncu {rep.family} · metrics {rep.metric_set.name} · {rep.source}"] + (
        [rep.problem] if rep.problem else [])
    headers = ("#", "variant", "kernel", "block", "grid", *(f.header for f in figures), "status")
    left = frozenset({1, 2, 3, 4, len(headers) - 1})  # names and status; figures right-aligned
    return Table(tuple(head), headers, left, tuple(rows), tuple(rep.notes) + tuple(rep.metric_set.legend))


def _cell(f: Figure, row: NcuRow) -> tuple[str, str]:
    text = fmt(f.of(row), f.digits)
    if f.check is None:
        return text, ""
    ok, expected = f.check(row)
    if ok is True:
        return f"{text} ✓", OK
    if ok is False:
        return f"{text} ✗ (expected {expected:g})", BAD
    return text, ""
