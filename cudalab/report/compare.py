"""Tables of ``cudalab compare``: the header, the rows with verdicts, the markdown summary."""

from __future__ import annotations

from typing import Any

from cudalab.records.compare import _pct
from cudalab.report.grid import Column, Grid
from cudalab.report.runtable import _fmt, _ms


_VERDICT_STYLE = {"slower": "bold red", "faster": "green", "same": "", "unsure": "yellow"}


def comparison_lines(c: Any) -> list[str]:
    """The header of a comparison: the two runs, how rows are compared, how verdicts are reached."""
    lines = [f"cudalab compare: A = {c.base_name} ({c.base_gpu or 'GPU unknown'}), "
             f"B = {c.new_name} ({c.new_gpu or 'GPU unknown'})"]
    if c.by_roofline:
        lines.append(f"different GPUs ({c.base_gpu} vs {c.new_gpu}): the verdict judges efficiency, % of each run's "
                     "own roofline (GB/s rows) or of its library ref (GFLOP/s rows): eff A/B = A % / B %, > 1: B less "
                     "efficient; time B/A = B ms / A ms (< 1: B took less time) is shown, not judged")
    else:
        lines.append(f"same GPU ({c.base_gpu or '?'}): compared by median time; B/A = B ms / A ms, > 1 is slower")
    ratio = "eff A/B" if c.by_roofline else "B/A"
    words = "more/less efficient" if c.by_roofline else "faster/slower"
    lines.append(f"verdict from the raw samples: Mann–Whitney U p < 0.05, |{ratio} − 1| ≥ {_pct(c.min_effect)} "
                 f"(--min-effect) and the 95% bootstrap interval of {ratio} excluding 1 → {words}; interval inside "
                 f"±{_pct(c.min_effect)} → same; otherwise unsure (the note says what would settle it)")
    return lines


def comparison_summary(c: Any) -> str:
    """``B vs A: 2 slower, 1 faster, 12 same, 3 unsure, 4 not compared``."""
    counts = [f"{c.count(v)} {c.word(v)}" for v in ("slower", "faster", "same", "unsure")]
    return f"{c.new_name} vs {c.base_name}: " + ", ".join(counts) + f", {c.count('–')} not compared"


def _columns(c: Any) -> list[str]:
    ratios = ["time B/A", "eff A/B"] if c.by_roofline else ["B/A"]
    return ["family", "problem", "variant", "A ms", "A % roof", "B ms", "B % roof", "n A/B", *ratios, "p",
            "verdict", "note"]


def _cmp_cells(c: Any, row: Any) -> list[str]:
    a, b, v = row.base, row.new, row.verdict
    ms = lambda r: _ms(r.stats.median) if r is not None and r.stats else "–"  # noqa: E731
    pct = lambda r: _fmt(r.pct_roofline, 1) if r is not None else "–"  # noqa: E731
    ratio = lambda x: "–" if x is None else f"{x:.3f}"  # noqa: E731
    # Not judged, the medians still say something: the verdict's ratio, else the plain one.
    judged = v.ratio if v.ratio is not None else row.efficiency_ratio if c.by_roofline else row.time_ratio
    ratios = [ratio(row.time_ratio), ratio(judged)] if c.by_roofline else [ratio(judged)]
    p = "–" if v.p is None else "<0.001" if v.p < 0.001 else f"{v.p:.3f}"
    n = f"{a.stats.n if a is not None and a.stats else '–'}/{b.stats.n if b is not None and b.stats else '–'}"
    return [row.family, row.problem, row.variant, ms(a), pct(a), ms(b), pct(b), n, *ratios, p,
            c.word(v.verdict), v.note]


_LEFT = ("family", "problem", "variant", "verdict", "note")
#: Hidden first on a terminal too narrow for the wrapped table (1 first).
_DROP = {"n A/B": 1, "p": 2, "A % roof": 3, "B % roof": 4}


def comparison_table(c: Any) -> Grid:
    """One row per matched (family, problem, variant); verdicts coloured. One problem: its columns are left
    out (the title names it). Numbers never fold; the note wraps as text on a narrow terminal."""
    single = len({(r.family, r.problem) for r in c.rows}) == 1
    skip = 2 if single else 0
    title = f"{c.rows[0].family} {c.rows[0].problem}" if single else None
    cols = _columns(c)
    t = Grid([Column(col, right=col not in _LEFT, wrap=col == "note", drop=_DROP.get(col, 0)) for col in cols[skip:]],
             title=title)
    verdict_at = cols.index("verdict")
    for row in c.rows:
        cells = _cmp_cells(c, row)
        style = _VERDICT_STYLE.get(row.verdict.verdict, "dim")
        t.add_row(*[(x, style if i == verdict_at else "") for i, x in enumerate(cells)][skip:])
    return t


def markdown_comparison(c: Any) -> str:
    """A comparison as GitHub markdown (``$GITHUB_STEP_SUMMARY``): header lines, table, summary."""
    cols = _columns(c)
    verdict_at = cols.index("verdict")
    lines = [line + "  " for line in comparison_lines(c)] + ["", "| " + " | ".join(cols) + " |",
                                                             "|" + "---|" * len(cols)]
    for row in c.rows:
        cells = _cmp_cells(c, row)
        if row.verdict.verdict in ("slower", "faster"):
            cells[verdict_at] = f"**{cells[verdict_at]}**"
        lines.append("| " + " | ".join(x.replace("|", "/") for x in cells) + " |")
    return "\n".join(lines + ["", comparison_summary(c)]) + "\n"
