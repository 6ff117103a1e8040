"""bench_truth's record on paper: its markdown, and ``--merge``'s reading of an earlier record (pure: no GPU).

Split from scripts/bench_truth.py, which runs the parts and imports these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

#: The record's parts, in the order they run and print.
PARTS = ("truth", "calibrate", "throttle")
#: The methods of ``cudalab truth`` recorded beside the tables' figure (a document without one: '–').
METHODS = ("events", "batch", "graph", "cupti")


def _us(ms: float | None) -> str:
    return "–" if ms is None else f"{ms * 1e3:.3f}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1%}"


def _method_cell(f: dict[str, Any] | None, method: str) -> str:
    """``2.046 (-8.6%)``; ``(batch)`` after it where another method timed the row (cupti-python missing, say)."""
    if not f:
        return "–"
    text = f"{_us(f['ms'])} ({_pct(f['diff'])})"
    by = f.get("timed_by") or method
    return text + (f" ({by})" if f["ms"] is not None and by != method else "")


def _pass_cell(counts: dict[str, Any], method: str) -> str:
    """A method's pass count, and how many of its lines another method timed (their verdict is not its)."""
    if f"{method}_pass" not in counts:
        return "–"
    other = counts.get(f"{method}_other", 0)
    return f"{counts[f'{method}_pass']}" + (f" ({other} timed by another method)" if other else "")


def _ok(x: bool | None) -> str:
    return "–" if x is None else "pass" if x else "FAIL"


def _made(rec: dict[str, Any], part: str) -> list[str]:
    """A line under a part's heading naming the call that made it, when that was another call (``--merge``)."""
    m = (rec.get(part) or {}).get("made")
    if not m or (m.get("argv"), m.get("date"), m.get("commit")) == (rec.get("argv"), rec.get("date"), rec.get("commit")):
        return []
    return [f"Made by an earlier call: `python3 scripts/bench_truth.py {' '.join(m.get('argv', []))}` on "
            f"{m.get('date', '?')} (cudalab {m.get('commit', '?')}), kept by `--merge`.", ""]


