"""``cudalab ncu``: Nsight Compute over a family's kernels (see :mod:`cudalab.ncu`)."""

from __future__ import annotations

import sys

import click

from cudalab import files
from cudalab.cli.app import CONTEXT, cli
from cudalab.errors import UsageError


@cli.command("ncu", context_settings=dict(CONTEXT, ignore_unknown_options=True, allow_extra_args=True))
@click.argument("target")
@click.option("--variant", "variants", default=None, help="Comma list of variants (default: all).")
@click.option("--n", default=None, help="Problem size, as for the family command.")
@click.option("--shape", default=None, help="Rectangular shape, as for the family command.")
@click.option("--block", default=None, help="Block dims for every variant, e.g. 32x8.")
@click.option("--dtype", default=None, help="Element type.")
@click.option("--grid", default=None, help="Grid dims override.")
@click.option("--seed", type=int, default=None, help="Random seed for the inputs.")
@click.option("--device", type=int, default=None, help="GPU index.")
@click.option("--metrics", default=None,
              help="smem | memory | time | a comma list of ncu metric names (default: smem for families that "
                   "declare expected bank conflicts, memory otherwise).")
@click.option("--import", "import_path", default=None,
              help="Render a saved ncu CSV (or .ncu-rep, needs ncu but no GPU) instead of profiling.")
@click.option("--export", "export_path", default=None,
              help="Keep the raw result: FILE.csv (CSV per variant) or FILE.ncu-rep (ncu's reports).")
@click.option("--strict", is_flag=True, help="Exit 1 when a measured wavefronts/request misses its expectation.")
@click.pass_context
def ncu_cmd(ctx: click.Context, target: str, variants: str | None, n: str | None, shape: str | None,
            block: str | None, dtype: str | None, grid: str | None, seed: int | None, device: int | None,
            metrics: str | None, import_path: str | None, export_path: str | None, strict: bool) -> None:
    """Profile a family's kernels with Nsight Compute: one ncu run per variant, its verified launch.

    Options the family command has (--ipad, --blocks...) are passed on to it.

    \b
    Examples:
      cudalab ncu smem-square
      cudalab ncu smem-rect --ipad 1
      cudalab ncu transpose --variant block,bankopt --n 4096
      cudalab ncu copy --metrics memory --export copy.csv
      cudalab ncu transpose --import transpose.csv
    """
    from cudalab import ncu, report

    args = ncu.run_args(n, shape, block, dtype, grid, seed, device, ctx.args)
    if import_path and export_path:
        raise UsageError("give --import or --export, not both")
    if export_path is not None:
        files.check_output_path(export_path, "--export")
    if import_path:
        rep = ncu.load_import(import_path, target, variants, args, metrics)
    else:
        rep = ncu.profile(target, variants, args, metrics, export_path)
    report.print_ncu(ncu.build_table(rep), rep.problem)
    if any(r.status == ncu.INCORRECT for r in rep.rows):
        sys.exit(1)
    if strict and rep.failed_expectations():
        click.echo(f"cudalab: expectation missed: {', '.join(rep.failed_expectations())}", err=True)
        sys.exit(1)
