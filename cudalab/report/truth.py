"""``cudalab truth``'s tables: one per temperature (cold, hot), CUPTI's span the reference column, each other
method's median beside it with its distance from CUPTI, ncu with its difference (and ncu's offset on this GPU in
the notes), the method cudalab's tables use and its distance (pure: formats a
:class:`cudalab.studies.truth.Truth` into :class:`cudalab.instruments.Table` objects that
:func:`cudalab.report.print_table` prints)."""

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


def _vs(text: str, d: float | None, ok: bool | None) -> tuple[str, str]:
    """A cell with its distance from CUPTI after it, green within the bar, red beyond."""
    if d is None or text == "–":
        return text, ""
    return f"{text} {d:+.1%}", OK if ok else BAD


def tables(truth: Truth) -> list[Table]:
    """One table per temperature; the notes (every figure missing and why, ncu's note and offset) and the legend
    under the last."""
    methods, temps, ref = truth.methods, truth.temps, truth.reference
    others = tuple(m for m in methods if m != ref)
    digits = _digits(truth)
    points = len({r.point for r in truth.rows}) > 1
    out = []
    notes: list[str] = []
    for temp in temps:
        rows = []
        for r in truth.rows:
            cells: list[tuple[str, str]] = [(r.point, "")] if points else []
            cells.append((r.variant, BAD if r.status in ("incorrect", "failed", "timeout") else ""))
            if ref in methods:
                cells.append(cell(r.get(temp, ref), ref, digits))
            cells += [_vs(cell(r.get(temp, m), m, digits)[0], r.vs_ref(temp, m), r.agrees(temp, m)) for m in others]
            ncu_text = cell(r.get(temp, NCU), NCU, digits, "no ncu" if truth.ncu_note else "–")
            over = r.ncu_minus_ref(temp)
            cells.append((ncu_text[0] + (f" {over * 1e3:+.{digits}f}" if over is not None else ""), ncu_text[1]))
            mine = r.table(temp)
            use = r.table_method(temp)
            if use and mine is not None and mine.batch > 1:
                use += f" ×{mine.batch}"
            cells.append((use or "–", ""))
            d = r.vs_ref(temp)
            cells.append(("–" if d is None else f"{d:+.1%}", "" if d is None else OK if r.agrees(temp) else BAD))
            rows.append(tuple(cells))
            for _, m, f in (x for x in r.figures if x[0] == temp):
                if f.note and not (m == NCU and truth.ncu_note):
                    notes.append(f"{r.variant} ({temp}, {m}): {f.note}")
        headers = (("point",) if points else ()) + ("variant", *((f"{ref} µs (reference)",) if ref in methods else ()),
                                                     *(f"{m} µs vs {ref}" for m in others), f"ncu µs, −{ref}",
                                                     "tables use", f"tables vs {ref}")
        left = frozenset({0, 1} if points else {0}) | {headers.index("tables use")}
        gpu = truth.gpu.get("name") or "GPU"
        head = (f"cudalab truth {truth.family} · {temp}: {_HOW[temp]} · {gpu}",)
        if not points and truth.rows:
            head += (truth.rows[0].point,)
        out.append(Table(head, headers, left, tuple(rows)))
    notes = list(dict.fromkeys(notes))
    if truth.ncu_note:
        notes.append(f"ncu: {truth.ncu_note}")
    notes += offset_lines(truth)
    notes += list(truth.notes)
    notes += legend(truth)
    last = out[-1]
    out[-1] = Table(last.head, last.headers, last.left, last.rows, tuple(notes))
    return out


def offset_lines(truth: Truth) -> list[str]:
    """ncu's fixed offset on this GPU per temperature: the median of (ncu - CUPTI) over the rows."""
    out = []
    for temp in truth.temps:
        off, n = truth.ncu_offset(temp)
        if off is not None:
            out.append(f"ncu offset ({temp}) on this GPU: {off * 1e3:+.3f} µs = the median of (ncu − "
                       f"{truth.reference}) over {n} rows; ncu − offset is the kernel's span")
    return out


def legend(truth: Truth) -> list[str]:
    """The lines that say what each column is."""
    within, within_ms = truth.within
    return [
        "cells: median µs per launch [IQR]; (graph), (batch), (events): that method did not apply and another timed it "
        "(a kernel over 20 µs is not batched; a graph capture refused; cupti-python missing or CUPTI refused: the "
        "notes say why)",
        f"{truth.reference} (the reference) = each launch's own GPU start and end from CUPTI's activity records (cold: "
        "a flush before each launch, not counted); events = one launch between two CUDA events (launch overhead "
        "and the events' resolution inside); batch = N launches between two events, the throughput a stream of "
        "launches reaches (each launch with the gap to the next; the L2 flushed once a batch); graph = CUDA graph "
        "replay, the fallback designed to agree with CUPTI (hot: (2N − N launches) / N; cold: each launch between "
        "two event nodes, an empty kernel's windows taken out and its hot time put back); see docs/timing.md",
        f"ncu = Nsight Compute's gpu__time_duration, median of launches 2..{truth.ncu_launches} of each variant in "
        f"one process under ncu; after it, ncu − {truth.reference} in µs",
        f"tables use = what cudalab's tables show (--launch auto: {truth.reference} where cupti-python loads, graph "
        f"otherwise, events for a kernel of 20 µs or more); vs {truth.reference}: green within {within:.0%} or "
        f"{within_ms * 1e3:g} µs of its span",
    ]
