"""Pictures of saved runs (matplotlib, the optional extra ``plot``; the only module that imports it).

* one point: a bar per variant (GB/s or GFLOP/s), the roofline (or library ref) as a line, each bar
  labelled with its % of roofline;
* a sweep (points of one family that differ in one axis: size, block, dtype, an option, a define):
  one line per variant over that axis;
* a comparison: grouped bars, one group per variant and one bar per run (% of roofline when the
  GPUs differ).

Always headless (Agg): nothing opens a window. Call :func:`check` before any work so a missing
matplotlib costs the user one line, not a GPU run.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Sequence

from cudalab.errors import ToolMissingError, UsageError
from cudalab.files import check_output_path, write_bytes
from cudalab.records.results import Result, RunPoint, RunRecord, Status

SUFFIXES = (".png", ".svg", ".pdf")
_HOST_NOTE = "CPU (host) rows not drawn"


def check(path: str | os.PathLike, inputs: Sequence[str | os.PathLike] = ()) -> None:
    """Refuse a ``--plot`` path early, before a table is printed or a GPU opened: wrong suffix, a
    folder that is missing or read-only, a target that is no regular file or one of ``inputs`` (the run
    files the command reads, its other outputs), or no matplotlib.

    Raises:
        UsageError: the suffix is not .png, .svg or .pdf, or :func:`cudalab.files.check_output_path` refuses it.
        ToolMissingError: matplotlib cannot be imported.
    """
    if Path(path).suffix.lower() not in SUFFIXES:
        raise UsageError(f"--plot {path}: give a .png, .svg or .pdf file")
    check_output_path(path, "--plot", inputs)
    _matplotlib()


def _matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        raise ToolMissingError("--plot needs matplotlib: pip install 'cudalab[plot]'") from None


def _pyplot() -> Any:
    _matplotlib()
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")  # headless: CI runners and ssh sessions have no display
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def _rate(point: RunPoint, r: Result) -> float | None:
    if point.metric == "bandwidth":
        return r.gbs
    if point.metric == "flops":
        return r.gflops
    return r.median_ms


def _unit(metric: str) -> str:
    return {"bandwidth": "effective bandwidth (GB/s)", "flops": "GFLOP/s"}.get(metric, "median time (ms, lower is better)")


def _drawn(point: RunPoint) -> list[Result]:
    """Rows worth a bar: passed, timed, on the GPU."""
    return [r for r in point.results if r.kind != "host" and r.status == Status.PASSED and _rate(point, r)]


def _ref(point: RunPoint) -> tuple[float, str] | None:
    """The horizontal line: the roofline for bandwidth, the library row for FLOP rates."""
    if point.metric == "bandwidth" and point.roofline:
        return point.roofline.gbs, f"roofline {point.roofline.gbs:,.0f} GB/s ({point.roofline.source}, same run)"
    lib = next((r for r in point.results if r.kind == "library" and r.status == Status.PASSED and r.gflops), None)
    if point.metric == "flops" and lib:
        return lib.gflops, f"{lib.variant} (library ref) {lib.gflops:,.0f} GFLOP/s"
    return None


def _dims(dims: Sequence[Any]) -> str:
    """``[16777216]`` -> ``2^24`` (reductions are sized in powers of two), else ``16384x16384``."""
    if len(dims) == 1 and isinstance(dims[0], int) and dims[0] >= 1024 and dims[0] & (dims[0] - 1) == 0:
        return f"2^{dims[0].bit_length() - 1}"
    return "x".join(str(d) for d in dims)


def _size(point: RunPoint) -> str:
    return f"{_dims(point.problem.get('dims', ()))} {point.problem.get('dtype', '')}"


def _device(record: RunRecord) -> str:
    return record.gpu or "unknown GPU"


def _save(fig: Any, path: str | os.PathLike) -> None:
    """Render into memory, then write through the one atomic writer: matplotlib writes in place, so a
    full disk would otherwise leave a truncated picture where the old one was."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=Path(path).suffix.lower().lstrip("."), bbox_inches="tight", dpi=120)
    finally:
        plt.close(fig)
    write_bytes(path, buf.getvalue(), "--plot")


