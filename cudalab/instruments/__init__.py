"""What an instrument tells the tables about its figures: one contract, so tables render any instrument.

An instrument measures each variant beside cudalab's own timing (ncu's metric sets today) and keeps plain
numbers in each row's ``extra`` under keys it owns. It describes them with one :class:`Instrument`: its
:class:`Column` s (key, header, decimals, the key of a ✓/✗) and the legend lines printed under a table that
shows them. The description travels with the rows (:attr:`cudalab.records.results.RunPoint.instruments`, saved in the
record), so a run table and ``cudalab report`` show any instrument's columns and legend from the point alone,
importing nothing of the instrument. An instrument with a table of its own (``cudalab ncu``) hands a
:class:`Table` of formatted cells to :func:`cudalab.report.print_table`.

The views an instrument leaves in saved rows (ncu's hot lines and advice) are the other half of the contract:
:mod:`cudalab.report.instruments`. Pure: no rich, no instrument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence


@dataclass(frozen=True)
class Column:
    """One figure an instrument keeps per row, as a run table shows it.

    Attributes:
        key: where the figure is in ``Result.extra`` (a key the instrument owns, e.g. ``ncu_ld_wpr``).
        header: its header in a run table (``cudalab FAMILY --ncu``, ``cudalab report``).
        digits: decimals of a float figure (other values print as they are; None: –).
        check: the ``extra`` key of a bool printed after the figure as ✓ / ✗ ('' : none).
    """

    key: str
    header: str
    digits: int = 2
    check: str = ""

    def cell(self, extra: dict[str, Any]) -> str:
        """The figure of one row's ``extra`` as a run table prints it."""
        v = extra.get(self.key)
        text = fmt(v, self.digits) if isinstance(v, float) else "–" if v is None else str(v)
        ok = extra.get(self.check) if self.check else None
        return text + (" ✓" if ok is True else " ✗" if ok is False else "")


@dataclass(frozen=True)
class Instrument:
    """An instrument's columns on one point, and what a table showing them says underneath.

    Attributes:
        name: the instrument (``ncu``); it prefixes the row notes.
        columns: run-table columns, in order; a table shows those some row has a figure for.
        legend: lines under a table that shows any of the columns.
        status, note: ``extra`` keys of what became of a row under the instrument when that differs from the
            run (e.g. ncu saw no launch) and why: printed under the table as ``name: variant status: note``.
    """

    name: str
    columns: tuple[Column, ...]
    legend: tuple[str, ...] = ()
    status: str = ""
    note: str = ""

    def present(self, rows: Sequence[Any]) -> list[Column]:
        """The columns some row has a figure for (key present, even as None)."""
        return [c for c in self.columns if any(c.key in _extra(r) for r in rows)]

    def notes(self, rows: Sequence[Any]) -> list[str]:
        """The legend (when a column is shown), then one line per row the instrument gave a status of its own."""
        out = list(self.legend) if self.present(rows) else []
        if self.status:
            out += [f"{self.name}: {r.variant} {_extra(r)[self.status]}: {_extra(r).get(self.note, '')}"
                    for r in rows if _extra(r).get(self.status)]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (what a saved point holds)."""
        return {"name": self.name, "columns": [[c.key, c.header, c.digits, c.check] for c in self.columns],
                "legend": list(self.legend), "status": self.status, "note": self.note}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Instrument":
        """Read :meth:`to_dict`'s output (a malformed column is left out, not fatal)."""
        cols = []
        for c in d.get("columns") or ():
            if isinstance(c, (list, tuple)) and len(c) >= 2:
                digits = c[2] if len(c) > 2 and isinstance(c[2], int) and not isinstance(c[2], bool) else 2
                cols.append(Column(str(c[0]), str(c[1]), digits, str(c[3]) if len(c) > 3 and c[3] else ""))
        return cls(str(d.get("name") or ""), tuple(cols), tuple(str(x) for x in d.get("legend") or ()),
                   str(d.get("status") or ""), str(d.get("note") or ""))


def columns_of(instruments: Iterable[Instrument], rows: Sequence[Any]) -> list[Column]:
    """Every instrument's present columns, in order (a key once)."""
    seen: set[str] = set()
    out = []
    for inst in instruments:
        for c in inst.present(rows):
            if c.key not in seen:
                seen.add(c.key)
                out.append(c)
    return out


