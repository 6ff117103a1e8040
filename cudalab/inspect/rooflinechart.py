"""The data of a measured roofline chart, from saved runs (no GPU, no matplotlib).

* A FLOP family (matmul, gemm...): x = arithmetic intensity in FLOP per byte: the row's FLOPs over the DRAM
  bytes ncu counted for it (``ncu_dram_bytes``, a ``--ncu`` run), so each rung sits at its own intensity and
  a ladder climbs from memory-bound to compute-bound; without ncu's count, the problem's declared work (every
  rung of one problem at one x), and the legend says so. y = GFLOP/s; ceilings: the memory roofline measured
  in a run on that GPU or cached by ``cudalab roofline --measure`` (a slope: its fastest stream), the FFMA
  and tensor ceilings measured and cached by :mod:`cudalab.worker.ceilings`; a datasheet line (faint, named
  "datasheet") only where nothing was measured.
* A data-movement family (copy, transpose, reduce): y = GB/s against the memory roofline measured in the
  same run (its copy rate, and its read and write streams where measured), x = the ladder's rungs in run order.

Every variant is a labelled point, the ladder's order an arrow from each rung to the next; a sweep is one
trajectory per variant; several records (``compare``: two GPUs) are series of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from cudalab.errors import UsageError
from cudalab.records.results import PASSED, RunRecord

#: FP32 FLOP per SM per clock (FMA = 2), by architecture (CUDA programming guide throughput tables).
_FP32_PER_SM_CLK = {"sm_80": 128, "sm_86": 256, "sm_87": 256, "sm_89": 256, "sm_90": 256, "sm_100": 256}
#: Dense fp16 tensor FLOP per SM per clock with fp32 accumulation (A100: 312 TFLOP/s, H100 SXM: 989).
_FP16_TENSOR_PER_SM_CLK = {"sm_80": 1024, "sm_90": 4096}


@dataclass(frozen=True)
class Point:
    """One variant of one run at one problem.

    Attributes:
        series: what the point belongs to (the run's GPU, or the variant in a sweep): one colour each.
        label: the variant's name as drawn.
        x: FLOP per byte (FLOP families) or the rung's position (data-movement families).
        y: GFLOP/s or GB/s.
        source: ``declared`` (the problem's work) or ``ncu`` (counted DRAM bytes and FLOPs).
        pct: % of roofline (or of the library row) from the record, or None.
        kind: ``kernel``, ``library``, ``driver``.
        tip: the hover text.
    """

    series: str
    label: str
    x: float
    y: float
    source: str = "declared"
    pct: float | None = None
    kind: str = "kernel"
    tip: str = ""


@dataclass(frozen=True)
class Ceiling:
    """A horizontal roof (``slope`` False: y = value) or a memory slope (y = value x intensity).

    Attributes:
        measured: measured on the GPU (solid) or a datasheet figure (faint).
    """

    label: str
    value: float
    series: str
    measured: bool
    slope: bool = False


@dataclass(frozen=True)
class Chart:
    """What a roofline picture draws."""

    title: str
    flops: bool
    points: tuple[Point, ...]
    ceilings: tuple[Ceiling, ...]
    #: One path per series (ladder order, or a sweep's trajectory): indices into ``points``.
    paths: tuple[tuple[int, ...], ...] = ()
    notes: tuple[str, ...] = ()
    xticks: tuple[str, ...] = field(default=())
    #: What x is (FLOP families): the axis label and a legend entry say it.
    xlabel: str = ""


def datasheet_fma_gflops(arch: str, sm_count: int, sm_clock_mhz: float) -> float | None:
    """FP32 peak from the SM count and clock (None for an architecture not in the table)."""
    per = _FP32_PER_SM_CLK.get(arch.rstrip("af"))
    return per * sm_count * sm_clock_mhz / 1e3 if per and sm_count and sm_clock_mhz else None


def datasheet_tensor_gflops(arch: str, sm_count: int, sm_clock_mhz: float) -> float | None:
    """Dense fp16 tensor peak from the SM count and clock (None where not in the table)."""
    per = _FP16_TENSOR_PER_SM_CLK.get(arch.rstrip("af"))
    return per * sm_count * sm_clock_mhz / 1e3 if per and sm_count and sm_clock_mhz else None


def _arch(device: dict[str, Any]) -> str:
    """``sm_90`` from a record's compute capability (``"9.0"`` or ``[9, 0]``); '' when absent."""
    cc = device.get("compute_capability") or ()
    if isinstance(cc, str):
        cc = cc.split(".")
    return f"sm_{cc[0]}{cc[1]}" if len(cc) == 2 else ""


def _peak_gbs(device: dict[str, Any]) -> float | None:
    try:
        return 2 * float(device["mem_clock_mhz"]) * 1e6 * float(device["bus_width_bits"]) / 8 / 1e9 or None
    except (KeyError, TypeError, ValueError):
        return None


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def ncu_intensity(r: Any) -> float | None:
    """FLOP per DRAM byte of row ``r`` when ncu counted its DRAM bytes (``ncu_dram_bytes``): its FLOPs are
    ncu's count (``ncu_flops``) where kept, else the declared ones (GFLOP/s x its median: a verified rung did
    the problem's work); None without the count."""
    b = r.extra.get("ncu_dram_bytes")
    if not _num(b) or b <= 0:
        return None
    f = r.extra.get("ncu_flops")
    if not _num(f):
        if not r.gflops or r.stats is None or not r.stats.median:
            return None
        f = r.gflops * 1e6 * r.stats.median  # GFLOP/s x ms -> FLOP
    return f / b


def problem_of(family: str, rec: RunRecord) -> str:
    """``transpose 16384x16384 float32``: the problem (family, size, dtype), never option values or blocks (a
    sweep: its sizes' range)."""
    pts = rec.points
    sizes = list(dict.fromkeys("x".join(str(d) for d in p.problem.get("dims", ())) for p in pts))
    dtypes = list(dict.fromkeys(str(p.problem.get("dtype", "")) for p in pts))
    size = sizes[0] if len(sizes) == 1 else f"{sizes[0]} to {sizes[-1]}"
    return f"{family} {size} {'/'.join(dtypes)}"


def title_of(family: str, records: Sequence[tuple[str, RunRecord]], names: Sequence[str]) -> str:
    """The chart's title: the problem and the GPU (``transpose 16384x16384 float32 on NVIDIA H200``); several
    records of one problem name their GPUs (``... on NVIDIA H100 80GB HBM3 vs NVIDIA H200``)."""
    problems = list(dict.fromkeys(problem_of(family, rec) for _, rec in records))
    if len(problems) == 1:
        return f"{problems[0]} on {' vs '.join(names)}"
    return " vs ".join(f"{problem_of(family, rec)} on {n}" for (_, rec), n in zip(records, names))


def build_chart(records: Sequence[tuple[str, RunRecord]], measured: dict[str, Any] | None = None) -> Chart:
    """The chart of one or more saved runs of one family.

    Args:
        records: (name, record) pairs; with several, each is a series (its GPU's name, or the file's).
        measured: GPU name -> :class:`cudalab.worker.ceilings.Ceilings` (cached FMA and tensor peaks); a GPU
            without one gets the datasheet lines only, and a note saying so.

    Raises:
        UsageError: no passed, timed GPU row; or the records hold different families or metrics.
    """
    measured = measured or {}
    families = {p.family for _, rec in records for p in rec.points}
    metrics = {p.metric for _, rec in records for p in rec.points}
    if len(families) != 1 or len(metrics) != 1:
        raise UsageError(f"a roofline chart draws one family: these runs hold {', '.join(sorted(families))}")
    family, metric = families.pop(), metrics.pop()
    flops = metric == "flops"
    if metric not in ("flops", "bandwidth"):
        raise UsageError(f"{family} reports no rate (metric {metric}): nothing to place on a roofline")
    gpus = [rec.gpu or name for name, rec in records]
    names = [g if gpus.count(g) == 1 else f"{g} ({name})" for g, (name, _) in zip(gpus, records)]
    points: list[Point] = []
    paths: list[tuple[int, ...]] = []
    ceilings: list[Ceiling] = []
    notes: list[str] = []
    ticks: list[str] = []
    for series, (name, rec) in zip(names, records):
        sweep = len(rec.points) > 1
        by_variant: dict[str, list[int]] = {}
        for p in rec.points:
            ladder: list[int] = []
            for r in p.results:
                if r.kind == "host" or r.status != PASSED:
                    continue
                rate = r.gflops if flops else r.gbs
                if not rate:
                    continue
                src = "declared"
                if flops:
                    x = ncu_intensity(r)
                    if x is not None:
                        src = "ncu"
                    elif r.gbs:
                        x = r.gflops / r.gbs
                    else:
                        continue
                else:
                    if r.variant not in ticks:
                        ticks.append(r.variant)
                    x = float(ticks.index(r.variant))
                ser = f"{series}: {r.variant}" if sweep else series
                tip = (f"{r.variant} on {rec.gpu or name} ({p.label}): {rate:,.0f} {'GFLOP/s' if flops else 'GB/s'}"
                       + (f", {x:.2f} FLOP/B ({src})" if flops else "")
                       + (f", {r.pct_roofline:.1f}% of {'the library row' if flops else 'the roofline'}"
                          if r.pct_roofline is not None else ""))
                points.append(Point(series=ser, label=r.variant, x=x, y=rate, source=src, pct=r.pct_roofline,
                                    kind=r.kind, tip=tip))
                ladder.append(len(points) - 1)
                by_variant.setdefault(r.variant, []).append(len(points) - 1)
            if not sweep and len(ladder) > 1:
                paths.append(tuple(i for i in ladder if points[i].kind == "kernel"))
        if sweep:
            paths += [tuple(ix) for ix in by_variant.values() if len(ix) > 1]
        more, why = _ceilings(series, rec, flops, measured.get(rec.gpu))
        ceilings += more
        notes += why
    if not points:
        raise UsageError("nothing to chart: no timed GPU rows that passed")
    if not flops and len(records) == 1:
        ceilings = [c for c in ceilings if c.measured] + [c for c in ceilings if not c.measured]
    xlabel = ""
    if flops:
        how = {p.source for p in points}
        xlabel = ("measured intensity: FLOP per DRAM byte ncu counted for each rung" if how == {"ncu"} else
                  "declared intensity: the problem's FLOP per necessary byte (one x for every rung)"
                  + ("; squares: ncu's DRAM bytes" if "ncu" in how else ""))
        if how != {"ncu"}:
            notes.append("x is the declared intensity; a run with --ncu (DRAM bytes counted) places each rung at its own")
    title = title_of(family, records, names)
    return Chart(title=title, flops=flops, points=tuple(points), ceilings=tuple(ceilings), paths=tuple(paths),
                 notes=tuple(notes), xticks=tuple(ticks), xlabel=xlabel)


def _ceilings(series: str, rec: RunRecord, flops: bool, m: Any) -> tuple[list[Ceiling], list[str]]:
    """One record's ceilings and notes: measured lines first; a datasheet line, named so, only where no
    measured figure stands in for it (``m``: the GPU's cached :class:`cudalab.inspect.ceilings.Ceilings`)."""
    out: list[Ceiling] = []
    notes: list[str] = []
    roofs = [p.roofline for p in rec.points if p.roofline]
    best = max(roofs, key=lambda r: r.gbs) if roofs else None
    if best is not None and not flops:  # GB/s rows: the copy, and the streams each row's own roofline uses
        out.append(Ceiling(f"memory copy {best.gbs:,.0f} GB/s ({best.source}, measured, same run)", best.gbs, series, True))
        for what, gbs in (("read", best.read_gbs), ("write", best.write_gbs)):
            if gbs:
                out.append(Ceiling(f"{what} stream {gbs:,.0f} GB/s (measured, same run)", gbs, series, True))
    elif best is not None:  # a FLOP row's bytes are mostly reads: the slope is the fastest stream
        gbs = max(x for x in (best.gbs, best.read_gbs, best.write_gbs) if x)
        out.append(Ceiling(f"memory {gbs:,.0f} GB/s (fastest stream, measured in a run)", gbs, series, True, slope=True))
    elif flops and m is not None and m.memory_gbs:
        out.append(Ceiling(f"memory {m.memory_gbs:,.0f} GB/s (fastest stream, measured, cached)", m.memory_gbs,
                           series, True, slope=True))
    if not any(c.measured for c in out):
        peak = _peak_gbs(rec.device)
        if peak:
            out.append(Ceiling(f"DRAM datasheet {peak:,.0f} GB/s", peak, series, False, slope=flops))
        if flops:
            notes.append(f"{series}: no memory roofline measured (cudalab roofline --measure on that GPU caches one)")
    if not flops:
        return out, notes
    arch, sms, clk = _arch(rec.device), int(rec.device.get("sm_count") or 0), float(rec.device.get("sm_clock_mhz") or 0)
    if m is not None and m.fma_gflops:
        out.append(Ceiling(f"FP32 FFMA probe {m.fma_gflops / 1e3:,.1f} TFLOP/s (measured)", m.fma_gflops, series, True))
    else:
        fma = datasheet_fma_gflops(arch, sms, clk)
        if fma:
            out.append(Ceiling(f"FP32 datasheet {fma / 1e3:,.1f} TFLOP/s @ {clk:.0f} MHz", fma, series, False))
    if m is not None and m.tensor_gflops:
        out.append(Ceiling(f"fp16 tensor {m.tensor_gflops / 1e3:,.0f} TFLOP/s (measured: {m.tensor_source})",
                           m.tensor_gflops, series, True))
    else:
        tensor = datasheet_tensor_gflops(arch, sms, clk)
        if tensor:
            out.append(Ceiling(f"fp16 tensor datasheet {tensor / 1e3:,.0f} TFLOP/s", tensor, series, False))
    if m is None:
        notes.append(f"{series}: no measured FFMA / tensor ceilings cached for this GPU and clock (cudalab roofline "
                     "--measure on that GPU caches them): datasheet lines, named so")
    return out, notes


def is_counts(rec: RunRecord) -> bool:
    """Whether ``rec`` is an ncu record of DRAM counts (``cudalab ncu FAMILY --metrics memory --json``): nothing
    timed, some row counted."""
    rows = [r for p in rec.points for r in p.results]
    return bool(rows) and all(r.stats is None for r in rows) and any(_num(r.extra.get("ncu_dram_bytes")) for r in rows)


def lend_counts(rec: RunRecord, counts: Sequence[RunRecord]) -> RunRecord:
    """``rec`` with ncu's DRAM byte counts from ``counts`` (ncu records, :func:`is_counts`) on the rows of the
    same family, problem (dims, dtype, options) and variant that lack their own."""
    from dataclasses import replace  # noqa: PLC0415

    def key(p: Any) -> tuple:
        return (p.family, tuple(p.problem.get("dims", ())), p.problem.get("dtype"),
                tuple(sorted((p.problem.get("options") or {}).items())))

    have = {(key(p), r.variant): r.extra["ncu_dram_bytes"] for c in counts for p in c.points for r in p.results
            if _num(r.extra.get("ncu_dram_bytes"))}
    points = []
    for p in rec.points:
        rows = tuple(r if _num(r.extra.get("ncu_dram_bytes")) or (key(p), r.variant) not in have
                     else replace(r, extra=dict(r.extra, ncu_dram_bytes=have[(key(p), r.variant)])) for r in p.results)
        points.append(replace(p, results=rows))
    return replace(rec, points=tuple(points))