def sweep_axis(points: Sequence[RunPoint]) -> str | None:
    """The one axis a sweep varies (size, dtype, block, an option, a define), or None."""
    if len(points) < 2 or len({p.family for p in points}) != 1:
        return None
    axes = [_axes(p) for p in points]
    keys = set().union(*axes)
    differ = [k for k in sorted(keys) if len({a.get(k) for a in axes}) > 1]
    return differ[0] if len(differ) == 1 else None


def _axes(p: RunPoint) -> dict[str, str]:
    out = {"size": _dims(p.problem.get("dims", ())), "dtype": str(p.problem.get("dtype", "")),
           "block": p.block}
    out.update({str(k): str(v) for k, v in (p.problem.get("options") or {}).items()})
    out.update({f"-D{k}": v for k, v in p.defines})
    return out


def _numeric(text: str) -> float | None:
    """``16384x16384`` -> 268435456 (elements or threads), ``2^24``, ``256``; None if not numbers."""
    if text.startswith("2^") and text[2:].isdigit():
        return float(2 ** int(text[2:]))
    try:
        value = 1.0
        for part in text.split("x"):
            value *= float(part)
        return value
    except ValueError:
        return None


def plot_record(record: RunRecord, path: str | os.PathLike) -> None:
    """Draw a saved run: bars for one point, lines for a sweep, one bar panel per point otherwise."""
    plt = _pyplot()
    points = [p for p in record.points if _drawn(p)]
    if not points:
        raise UsageError("nothing to plot: no timed GPU rows that passed")
    axis = sweep_axis(points)
    if axis:
        fig, ax = plt.subplots(figsize=(10, 5.5))
        _sweep(ax, record, points, axis)
    else:
        fig, axes = plt.subplots(len(points), 1, figsize=(10, 4.8 * len(points)), squeeze=False)
        for ax, p in zip(axes[:, 0], points):
            _bars(ax, record, p)
    fig.tight_layout()
    _save(fig, path)


def _bars(ax: Any, record: RunRecord, point: RunPoint) -> None:
    rows = _drawn(point)
    values = [_rate(point, r) or 0.0 for r in rows]
    colors = ["#7f7f7f" if r.kind != "kernel" else "#1f77b4" for r in rows]
    bars = ax.bar(range(len(rows)), values, color=colors, edgecolor="black", linewidth=0.4)
    for bar, r in zip(bars, rows):
        if r.pct_roofline is not None and point.metric != "none":
            ax.annotate(f"{r.pct_roofline:.0f}%", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    ref = _ref(point)
    if ref:
        ax.axhline(ref[0], color="crimson", linestyle="--", linewidth=1.2, label=ref[1])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r.variant + (" (legacy)" if r.legacy else "") for r in rows], rotation=30, ha="right",
                       fontsize=8)
    ax.set_ylabel(_unit(point.metric))
    ax.set_ylim(0, max(values + [ref[0] if ref else 0.0]) * 1.15)
    block = f", --block {point.block}" if point.block else ""
    ax.set_title(f"cudalab {point.family} {_size(point)}{block} on {_device(record)}", fontsize=11)
    pct = "bar labels: % of roofline" if point.metric == "bandwidth" else "bar labels: % of library ref"
    ax.set_xlabel("variant  (" + (pct + "; " if point.metric != "none" else "") + "grey: driver/library rows; "
                  + _HOST_NOTE + ")", fontsize=8, color="dimgray")
    if ref:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.3)


