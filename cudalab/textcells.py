"""Terminal cells of a plain table, without rich or NumPy: measuring, padding, joining and narrowing
columns. :class:`cudalab.report.grid.Grid` (run and comparison tables, printed through rich) and
:mod:`cudalab.cli.plain` (``cudalab list``, which must answer before rich could even import) lay out
their tables with these, so the two look alike at every width."""

from __future__ import annotations

import textwrap
import unicodedata

GAP = "  "
#: The narrowest a wrapping column gets before a table hides columns or wraps below it.
MIN_WRAP = 18


def cell_len(text: str) -> int:
    """Terminal cells ``text`` takes: wide East Asian characters two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def shrink(widths: dict[int, int], wraps: list[int], width: int, least: dict[int, int]) -> bool:
    """Narrow the wrapping columns, the widest first and none below its ``least``, until the table fits
    ``width``; False when it cannot."""
    excess = 1 + sum(widths.values()) + len(GAP) * (len(widths) - 1) - width
    while excess > 0:
        room = [i for i in wraps if widths[i] > least[i]]
        if not room:
            return False
        widest = max(room, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return True


def pad(text: str, width: int, right: bool) -> str:
    """``text`` padded to ``width`` cells, on the left when ``right``."""
    gap = " " * max(0, width - cell_len(text))
    return gap + text if right else text + gap


def line(cells: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """One table line: a space, the (text, style) cells joined by the gap, no trailing spaces (a
    left-aligned last column would pad every line to the widest)."""
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


def wrapped(text: str, width: int) -> list[str]:
    """A wrapping column's cell as lines at spaces (a word longer than the column stays whole)."""
    if cell_len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
