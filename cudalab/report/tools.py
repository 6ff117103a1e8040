"""Tables of ``cudalab ncu`` and ``cudalab sanitize``: the one metric → column mapping and the legends."""

from __future__ import annotations

from typing import Any, Sequence

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cudalab.report.core import _fmt
from cudalab.report.console import console
from cudalab.report.core import NCU_COLUMNS
from cudalab.results import FAILED, FINDINGS, INCORRECT, MISSING, PASSED, SKIPPED


_STYLE = {"ok": "green", "bad": "bold red", "warn": "yellow"}
_ROW_STYLE = {PASSED: "ok", INCORRECT: "bad", FAILED: "bad", FINDINGS: "bad", SKIPPED: "warn", MISSING: "warn"}


def _ncu_fields(mset: Any) -> list[tuple[str, str, Any, int]]:
    """(extra key, ncu-table header, value of an NcuRow, digits) of a metric set, in table order."""
    from cudalab import ncu as N  # noqa: PLC0415  (pure; only tables need it)

    def v(name: str) -> Any:
        return lambda r: r.value(name)

    ms = ("ncu_ms", "ncu ns", lambda r: r.duration_ns, 0)
    if mset.name == "smem":
        return [("ncu_ld_req", "ld req", v(N.SMEM_LD_REQ), 0), ("ncu_ld_wf", "ld wf", v(N.SMEM_LD_WF), 0),
                ("ncu_ld_wpr", "ld wf/req", lambda r: r.per_request("ld"), 2),
                ("ncu_ld_conflicts", "ld conflicts", v(N.SMEM_LD_CONF), 0),
                ("ncu_st_req", "st req", v(N.SMEM_ST_REQ), 0), ("ncu_st_wf", "st wf", v(N.SMEM_ST_WF), 0),
                ("ncu_st_wpr", "st wf/req", lambda r: r.per_request("st"), 2),
                ("ncu_st_conflicts", "st conflicts", v(N.SMEM_ST_CONF), 0), ms]
    if mset.name == "memory":
        return [("ncu_dram", "DRAM % peak", v(N.DRAM_PCT), 1), ("ncu_gld", "global ld eff %", v(N.GLD_EFF), 1),
                ("ncu_gst", "global st eff %", v(N.GST_EFF), 1), ("ncu_l2", "L2 hit %", v(N.L2_HIT), 1), ms]
    return [(f"ncu:{m}", m, v(m), 2) for m in mset.metrics if m != N.DURATION] + [ms]


def ncu_values(row: Any, mset: Any) -> dict[str, Any]:
    """The ``extra`` entries ``cudalab <family> --ncu`` adds to a row (keys of :data:`NCU_COLUMNS`).

    ``ncu_ms`` is ncu's duration in ms at full precision; ``ncu_ld_ok`` / ``ncu_st_ok`` the ✓/✗ verdicts."""
    out: dict[str, Any] = {}
    for key, _, fn, _ in _ncu_fields(mset):
        if key in dict(NCU_COLUMNS):
            val = fn(row)
            out[key] = val / 1e6 if key == "ncu_ms" and val is not None else val
    for op in ("ld", "st"):
        if row.verdict(op) is not None and f"ncu_{op}_wpr" in out:
            out[f"ncu_{op}_ok"] = row.verdict(op)
    return out


def _wpr_text(row: Any, op: str) -> tuple[str, str]:
    got, ok, exp = row.per_request(op), row.verdict(op), row.expected(op)
    text = _fmt(got, 2)
    if ok is True:
        return f"{text} ✓", "ok"
    if ok is False:
        return f"{text} ✗ (expected {exp:g})", "bad"
    return text, ""


SMEM_LEGEND = (
    "wf/req = shared-memory wavefronts per request (one request per warp instruction): the n-way figure (1 = "
    "conflict-free, 32 = all 32 threads of a warp in one bank at different words); ✓/✗ against the variant's "
    "expected value (accepted: expected −{below:.0%} … +{above:g}).",
    "conflicts = ncu's bank-conflict counter: the extra wavefronts beyond one per request (not ways); on "
    "Ampere/Hopper it can also count arbitration between warps, so both figures are shown.",
)
MEMORY_LEGEND = ("global ld / st eff % = bytes a warp's global loads / stores use per 32-byte sector they touch "
                 "(100 = fully coalesced); DRAM % peak = DRAM throughput against its sustained peak.",)