def _sweep(ax: Any, record: RunRecord, points: list[RunPoint], axis: str) -> None:
    labels = [_axes(p)[axis] or "own" for p in points]
    nums = [_numeric(x) for x in labels]
    numeric = all(n is not None for n in nums) and len(set(nums)) == len(nums)
    xs = nums if numeric else list(range(len(points)))
    variants: list[str] = []
    for p in points:
        variants += [r.variant for r in _drawn(p) if r.variant not in variants]
    import matplotlib  # noqa: PLC0415

    colors = matplotlib.colormaps["tab10" if len(variants) <= 10 else "tab20"]
    for i, v in enumerate(variants):
        ys = []
        for p in points:
            r = next((r for r in _drawn(p) if r.variant == v), None)
            ys.append(_rate(p, r) if r else float("nan"))
        # Many variants: colours alone repeat or blur, so markers and dashes tell lines apart too.
        ax.plot(xs, ys, marker="osD^v<>ph*"[i % 10], linestyle="-" if i % 2 == 0 else "--", color=colors(i % 20),
                label=v)
    refs = [(_ref(p) or (float("nan"), ""))[0] for p in points]
    if any(x == x for x in refs):
        ax.plot(xs, refs, color="black", linestyle="--", linewidth=1.2,
                label="roofline (same run)" if points[0].metric == "bandwidth" else "library ref")
    if numeric and max(xs) / min(xs) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels(labels, rotation=0 if len(labels) < 8 else 30)
    ax.minorticks_off()
    ax.set_xlabel({"size": "problem size", "block": "block (--block)"}.get(axis, axis))
    ax.set_ylabel(_unit(points[0].metric))
    ax.set_ylim(bottom=0)
    p0 = points[0]
    fixed = {k: v for k, v in _axes(p0).items() if k != axis and v}
    ax.set_title(f"cudalab {p0.family} sweep over {axis} on {_device(record)} ("
                 + ", ".join(f"{k} {v}" for k, v in fixed.items()) + ")", fontsize=11)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, title="variant")
    ax.grid(alpha=0.3)


def plot_comparison(comparisons: Sequence[Any], path: str | os.PathLike) -> None:
    """Grouped bars: one group per matched row, one bar per run (A, then each compared file).

    On one GPU: the rate (GB/s, GFLOP/s), verdicts faster/slower. Across GPUs two panels: the median
    time (what each GPU took) above, and % of each run's own roofline below, which is what the verdict
    judges (more/less efficient), so a row that took less time is never drawn as 'slower'.

    Args:
        comparisons: :class:`cudalab.records.compare.Comparison` objects, all with the same base.
        path: the picture to write.
    """
    plt = _pyplot()
    by_roof = any(c.by_roofline for c in comparisons)
    runs = [f"A: {comparisons[0].base_name} ({comparisons[0].base_gpu or '?'})"] + [
        f"{chr(66 + i)}: {c.new_name} ({c.new_gpu or '?'})" for i, c in enumerate(comparisons)]
    problems = {row.problem for c in comparisons for row in c.rows}
    judged = _grouped_values(comparisons, lambda r: _value(r, by_roof), len(runs))
    keys, values, verdicts, metrics = judged
    if not keys:
        raise UsageError("nothing to plot: no timed GPU rows that passed")
    width_in = max(8.0, 0.9 * len(keys) * len(runs) / 2 + 3)
    if by_roof:
        times = _grouped_values(comparisons, _time_value, len(runs))[1]
        fig, (top, ax) = plt.subplots(2, 1, figsize=(width_in, 9.5), sharex=True)
        _grouped_bars(top, keys, runs, [[times.get(k, [float("nan")] * len(runs))[j] for k in keys]
                                        for j in range(len(runs))], {}, comparisons[0])
        top.set_ylabel("median time (ms, lower is better)")
        top.set_title("time per launch on each GPU (shown, not judged)", fontsize=9, color="dimgray")
    else:
        fig, ax = plt.subplots(figsize=(width_in, 5.5))
    _grouped_bars(ax, keys, runs, [[values[k][j] for k in keys] for j in range(len(runs))], verdicts, comparisons[0])
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([(f"{p}\n{v}" if len(problems) > 1 else v) for _, p, v in keys], rotation=30, ha="right",
                       fontsize=8)
    if by_roof:
        ax.set_ylabel({frozenset({"bandwidth"}): "% of roofline (measured in the same run)",
                       frozenset({"flops"}): "% of library ref (same run)"}.get(
            frozenset(metrics), "% of roofline (GB/s) or of library ref (GFLOP/s), same run"))
        ax.axhline(100, color="crimson", linestyle="--", linewidth=1)
        ax.set_title("efficiency: what the verdict judges", fontsize=9, color="dimgray")
        top_v = max((x for vs in values.values() for x in vs if x == x), default=1.0)
        ax.set_ylim(0, max(top_v, 100.0) * 1.25)  # room for the verdict labels
    else:
        ax.set_ylabel(_unit(next(iter(metrics), "none")))
    fams = sorted({f for f, _, _ in keys})
    size = next(iter(problems)) if len(problems) == 1 else f"{len(problems)} problems"
    how = ("GPUs differ: the verdict judges % of each run's roofline" if by_roof
           else f"on {comparisons[0].base_gpu or 'one GPU'}")
    fig.suptitle(f"cudalab compare: {', '.join(fams)} {size}, {how}", fontsize=11)
    words = "more / less efficient" if by_roof else "slower / faster"
    ax.set_xlabel(f"variant  ({words}: the verdict against A from the raw samples)", fontsize=8, color="dimgray")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, title="run")
    fig.tight_layout()
    _save(fig, path)


