"""``cudalab truth``'s tables: one per temperature (cold, hot), each method's median and IQR side by side, the
method cudalab's tables use and its distance from ncu, and the distance of each method the truth compares
(cupti: a candidate for ``--launch auto``) (pure: formats a :class:`cudalab.studies.truth.Truth` into
:class:`cudalab.instruments.Table` objects that :func:`cudalab.report.print_table` prints)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudalab.instruments import BAD, OK, WARN, Table

#: The column of ncu's figure (:data:`cudalab.studies.truth.NCU`).
NCU = "ncu"

if TYPE_CHECKING:
    from cudalab.studies.truth import Figure, Truth

_HOW = {"cold": "L2 flushed before each sample (graph, cupti: before each launch); ncu --cache-control all",
        "hot": "--hot: no flush; ncu --cache-control none"}


def _us(x: float | None, digits: int) -> str:
    return "–" if x is None else f"{x * 1e3:,.{digits}f}"


def _digits(truth: Truth) -> int:
    """Decimals for µs: three while every figure is under 100 µs, else one."""
    big = any(f.median_ms is not None and f.median_ms >= 0.1 for r in truth.rows for _, _, f in r.figures)
    return 1 if big else 3


def cell(fig: Figure | None, method: str, digits: int, missing: str = "–") -> tuple[str, str]:
    """A method's cell: ``median [IQR]`` in µs; ``(events)`` after it when another method timed it."""
    if fig is None or fig.median_ms is None:
        return missing, WARN if missing != "–" else ""
    text = f"{_us(fig.median_ms, digits)} [{_us(fig.iqr_ms, digits)}]"
    if fig.timed_by and fig.timed_by != method:
        text += f" ({fig.timed_by})"
    return text, ""


def tables(truth: Truth) -> list[Table]:
    """One table per temperature; the notes (every figure missing and why, ncu's note) and the legend under the last."""
    methods, temps = truth.methods, truth.temps
    compared = tuple(m for m in truth.compared if m in methods)
    digits = _digits(truth)
    points = len({r.point for r in truth.rows}) > 1
    out = []
    notes: list[str] = []
    for temp in temps:
        rows = []
        for r in truth.rows:
            cells: list[tuple[str, str]] = [(r.point, "")] if points else []
            cells.append((r.variant, BAD if r.status in ("incorrect", "failed", "timeout") else ""))
            cells += [cell(r.get(temp, m), m, digits) for m in methods]
            cells.append(cell(r.get(temp, NCU), NCU, digits, "no ncu" if truth.ncu_note else "–"))
            mine = r.table(temp)
            use = r.table_method(temp)
            if use and mine is not None and mine.batch > 1:
                use += f" ×{mine.batch}"
            cells.append((use or "–", ""))
            for m in (None, *compared):   # the tables' distance, then each compared method's own
                d = r.vs_ncu(temp, m)
                ok = r.agrees(temp, m)
                cells.append(("–" if d is None else f"{d:+.1%}", "" if d is None else OK if ok else BAD))
            rows.append(tuple(cells))
            for _, m, f in (x for x in r.figures if x[0] == temp):
                if f.note and not (m == NCU and truth.ncu_note):
                    notes.append(f"{r.variant} ({temp}, {m}): {f.note}")
        headers = (("point",) if points else ()) + ("variant", *(f"{m} µs" for m in methods), "ncu µs",
                                                     "tables use", "vs ncu", *(f"{m} vs ncu" for m in compared))
        left = frozenset({0, 1} if points else {0}) | {headers.index("tables use")}
        gpu = truth.gpu.get("name") or "GPU"
        head = (f"cudalab truth {truth.family} · {temp}: {_HOW[temp]} · {gpu}",)
        if not points and truth.rows:
            head += (truth.rows[0].point,)
        out.append(Table(head, headers, left, tuple(rows)))
    notes = list(dict.fromkeys(notes))
    if truth.ncu_note:
        notes.append(f"ncu: {truth.ncu_note}")
    notes += list(truth.notes)
    notes += legend(truth)
    last = out[-1]
    out[-1] = Table(last.head, last.headers, last.left, last.rows, tuple(notes))
    return out


def legend(truth: Truth) -> list[str]:
    """The lines that say what each column is."""
    within, within_ms = truth.within
    return [
        "cells: median µs per launch [IQR]; (events), (batch): that method did not apply and another timed it (a "
        "kernel over 20 µs is not batched; a graph capture refused; cupti-python missing or CUPTI refused: the "
        "notes say why)",
        "events = one launch between two CUDA events; batch = N launches between two events (the L2 flushed once "
        "a batch); graph = N launches replayed as a CUDA graph (cold: a flush node before each launch, the "
        "flushes timed alone and taken out); cupti = N launches, each launch's own GPU start and end from CUPTI's "
        "activity records (cold: a flush before each launch, not counted)",
        f"ncu = Nsight Compute's gpu__time_duration, median of launches 2..{truth.ncu_launches} of each variant in "
        "one process under ncu",
        f"tables use = what cudalab's tables show (--launch auto = {truth.auto_launch} under 20 µs); vs ncu = its "
        f"distance from ncu, green within {within:.0%} or {within_ms * 1e3:g} µs"
        + "".join(f"; {m} vs ncu = {m}'s own distance" for m in truth.compared),
    ]
