"""bench_truth's verdicts on the short kernels (issue 59), pure: each row's figures against CUPTI's span, with and
without cupti-python, ncu's offset, the pass counts and the claim. Split from scripts/bench_truth.py, which runs
``cudalab truth`` and imports these.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

#: The methods of ``cudalab truth`` recorded beside the tables' figure.
METHODS = ("events", "batch", "graph", "cupti")
#: The methods of the first pass (as installed) and of the second (``CUDALAB_NO_CUPTI=1``).
FIRST_METHODS, FALLBACK_METHODS = "events,batch,graph,cupti,auto", "auto"
#: The claim (issue 59): within 5% of CUPTI's span, or 0.1 µs; over at least this many rows under 20 µs.
WITHIN, WITHIN_MS = 0.05, 0.1e-3
MIN_ROWS = 20
#: A row is short when CUPTI's span is under this (ms).
SHORT_MS = 0.02


def within(ms: float | None, ref_ms: float | None) -> bool | None:
    """Within 5% or 0.1 µs of CUPTI's span (None: a figure is missing)."""
    if ms is None or ref_ms is None or ref_ms <= 0:
        return None
    return abs(ms - ref_ms) <= max(WITHIN * ref_ms, WITHIN_MS)


def _diff(ms: float | None, ref_ms: float | None) -> float | None:
    return None if ms is None or not ref_ms else (ms - ref_ms) / ref_ms


def _reference(per: dict[str, Any]) -> float | None:
    """CUPTI's span of a row at one temperature, when CUPTI itself timed it (not a method standing in)."""
    c = per.get("cupti") or {}
    return c.get("median_ms") if c.get("timed_by") == "cupti" else None


def truth_rows(job: str, doc: dict[str, Any], fallback: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One line per (kernel row, temperature) of a ``cudalab truth --json`` document: CUPTI's span (the
    reference), the tables' figure and method, each method's figure, ncu's and ncu - CUPTI; with ``fallback``
    (the same job's document made with ``CUDALAB_NO_CUPTI=1``), the tables' figure without cupti-python."""
    other = {(r.get("point"), r["variant"]): r for r in (fallback or {}).get("rows", ())}
    out = []
    for r in doc.get("rows", ()):
        if r.get("kind") != "kernel":
            continue
        for temp in doc.get("temps", ("cold", "hot")):
            per = r.get(temp) or {}
            ref = _reference(per)
            ncu = (per.get("ncu") or {}).get("median_ms")
            auto = per.get("auto") or {}
            line = {"job": job, "point": r.get("point", ""), "variant": r["variant"], "temp": temp,
                    "status": r.get("status"), "cupti_ms": ref, "cupti_note": (per.get("cupti") or {}).get("note", ""),
                    "method": auto.get("method") or "", "table_ms": auto.get("median_ms"),
                    "diff": _diff(auto.get("median_ms"), ref), "pass": within(auto.get("median_ms"), ref),
                    "ncu_ms": ncu, "ncu_note": (per.get("ncu") or {}).get("note", ""),
                    "ncu_minus_cupti_ms": None if ncu is None or ref is None else ncu - ref}
            for m in METHODS:
                f = per.get(m) or {}
                line[m] = {"ms": f.get("median_ms"), "iqr_ms": f.get("iqr_ms"), "timed_by": f.get("timed_by", ""),
                           "note": f.get("note", ""), "diff": _diff(f.get("median_ms"), ref),
                           "pass": within(f.get("median_ms"), ref)}
            if fallback is not None:
                fa = ((other.get((r.get("point"), r["variant"])) or {}).get(temp) or {}).get("auto") or {}
                line["nocupti"] = {"method": fa.get("method") or "", "ms": fa.get("median_ms"),
                                   "note": fa.get("note", ""), "diff": _diff(fa.get("median_ms"), ref),
                                   "pass": within(fa.get("median_ms"), ref)}
            out.append(line)
    return out


def ncu_offsets(lines: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """ncu's fixed offset on the GPU per temperature: the median of (ncu - CUPTI) over every line with both
    (ms), with the row count and the spread (lowest, highest)."""
    out = {}
    for temp in ("cold", "hot"):
        d = sorted(ln["ncu_minus_cupti_ms"] for ln in lines
                   if ln["temp"] == temp and ln.get("ncu_minus_cupti_ms") is not None)
        out[temp] = {"offset_ms": statistics.median(d) if d else None, "rows": len(d),
                     "low_ms": d[0] if d else None, "high_ms": d[-1] if d else None}
    return out


def truth_summary(lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pass counts per temperature for the tables' figure (as installed, and without cupti-python) and for each
    method, over the lines CUPTI timed under 20 µs (the claim is about short kernels; the others are counted
    apart); ncu's offset; whether the claim holds: every short line within the bar in both passes, cold and
    hot, over at least :data:`MIN_ROWS` rows each."""
    short = [ln for ln in lines if ln["cupti_ms"] is not None and ln["cupti_ms"] < SHORT_MS]
    fallback = any("nocupti" in ln for ln in lines)
    out: dict[str, Any] = {"lines": len(lines), "short": len(short),
                           "no_cupti": sum(ln["cupti_ms"] is None for ln in lines),
                           "over_20us": sum(ln["cupti_ms"] is not None and ln["cupti_ms"] >= SHORT_MS for ln in lines),
                           "fallback_pass_run": fallback, "ncu_offset": ncu_offsets(lines)}
    ok = bool(short)   # a line without the second pass has no "nocupti" verdict: the claim fails below
    for temp in ("cold", "hot"):
        mine = [ln for ln in short if ln["temp"] == temp]
        nocupti = [ln.get("nocupti") or {} for ln in mine]
        out[temp] = {"n": len(mine), "tables_pass": sum(ln["pass"] is True for ln in mine),
                     "nocupti_pass": sum(f.get("pass") is True for f in nocupti),
                     **{f"{m}_pass": sum(ln[m]["pass"] is True for ln in mine) for m in METHODS if m != "cupti"},
                     # short lines another method timed (a capture refused, a kernel that cannot repeat: events):
                     # their verdict is not the method's own
                     **{f"{m}_other": sum(ln[m]["ms"] is not None and ln[m]["timed_by"] not in (m, "")
                                          for ln in mine) for m in METHODS if m != "cupti"},
                     "worst": max((abs(ln["diff"]) for ln in mine if ln["diff"] is not None), default=None),
                     "worst_nocupti": max((abs(f["diff"]) for f in nocupti if f.get("diff") is not None), default=None)}
        ok = ok and len(mine) >= MIN_ROWS and all(ln["pass"] is True for ln in mine) \
            and all(f.get("pass") is True for f in nocupti)
    out["all_pass"] = ok
    return out
