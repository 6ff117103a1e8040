"""A plain, fast table for runs and comparisons: numbers and names never split, one column wraps.

rich's ``Table`` folds any cell to fit a terminal (``3.91`` / ``0``, a variant's name over two lines)
and costs about 30 ms a table, which a saved sweep of 1,000 points pays 1,000 times. This grid
measures each column once, right-aligns numbers, and when the console is too narrow first wraps the
one text column (a row's status and reason, a comparison's note) at spaces, then hides the columns
marked droppable, in order, naming them under the table. It renders as rich segments, so a console
prints it like any table (colours on a terminal, plain text in a pipe). :class:`Prose` does the same for the
lines around a table: plain segments where they fit, rich's wrapping only where they do not.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from cudalab.textcells import GAP, MIN_WRAP, cell_len, clean, cut, line, pad, shrink, wrapped


@dataclass(frozen=True)
class Column:
    """One column.

    Attributes:
        header: its heading (``Column.header`` is what callers look up, as on rich's columns).
        right: right-aligned (numbers).
        wrap: the text column that wraps at spaces when the console is narrow (at most one).
        drop: hiding order when even the wrapped table is too wide (1 first; 0: never hidden).
    """

    header: str
    right: bool = False
    wrap: bool = False
    drop: int = 0


class Grid:
    """Rows of (text, style) cells under columns; printable on a rich console."""

    def __init__(self, columns: Sequence[Column], title: str | None = None):
        self.columns = list(columns)
        self.title = None if title is None else clean(title)
        self.rows: list[list[tuple[str, str]]] = []
        self._sections: set[int] = set()
        self._notes: dict[int, list[str]] = {}  # row index -> lines printed under it, not in any column
        self._note_style = "dim"

    def add_row(self, *cells: Any) -> None:
        """Add a row: each cell a str, a rich ``Text`` (its plain text and style are kept) or (text, style).

        A cell's text is cleaned here (:func:`cudalab.textcells.clean`), so the columns are measured on
        what the terminal will show."""
        row = []
        for c in cells:
            if isinstance(c, Text):
                row.append((clean(c.plain), str(c.style or "")))
            elif isinstance(c, tuple):
                row.append((clean(str(c[0])), str(c[1] or "")))
            else:
                row.append((clean(str(c)), ""))
        self.rows.append(row)

    def add_note(self, lines: Sequence[str], style: str = "dim") -> None:
        """Lines under the last row, across the table (a kernel's printf); cleaned, cut to the width."""
        self._notes.setdefault(len(self.rows) - 1, []).extend(clean(x) for x in lines)
        self._note_style = style

    def add_section(self) -> None:
        """Draw a thin line before the next row (``--layout long``: a new point)."""
        self._sections.add(len(self.rows))

    # --- layout -----------------------------------------------------------------------------------------

    def _widths(self, shown: list[int]) -> dict[int, int]:
        out = {}
        for i in shown:
            out[i] = max([cell_len(self.columns[i].header)] + [cell_len(r[i][0]) for r in self.rows if i < len(r)])
        return out

    def layout(self, width: int) -> tuple[list[int], dict[int, int], list[str]]:
        """The columns shown, their widths, and the headers hidden to fit ``width``.

        Too wide: the wrapping columns give up width first (the widest first, down to :data:`MIN_WRAP`),
        then droppable columns are hidden in their order, then the wrapping columns shrink further.
        """
        shown = list(range(len(self.columns)))
        hidden: list[str] = []
        order = sorted((c.drop, i) for i, c in enumerate(self.columns) if c.drop)
        # A wrapped cell breaks at spaces only: a column is never narrower than its longest word.
        words = {i: max([cell_len(w) for r in self.rows if i < len(r) for w in r[i][0].split()] or [1])
                 for i, c in enumerate(self.columns) if c.wrap}
        while True:
            widths = self._widths(shown)
            wraps = [i for i in shown if self.columns[i].wrap]
            if shrink(widths, wraps, width, {i: max(MIN_WRAP, words[i]) for i in wraps}):
                return shown, widths, hidden
            if not order:  # nothing left to hide: wrap down to the longest word; the terminal folds the rest
                shrink(widths, wraps, width, {i: min(widths[i], max(8, words[i])) for i in wraps})
                return shown, widths, hidden
            _, i = order.pop(0)
            shown.remove(i)
            hidden.append(self.columns[i].header)

    def lines(self, width: int) -> Iterator[list[tuple[str, str]]]:
        """The table as lines of (text, style) pieces, at most ``width`` cells wide where it can be."""
        shown, widths, hidden = self.layout(width)
        if self.title:
            yield [(self.title, "")]
        yield line([(pad(self.columns[i].header, widths[i], self.columns[i].right), "bold") for i in shown])
        rule = 1 + sum(widths[i] for i in shown) + len(GAP) * (len(shown) - 1)
        yield [(" " + "━" * (rule - 1), "")]
        spec = [(i, widths[i], self.columns[i].right, self.columns[i].wrap) for i in shown]
        blank = ("", "")
        for n, row in enumerate(self.rows):
            if n in self._sections and n:
                yield [(" " + "─" * (rule - 1), "dim")]
            cells = [row[i] if i < len(row) else blank for i, _, _, _ in spec]
            if all(not wrap or cell_len(c[0]) <= w for c, (_, w, _, wrap) in zip(cells, spec)):  # one line (most)
                yield line([(pad(c[0], w, right), c[1]) for c, (_, w, right, _) in zip(cells, spec)])
                for note in self._notes.get(n, ()):
                    yield [(cut(note, max(width - 1, 20)), self._note_style)]
                continue
            parts: dict[int, list[str]] = {}
            for i in shown:
                text = row[i][0] if i < len(row) else ""
                parts[i] = wrapped(text, widths[i]) if self.columns[i].wrap else [text]
            for k in range(max(len(p) for p in parts.values())):
                cells = []
                for i in shown:
                    piece = parts[i][k] if k < len(parts[i]) else ""
                    style = row[i][1] if i < len(row) else ""
                    cells.append((pad(piece, widths[i], self.columns[i].right), style))
                yield line(cells)
            for note in self._notes.get(n, ()):
                yield [(cut(note, max(width - 1, 20)), self._note_style)]
        if hidden:
            note = f"(hidden at this width: {', '.join(hidden)}; --wide or a wider terminal shows them)"
            for piece in textwrap.wrap(note, max(width - 1, 20), break_on_hyphens=False):
                yield [(piece, "dim")]

    def render_text(self, width: int = 400) -> str:
        """The table as plain text (tests, logs)."""
        return "\n".join("".join(t for t, _ in pieces) for pieces in self.lines(width)) + "\n"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterable[Segment]:
        styles: dict[str, Style | None] = {}
        if console.color_system is None:
            # A pipe: plain text, a thousand lines a segment (rich costs a few µs a segment; a table of 100,000
            # points has 200,000 lines).
            batch: list[str] = []
            for pieces in self.lines(options.max_width):
                batch.append("".join([text for text, _ in pieces]))
                if len(batch) == 1000:
                    yield Segment("\n".join(batch) + "\n")
                    batch = []
            if batch:
                yield Segment("\n".join(batch) + "\n")
            return
        for pieces in self.lines(options.max_width):
            for text, style in pieces:
                if style and style not in styles:
                    styles[style] = console.get_style(style, default=None)
                yield Segment(text, styles.get(style) if style else None)
            yield Segment.line()


class Prose:
    """Lines of prose (no markup), as rich prints a ``Text`` of them, faster: a line that fits the console's
    width is one plain segment; a longer one is wrapped at spaces as rich wraps it."""

    def __init__(self, lines: Sequence[str]):
        self.lines = list(lines)

    def __rich_console__(self, console: Console, options: Any) -> Iterable[Any]:
        for ln in self.lines:
            if "\n" not in ln and cell_len(ln) <= options.max_width:
                yield Segment(ln)
                yield Segment.line()
            else:
                yield Text(ln)
