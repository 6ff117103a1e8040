"""Tables of ``cudalab compare``: the header, the rows with verdicts, the markdown summary."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from cudalab.report.core import _fmt, _ms


_VERDICT_STYLE = {"slower": "bold red", "faster": "green", "same": "", "unsure": "yellow"}


def comparison_lines(c: Any) -> list[str]:
    """The header of a comparison: the two runs, how rows are compared, how verdicts are reached."""
    lines = [f"cudalab compare: A = {c.base_name} ({c.base_gpu or 'GPU unknown'}), "
             f"B = {c.new_name} ({c.new_gpu or 'GPU unknown'})"]
    if c.by_roofline:
        lines.append(f"different GPUs ({c.base_gpu} vs {c.new_gpu}): compared by % of roofline (GB/s rows; the "
                     "roofline measured in each run) or % of the library ref (GFLOP/s rows); B/A = A % / B %, > 1 is slower")
    else:
        lines.append(f"same GPU ({c.base_gpu or '?'}): compared by median time; B/A = B ms / A ms, > 1 is slower")
    lines.append(f"verdict from the raw samples: Mann–Whitney U p < 0.05, |B/A − 1| ≥ {c.min_effect:.0%} "
                 f"(--min-effect) and the 95% bootstrap interval of B/A excluding 1 → faster/slower; interval inside "
                 f"±{c.min_effect:.0%} → same; otherwise unsure (the note says what would settle it)")
    return lines


def comparison_summary(c: Any) -> str:
    """``B vs A: 2 slower, 1 faster, 12 same, 3 unsure, 4 not compared``."""
    counts = [f"{c.count(v)} {v}" for v in ("slower", "faster", "same", "unsure")]
    return f"{c.new_name} vs {c.base_name}: " + ", ".join(counts) + f", {c.count('–')} not compared"


def _cmp_cells(c: Any, row: Any) -> list[str]:
    a, b, v = row.base, row.new, row.verdict
    ms = lambda r: _ms(r.stats.median) if r is not None and r.stats else "–"  # noqa: E731
    pct = lambda r: _fmt(r.pct_roofline, 1) if r is not None else "–"  # noqa: E731
    ratio = v.ratio
    if ratio is None and a is not None and b is not None:  # not judged, but the medians still say something
        if c.by_roofline and a.pct_roofline and b.pct_roofline:
            ratio = a.pct_roofline / b.pct_roofline
        elif not c.by_roofline and a.stats and b.stats and a.stats.median:
            ratio = b.stats.median / a.stats.median
    p = "–" if v.p is None else "<0.001" if v.p < 0.001 else f"{v.p:.3f}"
    n = f"{a.stats.n if a is not None and a.stats else '–'}/{b.stats.n if b is not None and b.stats else '–'}"
    return [row.family, row.problem, row.variant, ms(a), pct(a), ms(b), pct(b), n,
            "–" if ratio is None else f"{ratio:.3f}", p, v.verdict, v.note]


_CMP_COLUMNS = ["family", "problem", "variant", "A ms", "A % roof", "B ms", "B % roof", "n A/B", "B/A", "p",
                "verdict", "note"]


def comparison_table(c: Any) -> Table:
    """One row per matched (family, problem, variant); verdicts coloured. One problem: its columns are left
    out (the title names it)."""
    single = len({(r.family, r.problem) for r in c.rows}) == 1
    skip = 2 if single else 0
    title = f"{c.rows[0].family} {c.rows[0].problem}" if single else None
    t = Table(box=box.SIMPLE_HEAVY, pad_edge=False, title=title, title_justify="left")
    for col in _CMP_COLUMNS[skip:]:
        t.add_column(col, justify="left" if col in ("family", "problem", "variant", "verdict", "note") else "right",
                     overflow="fold")
    for row in c.rows:
        cells = _cmp_cells(c, row)
        style = _VERDICT_STYLE.get(row.verdict.verdict, "dim")
        t.add_row(*[Text(x, style=style if i == 10 else "") for i, x in enumerate(cells)][skip:])
    return t


def markdown_comparison(c: Any) -> str:
    """A comparison as GitHub markdown (``$GITHUB_STEP_SUMMARY``): header lines, table, summary."""
    lines = [line + "  " for line in comparison_lines(c)] + ["", "| " + " | ".join(_CMP_COLUMNS) + " |",
                                                             "|" + "---|" * len(_CMP_COLUMNS)]
    for row in c.rows:
        cells = _cmp_cells(c, row)
        if row.verdict.verdict in ("slower", "faster"):
            cells[10] = f"**{cells[10]}**"
        lines.append("| " + " | ".join(x.replace("|", "/") for x in cells) + " |")
    return "\n".join(lines + ["", comparison_summary(c)]) + "\n"


