"""Terminal cells of a plain table, without rich or NumPy: measuring, padding, joining and narrowing
columns. :class:`cudalab.report.grid.Grid` (run and comparison tables, printed through rich) and
:mod:`cudalab.cli.plain` (``cudalab list``, which must answer before rich could even import) lay out
their tables with these, so the two look alike at every width.

:func:`clean` is the one door for text cudalab did not write (a family.toml's description, a saved run's
name or hostname, a kernel name ncu reports, a kernel's printf): whatever it holds, it reaches the terminal
as visible characters, never as a command to the terminal."""

from __future__ import annotations

import textwrap
import unicodedata
from functools import lru_cache

#: Characters that reorder text on screen (bidirectional overrides and isolates): a name holding one
#: can read as another ("Trojan source").
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: In one cell, whitespace controls are a space (a description written over two TOML lines reads on).
_SPACES = str.maketrans({c: " " for c in "\t\n\r\v\f"})

GAP = "  "
#: The narrowest a wrapping column gets before a table hides columns or wraps below it.
MIN_WRAP = 18


def clean(text: str, lines: bool = False) -> str:
    """Neutralise terminal control in ``text`` that cudalab did not write.

    Escape sequences (ESC, CSI ``\\x9b``), every other C0/C1 control and DEL, bidirectional overrides
    and lone surrogates are shown as their escapes (``\\x1b``, ``\\u202e``): a saved run whose name
    holds ``\\x1b]0;...`` cannot retitle the terminal, clear it or hide a line, and the reader sees what
    was there.

    Args:
        text: the text (anything else is made a str first).
        lines: keep newlines and tabs (a kernel's printf block); otherwise, for a one-line cell,
            whitespace controls (tab, newline, CR, VT, FF) become a space.
    """
    text = str(text)
    if text.isprintable():  # the common case: nothing to do (isprintable is False for every control)
        return text
    if lines:
        text = text.replace("\r\n", "\n")
    else:
        text = text.translate(_SPACES)
    out = []
    for c in text:
        o = ord(c)
        if lines and c in "\n\t":
            out.append(c)
        elif o < 0x20 or 0x7f <= o < 0xa0 or c in _BIDI or 0xd800 <= o < 0xe000:
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")
        else:
            out.append(c)
    return "".join(out)


def cell_len(text: str) -> int:
    """Terminal cells ``text`` takes: wide East Asian characters two, combining marks none."""
    if text.isascii():
        return len(text)
    return _wide_len(text)


@lru_cache(maxsize=4096)
def _wide_len(text: str) -> int:
    # Cached: a long table measures and pads the same few cells ("✓", "1.00×") hundreds of thousands of times.
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


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells, ending in '…' where it was cut."""
    if cell_len(text) <= width:
        return text
    out, used = [], 0
    for c in text:
        used += cell_len(c)
        if used > width - 1:
            break
        out.append(c)
    return "".join(out) + "…"


def wrapped(text: str, width: int) -> list[str]:
    """A wrapping column's cell as lines at spaces (a word longer than the column stays whole)."""
    if cell_len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]
