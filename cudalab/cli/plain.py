"""Plain-text tables for the commands that must answer at once (``cudalab list``).

The same table as :func:`cudalab.report.simple_table` prints (:class:`cudalab.report.grid.Grid`'s layout:
the ``wrap`` columns wrap at spaces on a narrow terminal, numbers right-aligned, a bold header on a
terminal), without importing the report package: that imports rich's console and NumPy, ~0.2 s of a
command that otherwise takes a tenth of that. tests/test_cli.py checks the two render alike.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any, Iterator, Sequence

import click

from cudalab.textcells import GAP, MIN_WRAP, cell_len, clean, line, pad, shrink, wrapped

_ANSI = {"bold": ("\x1b[1m", "\x1b[0m"), "dim": ("\x1b[2m", "\x1b[0m")}


def _numeric(rows: list[list[str]], i: int) -> bool:
    cells = [r[i].replace(",", "") for r in rows if i < len(r)]
    return bool(cells) and all(c.replace(".", "", 1).isdigit() or c == "–" for c in cells)


def table_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int, title: str | None = None,
                wrap: Sequence[str] = ()) -> Iterator[list[tuple[str, str]]]:
    """The table as lines of (text, style) pieces, at most ``width`` cells wide where it can be (every cell
    and the title cleaned of terminal controls: :func:`cudalab.textcells.clean`)."""
    cells = [[clean(str(x)) for x in r] for r in rows]
    title = None if title is None else clean(title)
    wrap = tuple(wrap) or (columns[-1],)
    right = [_numeric(cells, i) for i in range(len(columns))]
    wraps = [i for i, c in enumerate(columns) if c in wrap]
    widths = {i: max([cell_len(c)] + [cell_len(r[i]) for r in cells if i < len(r)]) for i, c in enumerate(columns)}
    words = {i: max([cell_len(w) for r in cells if i < len(r) for w in r[i].split()] or [1]) for i in wraps}
    if not shrink(widths, wraps, width, {i: max(MIN_WRAP, words[i]) for i in wraps}):
        shrink(widths, wraps, width, {i: min(widths[i], max(8, words[i])) for i in wraps})
    if title:
        yield [(title, "")]
    yield line([(pad(c, widths[i], right[i]), "bold") for i, c in enumerate(columns)])
    rule = 1 + sum(widths.values()) + len(GAP) * (len(columns) - 1)
    yield [(" " + "━" * (rule - 1), "")]
    for row in cells:
        parts = []
        for i in range(len(columns)):
            text = row[i] if i < len(row) else ""
            parts.append(wrapped(text, widths[i]) if i in wraps else [text])
        for k in range(max(len(p) for p in parts)):
            yield line([(pad(p[k] if k < len(p) else "", widths[i], right[i]), "") for i, p in enumerate(parts)])


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int, title: str | None = None,
           wrap: Sequence[str] = (), color: bool = False) -> str:
    """The table as text (``color``: bold header as ANSI)."""
    out = []
    for pieces in table_lines(columns, rows, width, title, wrap):
        out.append("".join(f"{_ANSI[s][0]}{t}{_ANSI[s][1]}" if color and s in _ANSI and t.strip() else t
                           for t, s in pieces))
    return "\n".join(out) + "\n"


def echo_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None,
               wrap: Sequence[str] = ()) -> None:
    """Print the table on stdout as :func:`cudalab.report.console` would size it: the terminal's width on a
    terminal (unless ``--wide``), 400 columns piped."""
    stream = sys.stdout
    tty = stream.isatty()
    ctx = click.get_current_context(silent=True)
    wide = bool(ctx is not None and ctx.meta.get("cudalab.wide"))
    width = max(shutil.get_terminal_size((200, 24)).columns, 40) if tty and not wide else 400
    color = (tty or bool(os.environ.get("FORCE_COLOR"))) and os.environ.get("TERM") not in ("dumb", "unknown")
    click.echo(render(columns, rows, width, title, wrap, color), nl=False)
