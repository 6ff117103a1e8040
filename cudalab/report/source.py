"""The ncu source view and advice under a table: per variant, its hot CUDA lines with ncu's per-line
figures, and the guided-analysis rules that fired, one line each.

Pure text (no rich markup): lines are fitted to the terminal width, the source text is what gets cut.
Works on any object with the :class:`cudalab.ncu.source.SourceLine` fields and the
:class:`cudalab.ncu.parse.Rule` fields, so saved runs (dicts read back) render the same way; this
module imports nothing of :mod:`cudalab.ncu`.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Sequence

from cudalab.report.instruments import View, register

#: What --source shows by default per variant.
DEFAULT_LINES = 8

SOURCE_LEGEND = (
    "source lines: hottest first by warp-stall samples (ncu's sampling: where the warps wait; % of the variant's "
    "samples), lines whose accesses exceed the ideal kept in; figures are ncu's, per CUDA line (its SASS summed).",
    "insts = warp instructions executed; thr = active threads per warp instruction (32 = no divergence); "
    "div = divergent branches.",
    "smem req / wf = shared-memory requests (warp instructions) and wavefronts; wf/req = wavefronts per request, "
    "the n-way bank-conflict figure (1 = conflict-free, 32 = every thread in one bank).",
    "gl req / sect/req = global-memory requests and L2 sectors per request (4 = 32 threads x 4 bytes coalesced, "
    "32 = one sector a thread).",
    "stalls = the line's top warp-stall reasons (long_sb: waiting on global memory, short_sb: shared memory / MIO, "
    "barrier: __syncthreads, wait: fixed latency, mio: the shared-memory pipe's queue).",
    "The kernels are always built with -lineinfo (it adds line tables to the cubin, not instructions): the "
    "timing table does not move with it.",
)
ADVICE_LEGEND = ("advice = ncu's guided-analysis rules that fired (OPT: a suggestion, with ncu's estimated "
                 "speedup of the kernel; WRN: a warning), their first sentence; INF notes are left out.")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _ratio(a: Any, b: Any) -> float | None:
    return a / b if a and b else None


def line_figures(ln: Any) -> dict[str, Any]:
    """The figures one line shows, from a SourceLine or its saved dict."""
    insts, thr = _get(ln, "insts"), _get(ln, "thread_insts")
    return {
        "line": int(_get(ln, "line", 0)), "file": _get(ln, "file", ""), "text": _get(ln, "text", ""),
        "samples": _get(ln, "samples"), "insts": insts, "thr": _ratio(thr, insts) if thr is not None else None,
        "smem_req": _get(ln, "shared_requests", 0.0), "smem_wf": _get(ln, "shared_wavefronts"),
        "wpr": _ratio(_get(ln, "shared_wavefronts"), _get(ln, "shared_requests", 0.0)),
        "gl_req": _get(ln, "global_requests", 0.0),
        "spr": _ratio(_get(ln, "global_sectors"), _get(ln, "global_requests", 0.0)),
        "div": _get(ln, "divergent"), "stalls": [tuple(s) for s in _get(ln, "stalls", ()) or ()],
        "excess": (_get(ln, "shared_excess") or 0.0) + (_get(ln, "global_excess") or 0.0),
    }


#: Fewer warp-stall samples than this over a variant's lines (a one-block kernel) rank nothing: lines are
#: then ranked by their excess wavefronts/sectors, memory requests and instructions.
MIN_SAMPLES = 50


def _rank(figs: Sequence[dict[str, Any]]) -> Callable[[dict[str, Any]], tuple]:
    if sum(f["samples"] or 0.0 for f in figs) >= MIN_SAMPLES:
        return lambda f: (-(f["samples"] or 0.0), -f["excess"], -(f["insts"] or 0.0), f["file"], f["line"])
    return lambda f: (-f["excess"], -(f["smem_req"] + f["gl_req"]), -(f["insts"] or 0.0), f["file"], f["line"])


def hot(lines: Sequence[Any], n: int = DEFAULT_LINES) -> list[dict[str, Any]]:
    """The ``n`` lines to show, hottest first: most warp-stall samples (where the warps wait); lines whose
    accesses exceed the ideal (bank conflicts, uncoalesced sectors) are kept within ``n``. A kernel too
    short to sample (under :data:`MIN_SAMPLES`) is ranked by excess, then memory requests, then instructions."""
    figs = [line_figures(x) for x in lines]
    key = _rank(figs)

    ranked = sorted((f for f in figs if f["samples"] or f["insts"] or f["excess"]), key=key)
    top = ranked[:n]
    for f in ranked[n:]:
        if f["excess"] <= 0:
            continue
        cool = next((x for x in reversed(top) if x["excess"] <= 0), None)
        if cool is None:
            break
        top[top.index(cool)] = f
    return sorted(top, key=key)


def _n(v: Any) -> str:
    """Counts compactly: 4,372 · 6.82M · 524K."""
    if v is None:
        return "–"
    v = float(v)
    if v == 0:
        return "0"
    if abs(v) < 100_000:
        return f"{v:,.0f}"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(v) >= div:
            x = v / div
            return f"{x:.3g}{suf}" if x < 100 else f"{x:.0f}{suf}"
    return f"{v:,.0f}"


def _r(v: Any, digits: int = 2) -> str:
    if v is None:
        return "–"
    return f"{v:.{digits}f}".rstrip("0").rstrip(".") if digits else f"{v:.0f}"


_COLS: tuple[tuple[str, Callable[[dict[str, Any], float], str]], ...] = (
    ("samples", lambda f, tot: "–" if f["samples"] is None else _n(f["samples"])),
    ("%", lambda f, tot: "" if not f["samples"] or not tot else f"{100 * f['samples'] / tot:.0f}%"),
    ("insts", lambda f, tot: _n(f["insts"])),
    ("thr", lambda f, tot: _r(f["thr"], 1)),
    ("smem req", lambda f, tot: _n(f["smem_req"]) if f["smem_req"] else ""),
    ("smem wf", lambda f, tot: _n(f["smem_wf"]) if f["smem_req"] else ""),
    ("wf/req", lambda f, tot: _r(f["wpr"]) if f["wpr"] is not None else ""),
    ("gl req", lambda f, tot: _n(f["gl_req"]) if f["gl_req"] else ""),
    ("sect/req", lambda f, tot: _r(f["spr"]) if f["spr"] is not None else ""),
    ("div", lambda f, tot: _n(f["div"]) if f["div"] else ""),
)


def _stalls(f: dict[str, Any], top: int = 2) -> str:
    tot = sum(v for _, v in f["stalls"])
    return ", ".join(f"{k} {100 * v / tot:.0f}%" for k, v in f["stalls"][:top]) if tot else ""


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _short(path: str) -> str:
    """A path as shown: relative to the working folder when inside it; a kernel of cudalab's own tree
    captured elsewhere (another checkout, the installed package, a saved export from another machine)
    from its ``cuda_src/`` (or ``kernels/``) folder on, so a committed export reads the same anywhere."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = ".."
    if not rel.startswith(".."):
        return rel
    parts = path.replace("\\", "/").split("/")
    for anchor in ("cuda_src", "kernels"):
        if anchor in parts[:-1]:
            i = len(parts) - 1 - parts[::-1].index(anchor)
            return "/".join(parts[i:])
    return path


