"""``cudalab truth FAMILY``: each variant timed by events, a batch, a CUDA graph and ncu beside CUPTI's activity
records (the reference), cold and hot (see :mod:`cudalab.studies.truth`)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from cudalab.catalog import FamilySpec
from cudalab.cli.app import CONTEXT, cli
from cudalab.cli.options import POSITIVE_SECONDS, run_options
from cudalab.cli.toolgroup import FamilyToolGroup

if TYPE_CHECKING:
    from cudalab.families import Family


def truth_options() -> list[click.Parameter]:
    """What ``cudalab truth FAMILY`` adds to the family's problem options."""
    return [
        click.Option(["--budget"], type=POSITIVE_SECONDS, default=0.5, show_default=True,
                     help="Seconds of sampling per variant and method."),
        click.Option(["--min-samples"], type=click.IntRange(1, 100_000), default=10, show_default=True,
                     help="Fewest timed samples per variant and method."),
        click.Option(["--methods"], default="events,batch,graph,cupti", show_default=True, metavar="LIST",
                     help="Comma list of the methods to run, from events, batch, graph, cupti, auto (auto = the "
                          "tables' own run; with CUDALAB_NO_CUPTI=1 it is the fallback without cupti-python)."),
        click.Option(["--ncu-launches"], type=click.IntRange(1, 1000), default=10, show_default=True,
                     help="Launches of each variant under ncu (the first is left out of the median)."),
        click.Option(["--no-ncu"], is_flag=True, help="Leave ncu out (its column says so)."),
        click.Option(["--ncu-timeout"], type=POSITIVE_SECONDS, default=600.0, show_default=True,
                     help="Seconds each ncu run may take."),
        click.Option(["--timeout"], type=POSITIVE_SECONDS, default=None, metavar="SECONDS",
                     help="A kernel that has not finished after this long is killed (as the family command's)."),
        click.Option(["--json", "json_path"], default=None, metavar="FILE", help="Also write every figure to FILE."),
        click.Option(["--quiet", "-q"], is_flag=True, help="No progress on stderr."),
    ]


def run_truth(spec: FamilySpec, fam: Family, kw: dict[str, Any]) -> None:
    """Parse -> time by every method (and ncu) -> print the tables; exit 1 when a row failed or was incorrect."""
    from cudalab import files, report  # noqa: PLC0415
    from cudalab.report import progress  # noqa: PLC0415
    from cudalab.errors import ToolMissingError  # noqa: PLC0415
    from cudalab.report.truth import tables  # noqa: PLC0415
    from cudalab.studies import truth as T  # noqa: PLC0415

    opts = run_options(fam, kw)
    methods = tuple(m.strip() for m in kw["methods"].split(",") if m.strip())
    T.plan_methods(spec, fam, opts, methods)  # bad input refused here, before ncu is looked for or a worker starts
    if kw["json_path"]:
        files.check_output_path(kw["json_path"], "--json")
    profile, note = None, "left out (--no-ncu)"
    if not kw["no_ncu"]:
        try:
            profile, note = T.ncu_profiler(kw["ncu_timeout"]), ""
        except ToolMissingError as exc:
            note = f"not found ({str(exc).split(';')[0]})"
    got = T.truth(spec, fam, opts, profile, note, kw["ncu_launches"], progress.for_stderr(kw["quiet"]),
                  methods=methods, timeout=kw["timeout"])
    for t in tables(got):
        report.print_table(t)
    if kw["json_path"]:
        files.atomic_write(kw["json_path"], json.dumps(got.to_dict(), indent=2) + "\n", "--json")
        click.echo(f"saved to {kw['json_path']}", err=True)
    if got.bad:
        sys.exit(1)


truth_group = FamilyToolGroup(
    "truth", tool_params=truth_options, handler=run_truth, summary="Time by every method against ncu:",
    context_settings=CONTEXT,
    help="""Time each selected variant by every method side by side, cold and hot, against CUPTI: each launch's
    own GPU start and end from CUPTI's activity records (the reference; needs cupti-python), events around one
    launch, events over a batch of N launches (a stream's throughput), CUDA graph replay (the fallback without
    CUPTI), and Nsight Compute's gpu__time_duration (when ncu is found) with its offset from CUPTI on this GPU.
    Each method's median and distance from CUPTI; the method cudalab's tables use for the row (--launch auto)
    and its distance.

    Takes the family command's problem options (--variant, --n, --shape, -D, --block ...).

    \b
    Examples:
      cudalab truth smem-square
      cudalab truth reduce --variant modern --n 2^20
      cudalab truth transpose --n 1024 --json truth.json
      CUDALAB_NO_CUPTI=1 cudalab truth copy --n 512 --methods auto --no-ncu
    """)
cli.add_command(truth_group)
