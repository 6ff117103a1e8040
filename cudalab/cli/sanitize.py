"""``cudalab sanitize FAMILY``: compute-sanitizer over a family's kernels (see :mod:`cudalab.sanitize`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from cudalab import __version__
from cudalab.catalog import FamilySpec
from cudalab.cli.app import CONTEXT, cli
from cudalab.cli.options import requests_from
from cudalab.cli.toolgroup import FamilyToolGroup

if TYPE_CHECKING:
    from cudalab.families import Family


def sanitize_options() -> list[click.Parameter]:
    """What ``cudalab sanitize FAMILY`` adds to the family's problem options."""
    return [
        click.Option(["--tool"], default="all", show_default=True,
                     help="memcheck, racecheck, synccheck, initcheck, a comma list of them, or all."),
        click.Option(["--log", "log_dir"], default=None, 
                     help="Write the sanitizer's raw output of each run to this folder."),
        click.Option(["--json", "json_path"], default=None, help="Write the rows to this JSON file."),
        click.Option(["--print-limit"], type=click.IntRange(min=1), default=20, show_default=True,
                     help="Reports the sanitizer prints per run."),
        click.Option(["--timeout", "timeout_s"], type=click.FloatRange(min=0, min_open=True), default=600.0,
                     show_default=True, help="Seconds one run may take."),
        click.Option(["--devices"], default=None, metavar="LIST",
                     help="Spread the runs over these GPUs, one run per GPU at a time: 0,1 or all (default: --device)."),
    ]


def run_sanitize(spec: FamilySpec, fam: Family, kw: dict[str, Any]) -> None:
    """Parse -> run every job -> render; exit 1 on a finding or failure of a non-legacy variant."""
    from cudalab import files, report  # noqa: PLC0415
    from cudalab import sanitize as S  # noqa: PLC0415

    tools = S.tools_for(kw["tool"])
    if kw["json_path"] is not None:  # refused now, not after the runs
        files.check_output_path(kw["json_path"], "--json")
    if kw["log_dir"] is not None:
        files.check_output_dir(kw["log_dir"], "--log")
    err = report.console(stderr=True)
    done: list = []

    def progress(r: Any) -> None:
        done.append(r)
        what = f"{r.findings} error(s)" if r.status == S.FINDINGS else r.reason if r.status != S.PASSED else ""
        err.print(f"  {spec.name}/{r.variant} {r.tool} {r.size}: {r.status} {what}".rstrip(), markup=False)

    interrupted = False
    rows: list = []
    from cudalab.plan import make_problem  # noqa: PLC0415
    from cudalab.execute.local.devices import device_list  # noqa: PLC0415

    requests = requests_from(spec, fam, kw)
    for req in requests:  # every size is a valid problem (bad ones refused before any run)
        make_problem(spec, fam, req)
    devices = device_list(kw.get("devices"), kw.get("device", 0))
    try:
        for req in requests:
            rows += S.sanitize(req, tools, kw["log_dir"], kw["print_limit"], kw["timeout_s"], on_row=progress,
                               devices=devices)
    except KeyboardInterrupt:  # subprocess.run has killed the child; keep the rows judged so far
        interrupted, rows = True, done
        err.print("interrupted: showing the runs finished so far", markup=False)
    con = report.console()
    con.print(report.sanitize_table(rows, title=f"cudalab sanitize {spec.name} ({', '.join(tools)})"
                                    + ("  [INCOMPLETE: interrupted]" if interrupted else "")))
    if any(r.legacy for r in rows):
        con.print(report.SANITIZE_LEGACY_NOTE.format(family=spec.name), markup=False)
    for v in S.never_ran(rows):
        err.print(f"warning: {v} was skipped at every size, so the sanitizer never ran it; give sizes it "
                  "accepts with --n (or SANITIZE_SIZES in the family module)", markup=False)
    if kw["log_dir"]:
        con.print(f"raw sanitizer output: {kw['log_dir']}/", markup=False)
    if kw["json_path"]:
        report.write_json(kw["json_path"], {"cudalab": __version__, "family": spec.name, "tools": list(tools),
                                            "incomplete": interrupted, "rows": [r.to_dict() for r in rows]})
    if interrupted:
        sys.exit(130)
    bad = S.failing(rows)
    if bad:
        con.print(f"{len(bad)} run(s) of non-legacy variants with findings or failures", markup=False)
        sys.exit(1)


sanitize_group = FamilyToolGroup(
    "sanitize", tool_params=sanitize_options, handler=run_sanitize, summary="Run under compute-sanitizer",
    context_settings=CONTEXT,
    help="""Run each kernel variant under compute-sanitizer at small sizes (one a multiple of the tile, one
    not): out-of-bounds accesses, shared-memory races, barrier misuse, uninitialised reads.

    Takes the family command's problem options; --n takes a comma list of sizes (default: the family's
    SANITIZE_SIZES). Exits 1 when a variant that is not marked legacy has a finding (or its run failed).

    \b
    Examples:
      cudalab sanitize transpose
      cudalab sanitize reduce --tool racecheck --n 8192,8191
      cudalab sanitize smem-rect --ipad 1 --log logs/
    """)
cli.add_command(sanitize_group)