def markdown(rec: dict[str, Any]) -> str:
    """The committed record's text."""
    gpu = rec.get("gpu", {})
    md = [f"# Measurement truth on {_gpu_name(rec) or 'the GPU'} (issues 46, 59)", "",
          f"Made by `python3 scripts/bench_truth.py {' '.join(rec.get('argv', []))}` on {rec.get('date', '?')} "
          f"(driver {gpu.get('driver_release') or gpu.get('driver_version', '?')}, CUDA {gpu.get('cuda_version', '?')}, "
          f"cudalab {rec.get('commit', '?')}). Every figure below comes from that run"
          + (", except the parts that name an earlier call (kept by `--merge`)." if any(_made(rec, p) for p in PARTS)
             else "."), ""]
    t = rec.get("truth")
    if t:
        md += ["## Short kernels: cudalab's tables against CUPTI", ""] + _made(rec, "truth") + _truth_md(t)
    c = rec.get("calibrate")
    if c:
        md += ["## calibrate: A/A pairs and a planted slowdown", ""] + _made(rec, "calibrate")
        if c.get("error"):
            md += [f"Not measured: {c['error']}", ""]
        else:
            v = c["verdict"]
            md += [f"{c['pairs']} A/A pairs ({c['runs']} fresh processes, {c['seconds']:.0f} s; "
                   + (f"{c['wanted']} were asked, {c['pairs']} fit in {c['budget_s']:.0f} s" if c["pairs"] < c["wanted"]
                      else f"all {c['wanted']} asked") + "). Each pair is two fresh processes timing copy vec4 and "
                   f"cudalab's calibration copy (`--n {c.get('n', '2k')}`); the planted change is the same copy slowed by a -D CALIB_DELAY delay "
                   "loop (run i's plain row against run i+1's slowed row), its size measured within each run.", "",
                   f"- floor (smallest effect threshold with at most 1% false verdicts): **{v['threshold']:.2%}**",
                   f"- faster/slower verdicts A/A at the floor: **{v['false_verdicts']} of {v['judgements']}** "
                   f"({v['false_rate']:.1%}): {_ok(v['false_ok'])} (bar: at most 1%)",
                   f"- planted slowdown (measured {v['planted']:.2%}) caught at the floor: **{v['detect_rate']:.0%}** "
                   f"of pairs: {_ok(v['detect_ok'])} (bar: at least 80%)",
                   "- false verdicts by threshold: " + ", ".join(f"{k}: {x:.1%}" for k, x in
                                                                 c["floor"]["false_by_threshold"].items()),
                   "- slowdown caught by threshold: " + ", ".join(f"{k}: {x:.0%}" for k, x in
                                                                  c["floor"]["detect_by_threshold"].items())]
            fl = c["floor"]
            if fl.get("short_judgements"):
                short = fl.get("short_min_effect")
                md.append(f"- rows under 20 µs (the same rows on a 64x64 copy, {fl['short_judgements']} A/A judgements): "
                          + (f"their own floor **{short:.2%}**" if short is not None else
                             "**no threshold** up to 20% keeps their false verdicts to 1%: compare leaves such rows "
                             "unsure on this GPU")
                          + "; false verdicts by threshold: " + ", ".join(
                              f"{k}: {x:.1%}" for k, x in fl.get("short_false_by_threshold", {}).items()))
            if c.get("sizing"):
                md.append("- the delay's checks (cycles: slowdown planted): " + ", ".join(
                    f"{x['delay_cycles']}: {'–' if x['planted'] is None else format(x['planted'], '.2%')}"
                    for x in c["sizing"]) + f"; the pairs' delay {c['delay_cycles']} cycles")
            md += [f"- between fresh processes, {row}'s median: {spread}" for row, spread in
                   process_spread(c.get("medians_ms", {})).items()] + [""]
    th = rec.get("throttle")
    if th:
        md += ["## Throttled samples under another process's heat", ""] + _made(rec, "throttle")
        if th.get("error"):
            md += [f"Not measured: {th['error']}", ""]
        else:
            md += [f"Heater: {th['heater']} ({th['heat_s']:.0f} s, the run started after {th['warm_s']:.0f} s). "
                   f"Telemetry: {th.get('telemetry_note') or 'NVML'}.", "",
                   "| variant | status | samples | throttled | SM MHz min | SM MHz | power W | temp °C | reasons |",
                   "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
            for r in th["rows"]:
                md.append(f"| {r['variant']} | {r['status']} | {r['samples']} | {r['throttled']} | {r['sm_mhz_min']} | "
                          f"{r['sm_mhz']} | {r['power_w']} | {r['temp_c']} | {r['reasons']} |")
            md += ["", th["note"], ""]
    return "\n".join(md).rstrip() + "\n"


def _truth_md(t: dict[str, Any]) -> list[str]:
    """The short-kernel part: the claim, ncu's offset, the pass counts, one line per row and temperature."""
    if "reference" not in t:   # a record made before issue 59 judged against ncu: its lines are in its .json
        return ["An earlier record's part, judged against ncu (before issue 59): its figures are in the .json.", ""]
    s, w = t["summary"], t.get("within", {})
    off = s["ncu_offset"]
    md = [f"`cudalab truth` per job, twice: as installed (`--methods {t.get('methods', '?')}`), and with "
          f"`{t.get('fallback_env') or '(no second pass)'}` (`--methods auto --no-ncu`: the tables' default without "
          f"cupti-python). The reference is CUPTI's span of each launch (cupti-python's activity records). Pass = "
          f"within {w.get('fraction', 0.05):.0%} or {w.get('ms', 1e-4) * 1e3:g} µs of it. `--launch auto` = cupti "
          f"where it loads, graph replay otherwise. Rows CUPTI timed at 20 µs or more are listed but not counted "
          f"({s['over_20us']}); rows without a CUPTI span: {s['no_cupti']}.", "",
          "ncu's offset on this GPU (the median of ncu − CUPTI over the rows; ncu − offset is the kernel's span): "
          + "; ".join(f"{temp} **{_off(o['offset_ms'])} µs** over {o['rows']} rows (from {_off(o['low_ms'])} to "
                      f"{_off(o['high_ms'])})" for temp, o in off.items()) + ".", "",
          "| temp | rows | tables pass | without cupti pass | " + " | ".join(f"{m} pass" for m in METHODS[:3])
          + " | worst tables diff | worst without cupti |",
          "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in METHODS[:3]) + " | ---: | ---: |"]
    for temp in ("cold", "hot"):
        c = s[temp]
        md.append(f"| {temp} | {c['n']} | {c['tables_pass']} | {c['nocupti_pass']} | "
                  + " | ".join(_pass_cell(c, m) for m in METHODS[:3])
                  + f" | {_pct(c['worst'])} | {_pct(c['worst_nocupti'])} |")
    md += ["", f"Every short row within the bar, cold and hot, with and without cupti-python, over at least "
               f"{w.get('min_rows', 20)} rows each: **{'yes' if s['all_pass'] else 'no'}**.", "",
           "| job | point | variant | temp | cupti µs | tables use | tables µs | without cupti | "
           + " | ".join(METHODS[:3]) + " | ncu µs (− cupti) |",
           "| --- | --- | --- | --- | ---: | --- | ---: | ---: | " + " | ".join("---:" for _ in METHODS[:3]) + " | ---: |"]
    for ln in t["lines"]:
        nc = ln.get("nocupti") or {}
        fall = (f"{_us(nc.get('ms'))} ({_pct(nc.get('diff'))}) {nc.get('method') or ''} {_ok(nc.get('pass'))}"
                if nc else "–")
        md.append(f"| {ln['job']} | {ln['point']} | {ln['variant']} | {ln['temp']} | {_us(ln['cupti_ms'])} | "
                  f"{ln['method'] or '–'} | {_us(ln['table_ms'])} ({_pct(ln['diff'])}) {_ok(ln['pass'])} | {fall} | "
                  + " | ".join(_method_cell(ln.get(m), m) for m in METHODS[:3])
                  + f" | {_us(ln['ncu_ms'])} ({_off(ln.get('ncu_minus_cupti_ms'))}) |")
    # why a method did not time its own lines (a capture refused, CUPTI refused), once per reason
    fell = {(m, (ln.get(m) or {}).get("note")) for ln in t["lines"] for m in ("graph", "cupti")}
    for m, note in sorted((m, n) for m, n in fell if n):
        md.append(f"\n{m}: {note}")
    for job, err in t.get("errors", {}).items():
        md.append(f"\n`{job}`: {err}")
    return md + [""]


def _off(ms: float | None) -> str:
    return "–" if ms is None else f"{ms * 1e3:+.3f}"


def process_spread(medians: dict[str, list[float | None]]) -> dict[str, str]:
    """Each row's medians over the fresh processes, as one line: its median, the spread (IQR) between processes
    and its whole range, relative to the median (what a verdict between two processes cannot see through)."""
    import numpy as np

    out = {}
    for row, ms in medians.items():
        xs = np.asarray([m for m in ms if m], dtype=float)
        if len(xs) < 4:
            continue
        q1, med, q3 = np.percentile(xs, [25, 50, 75])
        out[row] = (f"{med * 1e3:.2f} µs over {len(xs)} processes, IQR {(q3 - q1) / med:.2%}, "
                    f"range {(xs.min() / med - 1):+.2%} to {(xs.max() / med - 1):+.2%}")
    return out


def _gpu_name(rec: dict[str, Any]) -> str | None:
    """The GPU a record was made on: its truth part's device, else its calibrate part's GPU."""
    return (rec.get("gpu") or {}).get("name") or (rec.get("calibrate") or {}).get("gpu")


def _part_gpu(part: dict[str, Any]) -> str | None:
    """The GPU one part ran on (truth keeps the device's description, calibrate its name)."""
    g = part.get("gpu")
    return g.get("name") if isinstance(g, dict) else g


def load_earlier(path: str) -> dict[str, Any]:
    """An earlier record for ``--merge``: a .json file, or a folder holding exactly one ``*-truth.json``.

    Raises:
        ValueError: no such record, several in the folder, or not a record.
    """
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("*-truth.json"))
        if len(found) != 1:
            raise ValueError(f"--merge {path}: {len(found)} *-truth.json records in the folder (name one)")
        p = found[0]
    try:
        rec = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"--merge {path}: cannot read a record ({exc})") from None
    if not isinstance(rec, dict) or not any(k in rec for k in PARTS):
        raise ValueError(f"--merge {path}: not a bench_truth record (none of {', '.join(PARTS)})")
    return rec


def keep(rec: dict[str, Any], earlier: dict[str, Any], running: Sequence[str]) -> None:
    """Copy into ``rec`` the parts of ``earlier`` this call does not run, each naming the call that made it."""
    for part in PARTS:
        if part in running or not isinstance(earlier.get(part), dict):
            continue
        rec[part] = dict(earlier[part])
        rec[part].setdefault("made", {k: earlier.get(k) for k in ("argv", "date", "commit")})
    if earlier.get("gpu"):
        rec["gpu"] = earlier["gpu"]