def source_lines(variant: str, kernel: str, lines: Sequence[Any], n: int = DEFAULT_LINES,
                 width: int = 120) -> list[str]:
    """The text of one variant's hot-line table (header, one row a line)."""
    if not lines:
        return [f"{variant} ({kernel}): no per-line figures (no source page for this launch)"]
    figs = hot(lines, n)
    tot = sum((line_figures(x)["samples"] or 0.0) for x in lines)
    files = [line_figures(x)["file"] for x in lines]
    main = max(set(files), key=files.count)
    if tot >= MIN_SAMPLES:
        sampled = f"{_n(tot)} warp-stall samples"
    else:
        sampled = (f"{_n(tot)} warp-stall sample{'' if tot == 1 else 's'} "
                   "(too few to rank by: excess wavefronts/sectors first)")
    head = f"{variant} ({kernel}, {_short(main)}): {len(figs)} of {len(lines)} lines, {sampled}"
    for top in (2, 1):  # the second stall reason goes first when the terminal is narrow
        table = _table(figs, main, tot, width, top)
        if all(len(t) <= width for t in table) or top == 1:
            break
    return [head] + table


def _table(figs: Sequence[dict[str, Any]], main: str, tot: float, width: int, top: int) -> list[str]:
    names = ["line"] + [c for c, _ in _COLS] + ["stalls", "source"]
    cells = []
    for f in figs:
        where = str(f["line"]) if f["file"] == main else f"{os.path.basename(f['file'])}:{f['line']}"
        cells.append([where] + [fn(f, tot) for _, fn in _COLS] + [_stalls(f, top), f["text"]])
    # drop figure columns empty on every shown line (a kernel without shared memory has no smem columns)
    keep = [i for i, name in enumerate(names) if name in ("line", "source") or any(c[i] for c in cells)]
    names = [names[i] for i in keep]
    cells = [[c[i] for i in keep] for c in cells]
    widths = [max(len(names[i]), *(len(c[i]) for c in cells)) for i in range(len(names) - 1)]
    out = []

    def row(vals: list[str]) -> str:
        parts = []
        for i, v in enumerate(vals[:-1]):
            left = names[i] in ("stalls",)
            parts.append(v.ljust(widths[i]) if left else v.rjust(widths[i]))
        lead = "  " + "  ".join(parts) + "  "
        return lead + _fit(vals[-1], max(width - len(lead), 12))

    out.append(row(names))
    out.extend(row(c) for c in cells)
    return out


