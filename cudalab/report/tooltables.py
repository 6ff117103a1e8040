"""Tables of instruments (``cudalab ncu``'s, formatted by the instrument: :class:`cudalab.instruments.Table`)
and of ``cudalab sanitize``."""

from __future__ import annotations

from typing import Any, Sequence

from rich import box
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from cudalab.instruments import Table
from cudalab.report.console import console
from cudalab.records.results import FAILED, FINDINGS, INCORRECT, MISSING, PASSED, SKIPPED


_STYLE = {"ok": "green", "bad": "bold red", "warn": "yellow"}
_ROW_STYLE = {PASSED: "ok", INCORRECT: "bad", FAILED: "bad", FINDINGS: "bad", SKIPPED: "warn", MISSING: "warn"}


def instrument_table(t: Table) -> RichTable:
    """An instrument's own table (:class:`cudalab.instruments.Table`) as a rich table."""
    out = RichTable(box=box.SIMPLE_HEAVY, pad_edge=False)
    for i, c in enumerate(t.headers):
        out.add_column(c, justify="left" if i in t.left else "right", overflow="fold")
    for row in t.rows:
        out.add_row(*(Text(text, style=_STYLE.get(tone, "")) for text, tone in row))
    return out


def print_table(t: Table, con: Console | None = None) -> None:
    """Print an instrument's own table (``cudalab ncu``'s): the lines above it, the table, the lines under it."""
    con = con or console()
    for line in t.head:
        con.print(line, markup=False)
    con.print(instrument_table(t))
    for line in t.notes:
        con.print(line, markup=False)


# --- sanitize tables --------------------------------------------------------------------------------

def sanitize_table(rows: Sequence[Any], title: str | None = None) -> RichTable:
    """One row per sanitizer run: variant, legacy?, tool, size, status, findings, first report line.

    Rows are :class:`cudalab.sanitize.Row`; a legacy variant's findings are dimmed: they do not fail the run.
    """
    t = RichTable(box=box.SIMPLE_HEAVY, title=title, title_justify="left", pad_edge=False)
    for c in ("variant", "legacy", "tool", "size", "status", "findings", "first report line / reason"):
        t.add_column(c, justify="right" if c == "findings" else "left", overflow="fold")
    for r in rows:
        found = "–" if r.findings is None else str(r.findings) + (f" (+{r.warnings} warn)" if r.warnings else "")
        style = _STYLE.get(_ROW_STYLE.get(r.status, ""), "")
        if r.legacy and r.status in (FINDINGS, FAILED):
            style = "dim " + style.replace("bold ", "")
        detail = "; ".join(filter(None, [r.first, r.reason]))
        t.add_row(Text(r.variant), "legacy" if r.legacy else "", r.tool, Text(str(r.size)),
                  Text(str(r.status), style=style), Text(found),
                  Text(detail, style=style if r.status != PASSED else ""))
    return t


SANITIZE_LEGACY_NOTE = ("legacy rows are faithful textbook code, undefined on current GPUs: their findings are "
                        "shown, not counted (see `cudalab list {family}`).")
