"""``cudalab ncu FAMILY``: Nsight Compute over a family's kernels (see :mod:`cudalab.ncu`)."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click

from cudalab.catalog import FamilySpec
from cudalab.cli.app import CONTEXT, cli
from cudalab.cli.options import requests_from
from cudalab.cli.toolgroup import FamilyToolGroup
from cudalab.errors import UsageError

if TYPE_CHECKING:
    from cudalab.families import Family


def ncu_options() -> list[click.Parameter]:
    """What ``cudalab ncu FAMILY`` adds to the family's problem options."""
    return [
        click.Option(["--metrics"], default=None,
                     help="smem | memory | time | tensor | a comma list of ncu metric names (default: smem for families "
                          "that declare expected bank conflicts, memory otherwise)."),
        click.Option(["--import", "import_path"], default=None,
                     help="Render a saved ncu CSV (any machine) or .ncu-rep (needs ncu, no GPU) instead of profiling."),
        click.Option(["--export", "export_path"], default=None,
                     help="Keep the raw result: FILE.csv (cudalab's launch log + ncu's CSV) or FILE.ncu-rep."),
        click.Option(["--source"], is_flag=True,
                     help="Per variant, the CUDA lines that matter (ncu's full set, source imported; the kernels are "
                          "built with -lineinfo always): shared wavefronts per request, global sectors per request, "
                          "instructions, warp stalls."),
        click.Option(["--lines"], type=click.IntRange(min=1), default=8, show_default=True,
                     help="How many lines per variant --source shows (hottest first)."),
        click.Option(["--advice/--no-advice"], default=None,
                     help="ncu's rules that fired per variant, with their estimated speedup (on with --source)."),
        click.Option(["--json", "json_path"], default=None,
                     help="Save the report as a run record (with --source: every line's figures and the rules); "
                          "`cudalab report FILE` shows it again."),
        click.Option(["--strict"], is_flag=True, help="Exit 1 when a measured wavefronts/request misses its expectation."),
        click.Option(["--timeout", "timeout_s"], type=click.FloatRange(min=0, min_open=True), default=600.0,
                     show_default=True, help="Seconds the profiled run may take."),
        click.Option(["--devices"], default=None, metavar="N",
                     help="The GPU to profile on (ncu profiles one point on one GPU; default: --device)."),
    ]


def run_ncu(spec: FamilySpec, fam: Family, kw: dict[str, Any]) -> None:
    """Parse -> profile (or import) -> render; exit 1 on a bad row, a cut file or (--strict) a missed expectation."""
    from cudalab import files, ncu, report  # noqa: PLC0415
    from cudalab.execute.local.devices import parse_devices  # noqa: PLC0415

    requests = requests_from(spec, fam, kw)
    if len(requests) > 1:
        raise UsageError("cudalab ncu takes one --block (run it once per block)")
    devices = parse_devices(kw.get("devices"), kw.get("device", 0))
    if devices is None or len(devices) != 1:
        raise UsageError("cudalab ncu profiles one point on one GPU: give --devices N (or --device N)")
    requests = [replace(requests[0], device=devices[0])]
    if kw["import_path"] and kw["export_path"]:
        raise UsageError("give --import or --export, not both")
    if kw["export_path"] is not None:  # refused now, not after the profile
        files.check_output_path(kw["export_path"], "--export")
    if kw["json_path"] is not None:
        files.check_output_path(kw["json_path"], "--json")
    if kw["import_path"]:
        rep = ncu.load_import(kw["import_path"], requests[0], kw["metrics"], source=bool(kw["source"]))
    else:
        rep = ncu.profile(requests[0], kw["metrics"], kw["export_path"], timeout=kw["timeout_s"],
                          source=bool(kw["source"] or kw["advice"]))
    report.print_table(ncu.table(rep))
    advice = kw["advice"] if kw["advice"] is not None else bool(kw["source"])
    if kw["source"] or advice:
        print_source(rep, kw["source"], advice, kw["lines"])
    if kw["json_path"]:
        from cudalab.ncu.saved import to_record  # noqa: PLC0415
        from cudalab.records.results import save_record  # noqa: PLC0415

        save_record(kw["json_path"], to_record(rep, ["cudalab", *sys.argv[1:]]))
        click.echo(f"saved to {kw['json_path']} (cudalab report {kw['json_path']})", err=True)
    if rep.incomplete:
        click.echo(f"cudalab: the ncu data is cut off ({rep.incomplete})", err=True)
        sys.exit(1)
    if rep.bad:
        sys.exit(1)
    if kw["strict"] and rep.failed_expectations():
        click.echo(f"cudalab: expectation missed: {', '.join(rep.failed_expectations())}", err=True)
        sys.exit(1)


def print_source(rep: Any, source: bool, advice: bool, lines: int) -> None:
    """The source view and (or) the advice under the table; a line saying why when the data has none."""
    from cudalab.report.console import console  # noqa: PLC0415
    from cudalab.report.source import render_source  # noqa: PLC0415

    con = console()
    if source and not rep.has_source:
        con.print("no per-line figures: the data holds no ncu source page (a --source profile collects it; an "
                  "imported CSV must be one exported from such a run)", markup=False)
    if advice and not rep.has_rules:
        con.print("no advice: the data holds no ncu rule results (profile with --source or --advice)", markup=False)
    text = render_source(rep.rows, lines, source=source, advice=advice, width=max(con.width, 80))
    if text:
        con.print("\n".join(text), markup=False, highlight=False, soft_wrap=True)


ncu_group = FamilyToolGroup(
    "ncu", tool_params=ncu_options, handler=run_ncu, summary="Profile with Nsight Compute",
    context_settings=CONTEXT,
    help="""Profile a family's kernels with Nsight Compute: one ncu process runs every selected variant's
    verified launch; launches are matched to variants by kernel name and launch shape.

    Takes the family command's problem options (--n, --block, --ipad ...).

    \b
    Examples:
      cudalab ncu smem-square
      cudalab ncu smem-rect --ipad 1
      cudalab ncu transpose --variant block,bankopt --n 4096
      cudalab ncu copy --metrics memory --export copy.csv
      cudalab ncu transpose --import transpose.csv
      cudalab ncu transpose --variant block,bankopt --source
      cudalab ncu reduce --import tests/data/ncu-source/reduce.csv --source --lines 4
    """)
cli.add_command(ncu_group)