def advice_lines(rules: Sequence[Any], width: int = 120) -> list[str]:
    """One line a rule that fired: ``  advice  58% SharedMemoryConflicts: <first sentence>``; largest first."""
    shown = [r for r in rules if str(_get(r, "kind", "")).upper() != "INF"]
    shown.sort(key=lambda r: (-(_get(r, "speedup") or 0.0), _get(r, "name", "")))
    out = []
    for r in shown:
        sp = _get(r, "speedup")
        lead = f"  advice {('~' + _r(sp, 0) + '%') if sp else _get(r, 'kind', '')} ".ljust(15)
        text = f"{_get(r, 'name', '')}: {_first_sentence(_get(r, 'description', ''))}"
        out.append(lead + _fit(text, max(width - len(lead), 20)))
    return out


def _first_sentence(text: str) -> str:
    text = " ".join(str(text).split())
    for i in range(1, len(text) - 1):
        if text[i] != "." or text[max(i - 3, 0):i].lower().endswith(("e.g", "i.e")):
            continue
        nxt = text[i + 1]
        if nxt == " " or (nxt.isupper() and text[i - 1].islower()):  # ncu writes "requests.This results"
            return text[: i + 1]
    return text


def render_source(rows: Sequence[Any], lines_n: int = DEFAULT_LINES, source: bool = True, advice: bool = True,
                  width: int = 120) -> list[str]:
    """The whole view under a table: per variant, its hot lines and (or) its advice, then the legends.

    ``rows``: objects (or dicts) with ``variant``, ``kernel``, ``lines`` and ``rules``."""
    out: list[str] = []
    any_lines = any_rules = False
    for r in rows:
        lines, rules = _get(r, "lines", ()) or (), _get(r, "rules", ()) or ()
        if not lines and not rules:
            continue
        out.append("")
        if source:
            out.extend(source_lines(_get(r, "variant", ""), _get(r, "kernel", ""), lines, lines_n, width))
            any_lines = any_lines or bool(lines)
        elif rules:
            out.append(f"{_get(r, 'variant', '')} ({_get(r, 'kernel', '')})")
        if advice:
            adv = advice_lines(rules, width)
            out.extend(adv)
            any_rules = any_rules or bool(adv)
    if out:
        out.append("")
        if any_lines:
            out.extend(SOURCE_LEGEND)
        if any_rules:
            out.append(ADVICE_LEGEND)
    return out


# --- saved runs: what an instrument left in a row's extra -----------------------------------------------

_LINE_NUMBERS = ("samples", "insts", "thread_insts", "shared_requests", "shared_wavefronts", "global_requests",
                 "global_sectors", "divergent", "shared_excess", "global_excess")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _saved_line(d: Any) -> dict[str, Any] | None:
    """One saved source line with every field of its type, or None (a hand-edited file: the line is left out)."""
    if not isinstance(d, dict) or not isinstance(d.get("line", 0), int) or isinstance(d.get("line", 0), bool):
        return None
    if not all(isinstance(d.get(k, ""), str) for k in ("file", "text")):
        return None
    if not all(d.get(k) is None or _number(d.get(k)) for k in _LINE_NUMBERS):
        return None
    stalls = d.get("stalls", [])
    if not isinstance(stalls, list) or not all(
            isinstance(s, list) and len(s) == 2 and isinstance(s[0], str) and _number(s[1]) for s in stalls):
        return None
    return d


def _saved_rule(d: Any) -> dict[str, Any] | None:
    """One saved rule with its fields of their types, or None."""
    if not isinstance(d, dict) or not all(isinstance(d.get(k, ""), str) for k in ("kind", "name", "description")):
        return None
    return d if d.get("speedup") is None or _number(d.get("speedup")) else None


def _saved_list(value: Any, check: Callable[[Any], dict[str, Any] | None]) -> list[dict[str, Any]]:
    return [x for x in (check(v) for v in value) if x is not None] if isinstance(value, list) else []


def saved_rows(results: Sequence[Any]) -> list[dict[str, Any]]:
    """Rows of a saved point that carry ncu's lines or rules, as :func:`render_source` takes them (entries of
    the wrong shape, which cudalab never writes, are left out rather than crash the report)."""
    out = []
    for r in results:
        extra = _get(r, "extra", {}) or {}
        lines, rules = _saved_list(extra.get("ncu_lines"), _saved_line), _saved_list(extra.get("ncu_rules"), _saved_rule)
        if lines or rules:
            out.append({"variant": str(_get(r, "variant", "")), "kernel": str(extra.get("ncu_kernel", "")),
                        "lines": lines, "rules": rules})
    return out


def saved_view(results: Sequence[Any], width: int = 120, lines_n: int = DEFAULT_LINES) -> list[str]:
    """The source view and advice of a saved point (nothing when its rows hold none)."""
    rows = saved_rows(results)
    if not rows:
        return []
    has_lines = any(r["lines"] for r in rows)
    return render_source(rows, lines_n, source=has_lines, advice=True, width=width)


#: The ncu source view and advice as an instrument view of saved rows (keys ``ncu_lines``, ``ncu_rules``).
NCU_SOURCE_VIEW = register(View("ncu-source", ("ncu_lines", "ncu_rules"), lambda rows, width: saved_view(rows, width)))
