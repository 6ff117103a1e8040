"""Draw a measured roofline chart (:class:`cudalab.inspect.rooflinechart.Chart`) as PNG, SVG or a
self-contained HTML page whose points show their figures on hover (an inline SVG with ``<title>``
elements: no script, nothing fetched). matplotlib, headless, as :mod:`cudalab.report.plot`."""

from __future__ import annotations

import html
import io
import math
import os
import re
from pathlib import Path
from typing import Any, Sequence

from cudalab.errors import UsageError
from cudalab.files import check_output_path, write_bytes
from cudalab.inspect.rooflinechart import Chart
from cudalab.report.plot import _pyplot

SUFFIXES = (".png", ".svg", ".html")
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def check(path: str | os.PathLike, inputs: Sequence[str | os.PathLike] = ()) -> None:
    """Refuse an output path before any work: suffix, folder, no matplotlib, one of the ``inputs`` (the runs
    it reads, through a link or not: as ``report --plot``)."""
    if Path(path).suffix.lower() not in SUFFIXES:
        raise UsageError(f"{path}: give a .png, .svg or .html file")
    check_output_path(path, "--out", inputs)
    _pyplot()


def draw(chart: Chart, path: str | os.PathLike) -> None:
    """Write ``chart`` to ``path`` (.png, .svg or .html by its suffix), atomically."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(11.5, 6.8))
    series = list(dict.fromkeys(p.series for p in chart.points))
    color = {s: _COLORS[i % len(_COLORS)] for i, s in enumerate(series)}
    gpu_color = {s: color.get(s, _COLORS[i % len(_COLORS)]) for i, s in enumerate(dict.fromkeys(c.series for c in chart.ceilings))}
    if chart.flops:
        _flop_axes(ax, chart, gpu_color)
    else:
        _bandwidth_axes(ax, chart, gpu_color)
    for path_ix in chart.paths:  # the ladder's order (or a sweep's trajectory) as arrows
        for a, b in zip(path_ix, path_ix[1:]):
            pa, pb = chart.points[a], chart.points[b]
            ax.annotate("", xy=(pb.x, pb.y), xytext=(pa.x, pa.y), zorder=2,
                        arrowprops={"arrowstyle": "->", "color": color[pa.series], "alpha": 0.45, "lw": 1.1,
                                    "shrinkA": 5, "shrinkB": 5,
                                    "connectionstyle": "arc3,rad=0.35" if chart.flops else "arc3,rad=0.0"})
    for i, p in enumerate(chart.points):
        dot = ax.scatter([p.x], [p.y], s=46, zorder=4, color=color[p.series], edgecolors="black", linewidths=0.5,
                         marker="D" if p.kind != "kernel" else ("s" if p.source == "ncu" else "o"))
        dot.set_gid(f"cudalab-pt-{i}")
    _labels(ax, chart, color)
    handles = [plt.Line2D([], [], marker="o", linestyle="", color=color[s], label=s) for s in series]
    if chart.xlabel:  # what x is, in the legend too: a declared x puts every rung of a problem at one point
        handles.append(plt.Line2D([], [], linestyle="", label=f"x = {chart.xlabel}"))
    ax.legend(handles=handles + [h for h in ax.get_legend_handles_labels()[0] if h not in handles],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(chart.title, fontsize=11)
    foot = "arrows: the ladder's order; solid lines: measured on this GPU; faint dashed: datasheet"
    fig.text(0.01, 0.01, "\n".join((foot, *chart.notes)), fontsize=7.5, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, 0.04 + 0.022 * len(chart.notes), 1, 1))
    _save(fig, chart, path)


def _flop_axes(ax: Any, chart: Chart, color: dict[str, str]) -> None:
    xs = [p.x for p in chart.points]
    roofs = [c.value for c in chart.ceilings if not c.slope]
    mems = [c.value for c in chart.ceilings if c.slope]
    ridges = [r / m for r in roofs for m in mems]
    lo = min(xs + ridges) / 8
    hi = max(xs + ridges) * 6
    ax.set_xscale("log")
    ax.set_yscale("log")
    top = max(roofs + [p.y for p in chart.points]) * 2.2
    bottom = min(p.y for p in chart.points) / 6
    for c in chart.ceilings:
        style = {"color": color.get(c.series, "black"), "lw": 1.6 if c.measured else 1.0,
                 "ls": "-" if c.measured else "--", "alpha": 0.9 if c.measured else 0.35}
        if c.slope:
            x_end = min(hi, (max(roofs) if roofs else top) / c.value)  # the classic roof: the slope meets the peak
            ax.plot([lo, x_end], [c.value * lo, c.value * x_end], **style, label=c.label)
        else:
            ax.plot([lo, hi], [c.value, c.value], **style, label=c.label)
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom, top)
    ax.set_xlabel(f"arithmetic intensity ({chart.xlabel or 'FLOP per byte'})", fontsize=9)
    ax.set_ylabel("achieved GFLOP/s (log)")
    ax.grid(alpha=0.25, which="both")


def _bandwidth_axes(ax: Any, chart: Chart, color: dict[str, str]) -> None:
    n = len(chart.xticks)
    for c in chart.ceilings:
        ax.plot([-0.5, n - 0.5], [c.value, c.value], color=color.get(c.series, "black"), lw=1.6 if c.measured else 1.0,
                ls="-" if c.measured else "--", alpha=0.9 if c.measured else 0.35, label=c.label)
    ax.set_xticks(range(n))
    ax.set_xticklabels(chart.xticks, rotation=25, ha="right", fontsize=9)
    ax.set_xlim(-0.5, n - 0.5)
    ax.set_ylim(0, max([c.value for c in chart.ceilings] + [p.y for p in chart.points]) * 1.12)
    ax.set_xlabel("variant (the ladder, in run order)")
    ax.set_ylabel("effective bandwidth (GB/s)")
    ax.grid(axis="y", alpha=0.25)


def _labels(ax: Any, chart: Chart, color: dict[str, str]) -> None:
    """Label every point without overlaps: FLOP charts stack the labels of points that share an x in a
    column to their right (leader lines to the points); bandwidth charts write the rate above the point,
    series side by side."""
    if not chart.flops:
        series = list(dict.fromkeys(p.series for p in chart.points))
        for p in chart.points:
            k = series.index(p.series)
            dx = (k - (len(series) - 1) / 2) * 34
            pct = f"\n{p.pct:.0f}%" if p.pct is not None else ""
            ax.annotate(f"{p.y:,.0f}{pct}", (p.x, p.y), xytext=(dx, 8), textcoords="offset points", ha="center",
                        va="bottom", fontsize=7.5, color=color[p.series])
        return
    lo, hi = (math.log10(v) for v in ax.get_ylim())
    gap = (hi - lo) * 0.045
    groups: dict[float, list[int]] = {}
    for i, p in enumerate(chart.points):
        key = next((g for g in groups if abs(math.log10(g) - math.log10(p.x)) < 0.15), p.x)
        groups.setdefault(key, []).append(i)
    for members in groups.values():
        members.sort(key=lambda i: chart.points[i].y)
        ys, last = [], -math.inf
        for i in members:
            y = max(math.log10(chart.points[i].y), last + gap)
            ys.append(y)
            last = y
        for i, y in zip(members, ys):
            p = chart.points[i]
            pct = f" ({p.pct:.0f}%)" if p.pct is not None else ""
            ax.annotate(f"{p.label} {p.y / 1e3:,.1f} TFLOP/s{pct}", (p.x, p.y), xytext=(p.x * 1.9, 10 ** y),
                        textcoords="data", fontsize=8, va="center", color=color[p.series],
                        arrowprops={"arrowstyle": "-", "color": "gray", "lw": 0.5, "alpha": 0.7})


def _save(fig: Any, chart: Chart, path: str | os.PathLike) -> None:
    import matplotlib.pyplot as plt  # noqa: PLC0415

    suffix = Path(path).suffix.lower()
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png" if suffix == ".png" else "svg", bbox_inches="tight", dpi=130)
    finally:
        plt.close(fig)
    data = buf.getvalue()
    if suffix == ".html":
        data = page(chart, data.decode()).encode()
    write_bytes(path, data, "--out")


def with_titles(svg: str, chart: Chart) -> str:
    """The SVG with each point's figures as its ``<title>`` (what a browser shows on hover)."""
    def add(m: re.Match) -> str:
        i = int(m.group(2))
        return f"{m.group(1)}<title>{html.escape(chart.points[i].tip)}</title>"

    return re.sub(r'(<g id="cudalab-pt-(\d+)">)', add, svg)


def page(chart: Chart, svg: str) -> str:
    """A self-contained HTML page: the chart as inline SVG with hover titles, and a table of the points."""
    svg = with_titles(svg[svg.index("<svg"):], chart)
    rows = "".join(f"<tr><td>{html.escape(p.series)}</td><td>{html.escape(p.label)}</td><td>{p.y:,.1f}</td>"
                   f"<td>{'' if not chart.flops else f'{p.x:.2f} ({p.source})'}</td>"
                   f"<td>{'' if p.pct is None else f'{p.pct:.1f}'}</td></tr>" for p in chart.points)
    unit = "GFLOP/s" if chart.flops else "GB/s"
    return ("<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>" + html.escape(chart.title) + "</title>"
            "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;font-size:13px}"
            "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}svg{max-width:100%;height:auto}</style>"
            "</head><body>\n" + svg + "\n<p>Hover a point for its figures.</p><table><tr><th>series</th><th>variant</th>"
            f"<th>{unit}</th><th>FLOP/B</th><th>%</th></tr>" + rows + "</table>"
            + "".join(f"<p>{html.escape(n)}</p>" for n in chart.notes) + "</body></html>\n")
