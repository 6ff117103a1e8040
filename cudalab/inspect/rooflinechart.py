"""The data of a measured roofline chart, from saved runs (no GPU, no matplotlib).

* A FLOP family (matmul, gemm...): x = arithmetic intensity in FLOP per byte from the problem's declared
  work (its rate in GFLOP/s over its effective GB/s, both in the record), or from ncu's counted DRAM bytes
  and FLOPs when the row carries them (marked); y = GFLOP/s; ceilings: the memory roofline measured in a
  run on that GPU (a slope), the FMA and tensor peaks measured by :mod:`cudalab.worker.ceilings` when cached,
  and the datasheet figures at the record's clocks as faint lines.
* A data-movement family (copy, transpose, reduce): y = GB/s against its own ceiling only (the memory
  roofline measured in the same run), x = the ladder's rungs in run order.

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


def _ncu_intensity(extra: dict[str, Any]) -> float | None:
    """FLOP per DRAM byte when ncu counted both (``ncu_flops`` and ``ncu_dram_bytes`` in the row)."""
    f, b = extra.get("ncu_flops"), extra.get("ncu_dram_bytes")
    return f / b if isinstance(f, (int, float)) and isinstance(b, (int, float)) and b > 0 else None


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
    several = len(records) > 1
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
                    x = _ncu_intensity(r.extra)
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
        roofs = [p.roofline for p in rec.points if p.roofline]
        if roofs:
            best = max(roofs, key=lambda r: r.gbs)
            ceilings.append(Ceiling(f"memory {best.gbs:,.0f} GB/s ({best.source}, measured)", best.gbs, series,
                                    True, slope=flops))
        peak = _peak_gbs(rec.device)
        if peak:
            ceilings.append(Ceiling(f"DRAM datasheet {peak:,.0f} GB/s", peak, series, False, slope=flops))
        if flops:
            if not roofs:
                notes.append(f"{series}: no memory roofline measured in this run (add a copy or transpose run "
                             "of the same GPU to draw it)")
            arch, sms, clk = _arch(rec.device), int(rec.device.get("sm_count") or 0), float(rec.device.get("sm_clock_mhz") or 0)
            m = measured.get(rec.gpu)
            if m is not None and m.fma_gflops:
                ceilings.append(Ceiling(f"FP32 FMA {m.fma_gflops / 1e3:,.1f} TFLOP/s (measured)", m.fma_gflops, series, True))
            if m is not None and m.tensor_gflops:
                ceilings.append(Ceiling(f"fp16 tensor mma.sync {m.tensor_gflops / 1e3:,.0f} TFLOP/s (measured)",
                                        m.tensor_gflops, series, True))
            if m is None:
                notes.append(f"{series}: no measured FMA / tensor ceilings cached for this GPU and clock "
                             "(the GPU test of cudalab.worker.ceilings measures them): datasheet lines only")
            fma, tensor = datasheet_fma_gflops(arch, sms, clk), datasheet_tensor_gflops(arch, sms, clk)
            if fma:
                ceilings.append(Ceiling(f"FP32 datasheet {fma / 1e3:,.1f} TFLOP/s @ {clk:.0f} MHz", fma, series, False))
            if tensor:
                ceilings.append(Ceiling(f"fp16 tensor datasheet {tensor / 1e3:,.0f} TFLOP/s", tensor, series, False))
    if not points:
        raise UsageError("nothing to chart: no timed GPU rows that passed")
    if not flops and len(records) == 1:
        ceilings = [c for c in ceilings if c.measured] + [c for c in ceilings if not c.measured]
    prob = records[0][1].points[0].label if len(records[0][1].points) == 1 else "sweep"
    title = (f"cudalab {family} {prob}: measured roofline"
             + (f" on {names[0]}" if not several else f", {' vs '.join(names)}"))
    return Chart(title=title, flops=flops, points=tuple(points), ceilings=tuple(ceilings), paths=tuple(paths),
                 notes=tuple(notes), xticks=tuple(ticks))
