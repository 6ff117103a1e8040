"""``cudalab roofline``: a measured roofline chart of saved runs (PNG, SVG or HTML with hover labels)."""

from __future__ import annotations

import click

from cudalab.cli.app import cli
from cudalab.cli.options import DEVICE_INDEX


@cli.command("roofline")
@click.argument("runs", nargs=-1, metavar="RUN.json [RUN.json...]")
@click.option("--out", "-o", "out", default=None, metavar="FILE", help="The chart: .png, .svg or .html (hover labels).")
@click.option("--ceilings/--no-ceilings", default=True, show_default=True,
              help="Draw the FMA, tensor and memory ceilings measured on each GPU: from the cache, or measured "
                   "now (about a minute, once per GPU and clock) where the cache lacks them and this machine has "
                   "that GPU.")
@click.option("--measure", is_flag=True,
              help="First measure this machine's GPU ceilings (FFMA probe, best of the mma.sync probe and cuBLAS / "
                   "the wgmma kernel at 8192³ fp16, copy, read and write streams) and cache them per GPU and SM "
                   "clock (about a minute); RUN.json files are optional then.")
@click.option("--device", type=DEVICE_INDEX, default=0, show_default=True, help="The GPU --measure measures.")
def roofline_cmd(runs: tuple[str, ...], out: str | None, ceilings: bool, measure: bool, device: int) -> None:
    """Draw saved runs of one family on a measured roofline (no GPU needed, except for --measure).

    FLOP families: GFLOP/s against FLOP per byte: each rung's FLOPs over the DRAM bytes ncu counted for it
    (a run with --ncu, or an ncu record of the same problem given beside the run: cudalab ncu FAMILY
    --metrics memory --json), else the problem's declared work (one x for every rung, and the legend says
    so); under the memory roofline and the FFMA and tensor ceilings measured on that GPU (cached; measured
    first, about a minute, where the cache lacks them and that GPU is here; a line only a datasheet gave is
    faint and named so). Data-movement families: GB/s
    per rung against the copy and the read and write streams measured in the same run. Arrows follow the
    ladder; a sweep draws one trajectory per variant; several files (two GPUs) share one chart.

    \b
    Examples:
      cudalab roofline h100-transpose.json -o docs/plots/transpose-roofline.png
      cudalab roofline h100-matmul.json h100-transpose.json -o matmul.html
      cudalab roofline h200-matmul.json h200-matmul-ncu.json -o matmul.svg
      cudalab roofline h100.json h200.json -o two-gpus.svg
      cudalab roofline --measure
    """
    from cudalab.inspect import ceilings as measured_ceilings  # noqa: PLC0415
    from cudalab.report import plot_roofline  # noqa: PLC0415
    from cudalab.inspect.rooflinechart import build_chart, is_counts, lend_counts  # noqa: PLC0415
    from cudalab.records.results import load_record  # noqa: PLC0415

    from cudalab.errors import UsageError  # noqa: PLC0415

    if runs and not out:
        raise UsageError("roofline: --out FILE is required to draw RUN.json files (.png, .svg or .html)")
    if not runs and not measure:
        raise UsageError("roofline: give RUN.json files to draw (with --out FILE), or --measure")
    if out:
        plot_roofline.check(out, runs)  # before any work; never over a run it reads
    fresh = None
    if measure:
        fresh = _measure(device)
        measured_ceilings.store(fresh)
        click.echo(f"{measured_ceilings.describe(fresh)}; kept in "
                   f"{measured_ceilings.cache_file(fresh.gpu, fresh.sm_clock_mhz)}")
    if not runs:
        return
    records = [(path, load_record(path)) for path in runs]
    # an ncu record of DRAM counts (cudalab ncu FAMILY --metrics memory --json) places the same rows of the runs
    counts = [r for _, r in records if is_counts(r)]
    records = [(p, lend_counts(r, counts)) for p, r in records if not is_counts(r)]
    if not records:
        raise UsageError("roofline: only ncu records given: add the timed run (RUN.json) whose rows they count")
    # A run of another family on the same GPU lends its measured memory roofline (a matmul run has none).
    families = [{p.family for p in rec.points} for _, rec in records]
    main = families[0]
    drawn = [(p, r) for (p, r), f in zip(records, families) if f == main]
    lenders = [r for (_, r), f in zip(records, families) if f != main]
    gpus = {r.gpu for _, r in drawn}
    for (path, r), f in zip(records, families):
        if f != main and not (r.gpu in gpus and any(p.roofline for p in r.points)):
            raise UsageError(f"{path} is a run of {', '.join(sorted(f))} on {r.gpu or 'another GPU'}: a chart draws "
                             f"one family ({', '.join(sorted(main))}); another family's run only lends its measured "
                             "memory roofline to runs on the same GPU")
    if lenders:
        drawn = [(p, _lend_roofline(r, lenders)) for p, r in drawn]
    found = _ceilings_for([rec for _, rec in drawn], device, fresh) if ceilings else {}
    plot_roofline.draw(build_chart(drawn, found), out)
    click.echo(f"wrote {out}")