def notes_of(instruments: Iterable[Instrument], rows: Sequence[Any]) -> list[str]:
    """Every instrument's lines under a table of ``rows``."""
    return [line for inst in instruments for line in inst.notes(rows)]


def fmt(x: float | None, digits: int = 1) -> str:
    """A figure with thousands separators and ``digits`` decimals; – for None and non-finite."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:,.{digits}f}"


#: The tone of a cell or a row of an instrument's own table (report maps it to a style).
OK, BAD, WARN = "ok", "bad", "warn"


@dataclass(frozen=True)
class Table:
    """An instrument's own table, formatted: what :func:`cudalab.report.print_table` prints.

    Attributes:
        head: lines above the table.
        headers: column headers.
        left: the indexes of left-aligned columns (the others are right-aligned).
        rows: per row, its cells as ``(text, tone)`` (tone: '' , :data:`OK`, :data:`BAD`, :data:`WARN`).
        notes: lines under the table (notes, then the legend).
    """

    head: tuple[str, ...]
    headers: tuple[str, ...]
    left: frozenset[int]
    rows: tuple[tuple[tuple[str, str], ...], ...]
    notes: tuple[str, ...] = ()


def _extra(row: Any) -> dict[str, Any]:
    return getattr(row, "extra", None) or {}


# --- records written before points carried their instruments ---------------------------------------------

#: The ncu columns ``cudalab FAMILY --ncu`` and ``cudalab ncu --json`` kept before a point named its
#: instruments, and what a run table said under them (frozen: today's sets live in cudalab.ncu.metrics).
_LEGACY_NCU = (
    Column("ncu_ld_wpr", "smem ld wf/req", 2, "ncu_ld_ok"), Column("ncu_st_wpr", "smem st wf/req", 2, "ncu_st_ok"),
    Column("ncu_ld_conflicts", "ld conflicts"), Column("ncu_st_conflicts", "st conflicts"),
    Column("ncu_dram", "DRAM % peak"), Column("ncu_gld", "gld eff %"), Column("ncu_gst", "gst eff %"),
    Column("ncu_l2", "L2 hit %"), Column("ncu_ms", "ncu ms", 6),
)
_LEGACY_SMEM = (
    "wf/req = shared-memory wavefronts per request (one request per warp instruction): the n-way figure (1 = "
    "conflict-free, 32 = all 32 threads of a warp in one bank at different words); ✓/✗ against the variant's "
    "expected value (accepted: expected −2% … +0.25).",
    "conflicts = ncu's bank-conflict counter: the extra wavefronts beyond one per request (not ways); on "
    "Ampere/Hopper it can also count arbitration between warps, so both figures are shown.",
)
_LEGACY_MEMORY = ("global ld / st eff % = bytes a warp's global loads / stores use per 32-byte sector they touch "
                  "(100 = fully coalesced); DRAM % peak = DRAM throughput against its sustained peak.",)
_LEGACY_TAIL = (
    "ncu ns = gpu__time_duration in nanoseconds, summed over a variant's launches; ncu ms in run tables.",
    "ncu ms is from a second process under ncu, where some kernels run at another speed "
    "(docs/ncu.md): it can differ from the median by more than the timing error.",
)


def of(point: Any) -> tuple[Instrument, ...]:
    """A point's instruments: those it names, else (a point saved before points named them) the ones its
    rows' keys show."""
    return tuple(point.instruments) or legacy(point.results)


def legacy(rows: Sequence[Any]) -> tuple[Instrument, ...]:
    """The instruments of rows kept before points named them, read from the rows' keys (none: ())."""
    keys = {k for r in rows for k in _extra(r)}
    if not keys & ({c.key for c in _LEGACY_NCU} | {"ncu_status"}):
        return ()
    smem = bool(keys & {"ncu_ld_wpr", "ncu_st_wpr"})
    return (Instrument("ncu", _LEGACY_NCU, (_LEGACY_SMEM if smem else _LEGACY_MEMORY) + _LEGACY_TAIL,
                       "ncu_status", "ncu_note"),)
