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
import textwrap
import unicodedata
from typing import Any, Iterator, Sequence

import click

GAP = "  "
#: The narrowest a wrapping column gets (:data:`cudalab.report.grid.MIN_WRAP`).
MIN_WRAP = 18
_ANSI = {"bold": ("\x1b[1m", "\x1b[0m"), "dim": ("\x1b[2m", "\x1b[0m")}


def cell_len(text: str) -> int:
    """Terminal cells ``text`` takes: wide East Asian characters two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _numeric(rows: list[list[str]], i: int) -> bool:
    cells = [r[i].replace(",", "") for r in rows if i < len(r)]
    return bool(cells) and all(c.replace(".", "", 1).isdigit() or c == "–" for c in cells)


def _shrink(widths: dict[int, int], wraps: list[int], width: int, least: dict[int, int]) -> bool:
    excess = 1 + sum(widths.values()) + len(GAP) * (len(widths) - 1) - width
    while excess > 0:
        room = [i for i in wraps if widths[i] > least[i]]
        if not room:
            return False
        widest = max(room, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return True


def _pad(text: str, width: int, right: bool) -> str:
    gap = " " * max(0, width - cell_len(text))
    return gap + text if right else text + gap


def _line(cells: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """`` `` + the cells joined by the gap, without trailing spaces."""
    out = [(" ", "")]
    for n, cell in enumerate(cells):
        if n:
            out.append((GAP, ""))
        out.append(cell)
    while out and not out[-1][0].strip():
        out.pop()
    if out:
        out[-1] = (out[-1][0].rstrip(), out[-1][1])
    return out


def table_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int, title: str | None = None,
                wrap: Sequence[str] = ()) -> Iterator[list[tuple[str, str]]]:
    """The table as lines of (text, style) pieces, at most ``width`` cells wide where it can be."""
    cells = [[str(x) for x in r] for r in rows]
    wrap = tuple(wrap) or (columns[-1],)
    right = [_numeric(cells, i) for i in range(len(columns))]
    wraps = [i for i, c in enumerate(columns) if c in wrap]
    widths = {i: max([cell_len(c)] + [cell_len(r[i]) for r in cells if i < len(r)]) for i, c in enumerate(columns)}
    words = {i: max([cell_len(w) for r in cells if i < len(r) for w in r[i].split()] or [1]) for i in wraps}
    if not _shrink(widths, wraps, width, {i: max(MIN_WRAP, words[i]) for i in wraps}):
        _shrink(widths, wraps, width, {i: min(widths[i], max(8, words[i])) for i in wraps})
    if title:
        yield [(title, "")]
    yield _line([(_pad(c, widths[i], right[i]), "bold") for i, c in enumerate(columns)])
    rule = 1 + sum(widths.values()) + len(GAP) * (len(columns) - 1)
    yield [(" " + "━" * (rule - 1), "")]
    for row in cells:
        parts = []
        for i in range(len(columns)):
            text = row[i] if i < len(row) else ""
            if i in wraps and cell_len(text) > widths[i]:
                parts.append(textwrap.wrap(text, widths[i], break_long_words=False, break_on_hyphens=False) or [""])
            else:
                parts.append([text])
        for k in range(max(len(p) for p in parts)):
            yield _line([(_pad(p[k] if k < len(p) else "", widths[i], right[i]), "") for i, p in enumerate(parts)])


def render(columns: Sequence[str], rows: Sequence[Sequence[Any]], width: int, title: str | None = None,
           wrap: Sequence[str] = (), color: bool = False) -> str:
    """The table as text (``color``: bold header as ANSI)."""
    out = []
    for line in table_lines(columns, rows, width, title, wrap):
        out.append("".join(f"{_ANSI[s][0]}{t}{_ANSI[s][1]}" if color and s in _ANSI and t.strip() else t
                           for t, s in line))
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