def _grouped_values(comparisons: Sequence[Any], value: Any, nruns: int) -> tuple[list, dict, dict, set]:
    """Per matched row: one value per run (nan where a run has none), the verdict words, the metrics."""
    keys: list[tuple[str, str, str]] = []
    values: dict[tuple[str, str, str], list[float]] = {}
    verdicts: dict[tuple[tuple[str, str, str], int], str] = {}
    metrics: set[str] = set()
    for i, c in enumerate(comparisons):
        for row in c.rows:
            if row.verdict.verdict in ("slower", "faster"):
                verdicts[(row.key, i + 1)] = (row.verdict.verdict, c.word(row.verdict.verdict))
            for j, res in ((0, row.base), (i + 1, row.new)):
                v = value(res)
                if v is None:
                    continue
                if row.key not in values:
                    keys.append(row.key)
                    values[row.key] = [float("nan")] * nruns
                values[row.key][j] = v
                metrics.add("bandwidth" if res.gbs and not res.gflops else "flops" if res.gflops else "none")
    return keys, values, verdicts, metrics


def _grouped_bars(ax: Any, keys: list, runs: list[str], per_run: list[list[float]], verdicts: dict, first: Any) -> None:
    width = 0.8 / len(runs)
    for j, name in enumerate(runs):
        bars = ax.bar([k + (j - (len(runs) - 1) / 2) * width for k in range(len(keys))], per_run[j], width,
                      label=name, edgecolor="black", linewidth=0.4)
        for bar, key in zip(bars, keys):
            v = verdicts.get((key, j))
            if v and bar.get_height() == bar.get_height():  # nan: no bar
                ax.annotate(v[1], (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                            fontsize=7, rotation=90, xytext=(0, 2), textcoords="offset points",
                            color="crimson" if v[0] == "slower" else "darkgreen")
    ax.grid(axis="y", alpha=0.3)


def _time_value(res: Result | None) -> float | None:
    if res is None or res.kind == "host" or res.status != Status.PASSED:
        return None
    return res.median_ms


def _value(res: Result | None, by_roofline: bool) -> float | None:
    if res is None or res.kind == "host" or res.status != Status.PASSED:
        return None
    if by_roofline:
        return res.pct_roofline
    return res.gbs or res.gflops or None