def _ceilings_for(records, device: int, fresh) -> dict:
    """The measured ceilings of each record's GPU and clock: cached, ``fresh`` (just measured), or measured now
    where this machine's GPU ``device`` is the one missing; every GPU left without them gets one line saying how."""
    from cudalab.errors import GpuError  # noqa: PLC0415
    from cudalab.inspect import ceilings as measured_ceilings  # noqa: PLC0415

    found, missing = {}, {}
    for rec in records:
        clock = int(rec.device.get("sm_clock_mhz") or 0)
        c = measured_ceilings.cached(rec.gpu, clock)
        if c is not None:
            found[rec.gpu] = c
        else:
            missing[rec.gpu] = clock
    if missing and fresh is None and _gpu_here(device) in missing:
        click.echo("measuring this GPU's ceilings for the chart (FFMA and tensor probes, memory streams: about a "
                   "minute, once per GPU and clock)...")
        try:
            fresh = _measure(device)
        except GpuError as exc:
            click.echo(f"the ceilings could not be measured: {exc}")
        else:
            measured_ceilings.store(fresh)
            click.echo(measured_ceilings.describe(fresh))
    for gpu, clock in missing.items():
        if fresh is not None and (fresh.gpu, fresh.sm_clock_mhz) == (gpu, clock):
            found[gpu] = fresh
        else:
            name = gpu or "the run's GPU"
            click.echo(f"{name} at {clock} MHz: no measured ceilings cached, datasheet lines drawn "
                       "(on that GPU, cudalab roofline --measure measures and caches them once)")
    return found


def _gpu_here(device: int) -> str | None:
    """This machine's GPU ``device`` by name (:func:`cudalab.instruments.driverquery.gpu_name`), None with none here."""
    from cudalab.instruments.driverquery import gpu_name  # noqa: PLC0415

    return gpu_name(device)


def _measure(device: int):
    """The ceilings a GPU worker measures on GPU ``device`` (one short-lived worker, as ``cudalab info`` asks)."""
    from cudalab.errors import GpuError  # noqa: PLC0415
    from cudalab.inspect.ceilings import Ceilings  # noqa: PLC0415
    from cudalab.execute.local.drive import Session  # noqa: PLC0415

    session = Session([device])
    try:
        ans = session.ask(device, op="ceilings")
    finally:
        session.close()
    got = ans.get("ceilings")
    if not isinstance(got, dict):
        raise GpuError(f"roofline --measure: the ceilings could not be measured ({ans.get('reason') or 'no answer'})")
    return Ceilings(**got)


def _lend_roofline(rec, lenders):
    """``rec`` with the best memory roofline that another run on the same GPU measured, on points that lack one."""
    from dataclasses import replace  # noqa: PLC0415

    roofs = [p.roofline for other in lenders if other.gpu == rec.gpu for p in other.points if p.roofline]
    if not roofs:
        return rec
    best = max(roofs, key=lambda r: r.gbs)
    return replace(rec, points=tuple(p if p.roofline else replace(p, roofline=best) for p in rec.points))
