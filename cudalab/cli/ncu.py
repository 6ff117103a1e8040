"""``cudalab ncu FAMILY``: Nsight Compute over a family's kernels (see :mod:`cudalab.ncu`)."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import click

from cudalab.catalog import FamilySpec
from cudalab.cli.app import CONTEXT, cli
from cudalab.cli.options import requests_from
from cudalab.cli.tools import FamilyToolGroup
from cudalab.errors import UsageError
from cudalab.families import Family


def ncu_options() -> list[click.Parameter]:
    """What ``cudalab ncu FAMILY`` adds to the family's problem options."""
    return [
        click.Option(["--metrics"], default=None,
                     help="smem | memory | time | a comma list of ncu metric names (default: smem for families "
                          "that declare expected bank conflicts, memory otherwise)."),
        click.Option(["--import", "import_path"], default=None,
                     help="Render a saved ncu CSV (any machine) or .ncu-rep (needs ncu, no GPU) instead of profiling."),
        click.Option(["--export", "export_path"], default=None,
                     help="Keep the raw result: FILE.csv (cudalab's launch log + ncu's CSV) or FILE.ncu-rep."),
        click.Option(["--strict"], is_flag=True, help="Exit 1 when a measured wavefronts/request misses its expectation."),
        click.Option(["--timeout", "timeout_s"], type=click.FloatRange(min=0, min_open=True), default=600.0,
                     show_default=True, help="Seconds the profiled run may take."),
        click.Option(["--devices"], default=None, metavar="N",
                     help="The GPU to profile on (ncu profiles one point on one GPU; default: --device)."),
    ]


def run_ncu(spec: FamilySpec, fam: Family, kw: dict[str, Any]) -> None:
    """Parse -> profile (or import) -> render; exit 1 on a bad row, a cut file or (--strict) a missed expectation."""
    from cudalab import files, ncu, report  # noqa: PLC0415
    from cudalab.session import parse_devices  # noqa: PLC0415

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
    if kw["import_path"]:
        rep = ncu.load_import(kw["import_path"], requests[0], kw["metrics"])
    else:
        rep = ncu.profile(requests[0], kw["metrics"], kw["export_path"], timeout=kw["timeout_s"])
    report.print_ncu(rep)
    if rep.incomplete:
        click.echo(f"cudalab: the ncu data is cut off ({rep.incomplete})", err=True)
        sys.exit(1)
    if rep.bad:
        sys.exit(1)
    if kw["strict"] and rep.failed_expectations():
        click.echo(f"cudalab: expectation missed: {', '.join(rep.failed_expectations())}", err=True)
        sys.exit(1)


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
    """)
cli.add_command(ncu_group)
