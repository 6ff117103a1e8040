"""``cudalab calibrate``: this GPU's noise floor from A/A pairs of fresh processes (``compare`` and tune use it)."""

from __future__ import annotations

import json

import click

from cudalab.cli.app import CONTEXT, cli, echo_folded
from cudalab.cli.options import DEVICE_INDEX, POSITIVE_SECONDS


@cli.command("calibrate", context_settings=CONTEXT)
@click.option("--pairs", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="A/A pairs (pairs + 3 to pairs + 5 fresh processes: about 1-2 s each).")
# 4k: 2 x 64 MiB, past the L2 of an H100 or H200 (50-60 MB). At 2k, L2-resident, fresh processes differed
# by several percent on an H200 (44% false verdicts at 0.25%, a 5% floor); at 4k and 8k by 0.1-0.5% (0.75%).
@click.option("--n", default="4k", show_default=True, help="The copy's size (as cudalab copy --n).")
@click.option("--budget", type=POSITIVE_SECONDS, default=0.2, show_default=True, help="Seconds of sampling per row.")
@click.option("--min-samples", type=click.IntRange(8, 100_000), default=20, show_default=True,
              help="Fewest timed samples per row (compare gives no verdict under 8).")
@click.option("--hot", is_flag=True, help="Do not flush L2 before each sample.")
@click.option("--device", type=DEVICE_INDEX, default=0, show_default=True, help="GPU index.")
@click.option("--json", "json_path", default=None, metavar="FILE", help="Also write the floor to FILE.")
@click.option("--dry-run", is_flag=True, help="Say what would run and where the floor is kept; run nothing.")
def calibrate_cmd(pairs: int, n: str, budget: float, min_samples: int, hot: bool, device: int,
                  json_path: str | None, dry_run: bool) -> None:
    """Measure this GPU's noise floor: how small a change compare can call faster or slower without false alarms.

    Runs the same kernels (copy vec4 and a calibration copy, at --n and on a 64x64 copy of a few µs) in
    PAIRS + 1 fresh processes (after up to four that size the slowed copy) and judges each
    consecutive pair (nothing changed: any faster/slower verdict is a false one) at a ladder of effect
    thresholds; the floor is the smallest with at most 1% false verdicts. A copy slowed on purpose by ~2%
    (a delay loop through -D CALIB_DELAY) says how often a real change that size is caught there. The floor is
    kept per GPU name in the cache folder; compare's default --min-effect, --fail-on slower and tune's
    racing use it (and say so). Rows under 20 µs get their own threshold from the small copy's pairs (a kernel
    of a few µs moves more between processes); compare judges each row at its own.

    \b
    Examples:
      cudalab calibrate --pairs 100
      cudalab calibrate --pairs 20 --budget 0.1 --json floor.json
    """
    from cudalab import catalog, report  # noqa: PLC0415
    from cudalab.families import load  # noqa: PLC0415
    from cudalab.files import atomic_write  # noqa: PLC0415
    from cudalab.records import noise  # noqa: PLC0415
    from cudalab.studies import calibrate as C  # noqa: PLC0415
    from cudalab.session.options import RunOptions  # noqa: PLC0415

    spec = catalog.family("copy")
    fam = load(spec.module)
    opts = RunOptions(variants=C.BUILTIN, n=n, budget=budget, min_samples=min_samples, hot=hot, roofline=False,
                      device=device)
    from cudalab.session import sweep  # noqa: PLC0415
    from cudalab.session.run import requests_from  # noqa: PLC0415

    sweep.plan_points(requests_from(spec, fam, opts))  # a bad --n is refused here, before any process starts
    if json_path:
        from cudalab.files import check_output_path  # noqa: PLC0415

        check_output_path(json_path, "--json")
    if dry_run:
        click.echo(f"would run {pairs + 3} to {pairs + 2 + C.CHECKS} processes of copy --variant {C.BUILTIN} --n {n},{C.SHORT_N} with the calibration "
                   f"kernels; the floor goes to {noise.folder()}/<gpu>.json")
        return
    done = C.calibrate(pairs, C.gpu_run(spec, fam, opts),
                       on_run=lambda i, total: click.echo(f"calibrate: run {i}/{total}", err=True))
    f = done.floor
    path = noise.save(f)
    width = report.console().width  # a terminal's width; piped, wide (as tune's closing lines)
    say = [f.line(),
           "false verdicts by threshold: " + ", ".join(f"{k}: {v:.1%}" for k, v in f.false_by_threshold.items()),
           "planted slowdown caught by threshold: " + ", ".join(f"{k}: {v:.0%}" for k, v in f.detect_by_threshold.items())]
    if f.short_judgements:
        say.append("rows under 20 µs, false verdicts by threshold: "
                   + ", ".join(f"{k}: {v:.1%}" for k, v in f.short_false_by_threshold.items()))
    for line in say + [f"delay {done.delay_cycles} SM cycles; floor kept in {path}"]:
        echo_folded(line, width)
    if json_path:
        from dataclasses import asdict  # noqa: PLC0415

        atomic_write(json_path, json.dumps(asdict(f), indent=2) + "\n", "--json")
