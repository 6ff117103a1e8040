"""Rich tables, JSON and CSV export. The only module that imports rich."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cudalab.files import atomic_write
from cudalab.results import FAILED, INCORRECT, PASSED, SKIPPED, Result, Roofline

_STATUS_STYLE = {PASSED: "green", INCORRECT: "bold red", FAILED: "red", SKIPPED: "yellow"}


def console(stderr: bool = False) -> Console:
    """A console wide enough for the tables even when output is piped or captured."""
    stream = sys.stderr if stderr else sys.stdout
    width = shutil.get_terminal_size((200, 24)).columns if stream.isatty() else 200
    return Console(file=stream, width=max(width, 100), soft_wrap=False, highlight=False)


def _fmt(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:,.{digits}f}"


def _ms(x: float) -> str:
    return f"{x:.4f}" if x < 1 else f"{x:.3f}" if x < 100 else f"{x:,.1f}"


def header_lines(device: dict[str, Any] | None, title: str, problem: str, protocol: Any,
                 roofline: Roofline | None) -> list[str]:
    """The lines above a table: GPU, clocks, versions, size, dtype, timing protocol, roofline."""
    lines = [title]
    if device:
        lines.append(
            f"GPU {device['index']}: {device['name']} (sm_{device['compute_capability'].replace('.', '')}, "
            f"{device['sm_count']} SMs, SM clock {device['sm_clock_mhz']} MHz, memory clock {device['mem_clock_mhz']} MHz, "
            f"L2 {device['l2_bytes'] / 2**20:.0f} MiB) · driver {device.get('driver_release') or ''}"
            f"{' ' if device.get('driver_release') else ''}(CUDA {device['driver_version']} driver API) · "
            f"CUDA {device['cuda_version']} (pycuda build)"
        )
    lines.append(problem)
    if protocol is not None:
        lines.append(
            f"timing: CUDA events, median of ≥{protocol.min_samples} samples (until IQR/median < "
            f"{protocol.target_rel_iqr:.0%} or {protocol.budget_s:g} s), {protocol.warmup} warm-up, "
            f"{'L2 flushed before each sample' if protocol.flush_l2 else 'hot L2 (--hot)'}"
        )
    if roofline:
        kern = f", copy kernel {roofline.kernel_gbs:,.0f}" if roofline.kernel_gbs else ""
        lines.append(f"roofline {roofline.gbs:,.0f} GB/s = {roofline.source} (memcpy_dtod {roofline.dtod_gbs:,.0f}{kern})")
    return lines


#: ncu columns a family table gains with ``--ncu`` (keys in ``Result.extra``): shared memory, or the
#: ``memory`` set (the book's Table 3-6: global load/store efficiency). Shown when any row has them.
NCU_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ncu_ld_wpr", "smem ld wf/req"), ("ncu_st_wpr", "smem st wf/req"),
    ("ncu_ld_conflicts", "ld conflicts"), ("ncu_st_conflicts", "st conflicts"),
    ("ncu_dram", "DRAM % peak"), ("ncu_gld", "gld eff %"), ("ncu_gst", "gst eff %"), ("ncu_l2", "L2 hit %"),
    ("ncu_ms", "ncu ms"),
)


def print_point(con: Console, record: Any, point: Any, extra_columns: Iterable[tuple[str, str]] = ()) -> None:
    """Print one point of a run record: header lines, the table, its legend and notes.

    Args:
        con: where to print.
        record: the :class:`cudalab.results.RunRecord` (device, incomplete).
        point: the :class:`cudalab.results.RunPoint`.
        extra_columns: the family's ``EXTRA_COLUMNS``.
    """
    from cudalab.bench import Protocol

    title = f"cudalab {point.family}" + (f" --block {point.block}" if point.block else "") + (
        "  [INCOMPLETE: interrupted]" if record.incomplete else "")
    prob = point.problem
    size = "x".join(str(d) for d in prob.get("dims", ()))
    line = f"size {size} · dtype {prob.get('dtype', '')}" + "".join(
        f" · {k} {v}" for k, v in sorted((prob.get("options") or {}).items()))
    line += "".join(f" · -D {k}={v}" for k, v in point.defines)
    proto = Protocol(**point.protocol) if point.protocol else None
    for text in header_lines(record.device, title, line, proto, point.roofline):
        con.print(text, markup=False, highlight=False)
    rows = point.results
    ncu_cols = [(k, h) for k, h in NCU_COLUMNS if any(k in r.extra for r in rows)]
    con.print(results_table(rows, point.metric, extra_columns, ncu_cols))
    con.print(LEGEND.get(point.metric, LEGEND["none"]), markup=False)
    if any(r.legacy for r in rows):
        con.print("[legacy] faithful textbook code that is undefined on current GPUs (see `cudalab list "
                  f"{point.family}`); its correct twin runs beside it.", markup=False)


LEGEND = {
    "bandwidth": "speedup = over the first GPU row that passed, step = over the previous one; GB/s counts each "
                 "necessary byte once; % roofline = over the faster of memcpy_dtod and the best copy kernel, same run.",
    "flops": "speedup = over the first GPU row that passed, step = over the previous one; GFLOP/s = 2·M·N·K / "
             "time; % of ref = over the library (cuBLAS) row.",
    "rate": "speedup = over the first GPU row that passed, step = over the previous one; G items/s = keys sorted, "
            "queries answered or elements searched per second (1e9); % of ref = over the library (CuPy) row.",
    "none": "speedup = over the first GPU row that passed, step = over the previous one.",
}


def results_table(results: Sequence[Result], metric: str, extra_columns: Iterable[tuple[str, str]] = (),
                  ncu_columns: Iterable[tuple[str, str]] = ()) -> Table:
    """The comparison table: one row per variant, in the order they ran.

    Speedup is over the first GPU variant that passed; 'step' over the previous GPU row that passed.
    """
    t = Table(box=box.SIMPLE_HEAVY, show_lines=False, pad_edge=False)
    cols = ["#", "variant", "block", "grid", "median ms", "± IQR", "n"]
    rate = RATE_HEADER.get(metric)
    if rate:
        cols.append(rate)
        cols.append("% roofline" if metric == "bandwidth" else "% of ref")
    cols += ["speedup", "step"]
    extra_columns = list(extra_columns)
    ncu_columns = list(ncu_columns)
    cols += [h for _, h in extra_columns] + [h for _, h in ncu_columns] + ["check", "status"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("variant", "block", "grid", "status", "check") else "right",
                     overflow="fold")
    first = prev = None
    for i, r in enumerate(results, 1):
        med = r.median_ms
        speed = step = None
        if r.kind != "host" and r.status == PASSED and med:
            if first is None:
                first = med
            speed = first / med
            step = prev / med if prev else None
            prev = med
        row = [str(i), r.variant + (" [legacy]" if r.legacy else "") + (" [ref]" if r.kind == "library" else ""),
               r.block, r.grid, _ms(med) if med is not None else "–",
               _ms(r.stats.iqr) if r.stats else "–", str(r.stats.n) if r.stats else "–"]
        if rate:
            row.append(_fmt(rate_of(r, metric), 2 if metric == "rate" else 0))
            row.append(_fmt(r.pct_roofline, 1))
        row += [_fmt(speed, 2) + "×" if speed else "–", _fmt(step, 2) + "×" if step else "–"]
        for key, _ in extra_columns + ncu_columns:
            v = r.extra.get(key)
            row.append(_fmt(v, 4 if key.endswith("_ms") else 2) if isinstance(v, float) else "–" if v is None else str(v))
        if r.max_error is None:
            row.append("–")
        elif r.status == INCORRECT:
            row.append(Text(f"✗ {r.max_error:.2g}", style="bold red"))
        else:
            row.append(Text(f"✓ {r.max_error:.1g}" if r.max_error else "✓", style="green"))
        status = r.status if not r.reason else f"{r.status}: {r.reason}"
        row.append(Text(status, style=_STATUS_STYLE.get(r.status, "")))
        t.add_row(*[c if isinstance(c, Text) else Text(c) for c in row])  # plain text: "[legacy]" is no markup
    return t


RATE_HEADER = {"bandwidth": "GB/s", "flops": "GFLOP/s", "rate": "G items/s"}


def rate_of(r: Result, metric: str) -> float | None:
    """The row's figure for the family's metric: GB/s, GFLOP/s or G items/s (``extra["rate"]``)."""
    if metric == "rate":
        return r.extra.get("rate")
    return r.gbs if metric == "bandwidth" else r.gflops


def pct_column(results: Sequence[Result], metric: str) -> list[Result]:
    """For FLOP-rate and item-rate families, fill pct_roofline as % of the library reference row
    (cuBLAS, CuPy's sort)."""
    from dataclasses import replace

    if metric not in ("flops", "rate"):
        return list(results)
    ref = next((r for r in results if r.kind == "library" and r.status == PASSED and rate_of(r, metric)), None)
    if ref is None:
        return list(results)
    top = rate_of(ref, metric)
    return [replace(r, pct_roofline=100.0 * rate_of(r, metric) / top) if rate_of(r, metric) else r for r in results]


def write_json(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """Write the full run (environment, problem, raw samples) as JSON, atomically."""
    atomic_write(path, json.dumps(payload, indent=2, default=str) + "\n")


CSV_FIELDS = ["variant", "kind", "status", "block", "grid", "median_ms", "iqr_ms", "min_ms", "n",
              "gbs", "gflops", "pct_roofline", "max_error", "reason"]


def write_csv(path: str | os.PathLike, results: Sequence[Result]) -> None:
    """Write one row per variant as CSV, atomically."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    w.writeheader()
    for r in results:
        s = r.stats
        w.writerow({
            "variant": r.variant, "kind": r.kind, "status": r.status, "block": r.block, "grid": r.grid,
            "median_ms": s.median if s else "", "iqr_ms": s.iqr if s else "", "min_ms": s.min if s else "",
            "n": s.n if s else "", "gbs": r.gbs or "", "gflops": r.gflops or "",
            "pct_roofline": r.pct_roofline or "", "max_error": "" if r.max_error is None else r.max_error,
            "reason": r.reason,
        })
    atomic_write(path, buf.getvalue())


def simple_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> Table:
    """A plain table for list, compile and info."""
    t = Table(box=box.SIMPLE_HEAVY, title=title, title_justify="left", pad_edge=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    for r in rows:
        t.add_row(*[x if isinstance(x, Text) else Text(str(x)) for x in r])
    return t


def markdown_table(results: Sequence[Result], metric: str) -> str:
    """The comparison table as GitHub markdown (benchmark records, README)."""
    rate = RATE_HEADER.get(metric, "")
    pct = "% roofline" if metric == "bandwidth" else "% ref"
    head = ["variant", "block", "grid", "median ms", "IQR ms", "n"] + ([rate, pct] if rate else []) + ["status"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        s = r.stats
        row = [r.variant + (" (legacy)" if r.legacy else "") + (" (reference)" if r.kind == "library" else ""),
               r.block or "–", r.grid or "–", _ms(s.median) if s else "–", _ms(s.iqr) if s else "–",
               str(s.n) if s else "–"]
        if rate:
            row += [_fmt(rate_of(r, metric), 2 if metric == "rate" else 0), _fmt(r.pct_roofline, 1)]
        row.append(r.status + (f": {r.reason}" if r.reason else ""))
        lines.append("| " + " | ".join(x.replace("|", "/") for x in row) + " |")
    return "\n".join(lines)


# --- ncu tables -------------------------------------------------------------------------------------

_NCU_STYLE = {"ok": "green", "bad": "bold red", "warn": "yellow"}


def ncu_table(table: Any) -> Table:
    """Render a :class:`cudalab.ncu.NcuTable` (columns, rows of styled cells)."""
    t = Table(box=box.SIMPLE_HEAVY, pad_edge=False)
    for c in table.columns:
        t.add_column(c, justify="left" if c in ("variant", "kernel", "block", "grid", "status") else "right",
                     overflow="fold")
    for row in table.rows:
        t.add_row(*[Text(c.text, style=_NCU_STYLE.get(c.style, "")) for c in row])
    return t


def print_ncu(table: Any, problem: str = "", con: Console | None = None) -> None:
    """Print an ncu report: title, problem line, the table and the notes that explain it."""
    con = con or console()
    con.print(table.title, markup=False, highlight=False)
    if problem:
        con.print(problem, markup=False, highlight=False)
    con.print(ncu_table(table))
    for line in table.notes:
        con.print(line, markup=False, highlight=False)



# --- sanitize tables --------------------------------------------------------------------------------

_SANITIZE_STYLE = {"clean": "green", "findings": "bold red", "failed": "red", "skipped": "yellow"}


def sanitize_table(rows: Sequence[Any], title: str | None = None) -> Table:
    """One row per sanitizer run: variant, legacy?, tool, size, status, findings, first report line.

    Rows are :class:`cudalab.sanitize.Row`; a legacy variant's findings are shown dimmed, as they
    do not fail the run.
    """
    t = Table(box=box.SIMPLE_HEAVY, title=title, title_justify="left", pad_edge=False)
    for c in ("variant", "legacy", "tool", "size", "status", "findings", "first report line / reason"):
        t.add_column(c, justify="right" if c == "findings" else "left", overflow="fold")
    for r in rows:
        if r.findings is None:
            found = "–"
        else:
            found = str(r.findings) + (f" (+{r.warnings} warn)" if r.warnings else "")
        style = _SANITIZE_STYLE.get(r.status, "")
        if r.legacy and r.status in ("findings", "failed"):
            style = "dim " + style.replace("bold ", "")
        detail = r.first or r.reason
        if r.first and r.reason:
            detail = f"{r.first}; {r.reason}"
        t.add_row(Text(r.variant), "legacy" if r.legacy else "", r.tool, Text(str(r.size)),
                  Text(r.status, style=style), Text(str(found)), Text(detail, style=style if r.status != "clean" else ""))
    return t
