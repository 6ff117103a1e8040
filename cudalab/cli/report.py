"""``cudalab report``: re-render a saved run (tables, markdown, a plot) without a GPU."""

from __future__ import annotations

import click

from cudalab.cli.app import CONTEXT, cli
from cudalab.cli.options import wide_option


def extra_columns(family: str) -> tuple[tuple[str, str], ...]:
    """The family's extra table columns, or none for a family this cudalab does not have."""
    from cudalab import catalog
    from cudalab.errors import CudalabError
    from cudalab.families import load

    try:
        return tuple(load(catalog.family(family).module).EXTRA_COLUMNS)
    except (CudalabError, ImportError):  # an old record of a family since renamed: the table still renders
        return ()


@cli.command("report", context_settings=CONTEXT)
@click.argument("path", metavar="RUN.json")
@click.option("--markdown", is_flag=True, help="Print GitHub markdown (one table per point) instead of tables.")
@click.option("--layout", type=click.Choice(["points", "long"]), default=None,
              help="A sweep as one table per point, or as one long table with a point column  [default: points; "
                   "long above 1,000 points]")
@click.option("--plot", "plot_path", default=None, metavar="FILE",
              help="Also draw the run to FILE.png, .svg or .pdf (needs matplotlib: pip install 'cudalab[plot]').")
def report_cmd(path: str, markdown: bool, layout: str | None, plot_path: str | None) -> None:
    """Re-render a run saved with --json: every point's table, legend and notes (no GPU needed).

    Reads files of every schema version (version 1: cudalab before run records).

    \b
    Examples:
      cudalab report transpose-h200.json
      cudalab report transpose-h200.json --markdown >> $GITHUB_STEP_SUMMARY
      cudalab report reduce-sweep.json --plot reduce.png
    """
    from cudalab import report
    from cudalab.report import plot
    from cudalab.records.results import load_record

    if plot_path:
        plot.check(plot_path, [path])  # before any work; never over the run it reads
    record = load_record(path)
    known: dict[str, tuple[tuple[str, str], ...]] = {}  # the catalog costs 30 ms a read: once per family

    def columns(family: str) -> tuple[tuple[str, str], ...]:
        if family not in known:
            known[family] = extra_columns(family)
        return known[family]

    if markdown:
        click.echo(report.markdown_record(record, path), nl=False)
    else:
        report.print_record(report.console(), record, path, layout, columns)
    if plot_path:
        plot.plot_record(record, plot_path)
        click.echo(f"plot: {plot_path}", err=True)


report_cmd.params.append(wide_option())
