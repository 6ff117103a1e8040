"""How a :class:`~cudalab.records.results.RunRecord` shows in a notebook: the tables the terminal prints, as HTML
with their colours (``RunRecord._repr_html_``) and as plain text (``_repr_pretty_``), instead of the
dataclass's repr of every raw sample."""

from __future__ import annotations

import io
from typing import Any

from cudalab.records.results import DISPLAY

__all__ = ["record_html", "record_text", "WIDTH"]

#: Columns the notebook's tables are laid out for (a wide notebook cell; long reasons wrap).
WIDTH = 150
_PRE = ('<pre style="font-family: Menlo, \'DejaVu Sans Mono\', consolas, \'Courier New\', monospace; '
        'font-size: 12px; line-height: 1.3; white-space: pre; overflow-x: auto">{code}</pre>')


def _print(con: Any, record: Any) -> None:
    from cudalab import report  # noqa: PLC0415

    if not record.points:
        con.print(f"cudalab run record: no points{' (incomplete)' if record.incomplete else ''}", markup=False)
        return
    for i, p in enumerate(record.points):
        report.print_point(con, record, p, header=i == 0, wide=False)


def record_text(record: Any, width: int = WIDTH) -> str:
    """The record's tables as plain text (what ``cudalab report`` prints, without colour)."""
    from cudalab.report.console import CleanConsole as Console  # noqa: PLC0415  (text shown as escapes)

    out = io.StringIO()
    con = Console(file=out, width=width, color_system=None, soft_wrap=False, highlight=False, force_terminal=False,
                  force_jupyter=False)
    _print(con, record)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines())


def record_html(record: Any, width: int = WIDTH) -> str:
    """The record's tables as HTML: the terminal's table, its colours kept (rich's HTML export)."""
    from cudalab.report.console import CleanConsole as Console  # noqa: PLC0415  (text shown as escapes)

    con = Console(file=io.StringIO(), record=True, width=width, color_system="truecolor", force_terminal=True,
                  soft_wrap=False, highlight=False, force_jupyter=False)
    _print(con, record)
    return con.export_html(inline_styles=True, code_format=_PRE)


DISPLAY.update(html=record_html, text=record_text)  # a RunRecord in a notebook shows these