NS_LEGEND = "ncu ns = gpu__time_duration in nanoseconds, summed over a variant's launches; ncu ms in run tables."


def ncu_legend(mset_name: str) -> list[str]:
    """The lines under an ncu table (or under a family table with ncu columns)."""
    from cudalab.ncu import ABOVE, BELOW  # noqa: PLC0415

    if mset_name == "smem":
        return [line.format(below=BELOW, above=ABOVE) for line in SMEM_LEGEND] + [NS_LEGEND]
    return (list(MEMORY_LEGEND) if mset_name == "memory" else []) + [NS_LEGEND]


def ncu_table(rep: Any) -> Table:
    """The ncu report as a table: one row per variant, the set's columns, status."""
    fields = _ncu_fields(rep.metric_set)
    t = Table(box=box.SIMPLE_HEAVY, pad_edge=False)
    for c in ["#", "variant", "kernel", "block", "grid"] + [h for _, h, _, _ in fields] + ["status"]:
        t.add_column(c, justify="left" if c in ("variant", "kernel", "block", "grid", "status") else "right",
                     overflow="fold")
    for i, r in enumerate(rep.rows, 1):
        ln = r.launch
        cells: list[Text] = [Text(str(i)), Text(r.variant), Text(r.kernel or "–"), Text(ln.block if ln else "–"),
                             Text(ln.grid if ln else "–")]
        for key, _, fn, digits in fields:
            if ln is None:
                cells.append(Text("–"))
            elif key in ("ncu_ld_wpr", "ncu_st_wpr"):
                text, style = _wpr_text(r, key[4:6])
                cells.append(Text(text, style=_STYLE.get(style, "")))
            else:
                cells.append(Text(_fmt(fn(r), digits)))
        cells.append(Text(str(r.status) + (f": {r.note}" if r.note else ""),
                          style=_STYLE.get(_ROW_STYLE.get(r.status, ""), "")))
        t.add_row(*cells)
    return t


def print_ncu(rep: Any, con: Console | None = None) -> None:
    """Print an ncu report: title, problem line, the table, its notes and legend."""
    con = con or console()
    con.print(f"cudalab ncu {rep.family} · metrics {rep.metric_set.name} · {rep.source}", markup=False)
    if rep.problem:
        con.print(rep.problem, markup=False)
    con.print(ncu_table(rep))
    for line in list(rep.notes) + ncu_legend(rep.metric_set.name):
        con.print(line, markup=False)


# --- sanitize tables --------------------------------------------------------------------------------

def sanitize_table(rows: Sequence[Any], title: str | None = None) -> Table:
    """One row per sanitizer run: variant, legacy?, tool, size, status, findings, first report line.

    Rows are :class:`cudalab.sanitize.Row`; a legacy variant's findings are dimmed: they do not fail the run.
    """
    t = Table(box=box.SIMPLE_HEAVY, title=title, title_justify="left", pad_edge=False)
    for c in ("variant", "legacy", "tool", "size", "status", "findings", "first report line / reason"):
        t.add_column(c, justify="right" if c == "findings" else "left", overflow="fold")
    for r in rows:
        found = "–" if r.findings is None else str(r.findings) + (f" (+{r.warnings} warn)" if r.warnings else "")
        style = _STYLE.get(_ROW_STYLE.get(r.status, ""), "")
        if r.legacy and r.status in (FINDINGS, FAILED):
            style = "dim " + style.replace("bold ", "")
        detail = "; ".join(filter(None, [r.first, r.reason]))
        t.add_row(Text(r.variant), "legacy" if r.legacy else "", r.tool, Text(str(r.size)),
                  Text(str(r.status), style=style), Text(found),
                  Text(detail, style=style if r.status != PASSED else ""))
    return t


SANITIZE_LEGACY_NOTE = ("legacy rows are faithful textbook code, undefined on current GPUs: their findings are "
                        "shown, not counted (see `cudalab list {family}`).")
