"""``cudalab compare``: saved runs side by side, a verdict per row, and a CI gate."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cudalab.cli.app import CONTEXT, cli, echo_folded
from cudalab.cli.options import wide_option


@cli.command("compare", context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="A.json B.json [C.json...]")
@click.option("--min-effect", default=None,
              help="Smallest change that counts as faster or slower (percent) [default: A's GPU's calibrated noise "
                   "floor (cudalab calibrate), else 2%].")
@click.option("--fail-on", default=None, metavar="slower[:PCT]",
              help="CI gate: exit 1 when a row is slower than A by more than PCT with confidence "
                   "(never on faster or unsure), e.g. --fail-on slower:5%; plain 'slower': A's GPU's calibrated floor.")
@click.option("--allow-missing", is_flag=True,
              help="With --fail-on: a row of A that B does not have does not fail the gate.")
@click.option("--markdown", is_flag=True, help="Print GitHub markdown (for $GITHUB_STEP_SUMMARY) instead of tables.")
@click.option("--plot", "plot_path", default=None, metavar="FILE",
              help="Also draw grouped bars per run to FILE.png, .svg or .pdf (needs matplotlib).")
def compare_cmd(paths: tuple[str, ...], min_effect: str, fail_on: str | None, allow_missing: bool, markdown: bool,
                plot_path: str | None) -> None:
    """Compare saved runs: rows matched by family, problem and variant; medians, B/A, % of roofline,
    and a verdict per row (same / faster / slower / unsure) from the raw samples.

    Further files are each compared with A. Runs on different GPUs are judged by % of each run's
    own roofline (or of the library ref for GFLOP/s rows): the verdict reads 'more/less efficient', and
    the time ratio is shown beside it. With --fail-on, a row of A that B lacks fails the gate (unless
    --allow-missing) and nothing compared at all is an error (exit 2).

    \b
    Examples:
      cudalab compare base.json new.json
      cudalab compare h100.json h200.json --plot h100-vs-h200.png
      cudalab compare base.json new.json --fail-on slower:5% --markdown >> $GITHUB_STEP_SUMMARY
    """
    from cudalab.records import compare as C
    from cudalab.records import gate as G
    from cudalab import report
    from cudalab.report import plot
    from cudalab.errors import UsageError
    from cudalab.records.results import load_record

    from cudalab.records import noise

    if len(paths) < 2:
        raise UsageError("compare needs at least two run files (A.json B.json)")
    if min_effect is not None:
        G.parse_percent(min_effect, "--min-effect")
    if fail_on:
        G.parse_fail_on(fail_on, 0.0)  # the form is checked before any file is read
    if allow_missing and not fail_on:
        raise UsageError("--allow-missing only changes the --fail-on gate; give --fail-on too")
    if plot_path:
        plot.check(plot_path, paths)  # before any work; never over a run it reads
    records = [load_record(p) for p in paths]
    floor = noise.load(records[0].gpu)
    effect = G.parse_percent(min_effect, "--min-effect") if min_effect is not None else (
        floor.min_effect if floor else noise.DEFAULT_EFFECT)
    threshold = G.parse_fail_on(fail_on, floor.min_effect if floor else None) if fail_on else None
    said = ""
    if floor is not None and (min_effect is None or (fail_on and ":" not in fail_on)):
        said = f"noise floor of this GPU: {floor.line()}"
    elif floor is None and min_effect is None:
        said = f"effect threshold {noise.DEFAULT_EFFECT:.0%} (this GPU was never calibrated: cudalab calibrate)"
    names = [Path(p).name for p in paths]
    if len(set(names)) < len(names):  # same file names in different folders: show the paths
        names = list(paths)
    # a calibrated floor judges each row at its own threshold (short rows have theirs); --min-effect, all at one
    row_effect = floor.effect if floor is not None and min_effect is None else None
    comparisons = [C.compare(records[0], rec, names[0], name, effect, row_effect)
                   for rec, name in zip(records[1:], names[1:])]
    failures = G.gate(comparisons, threshold, allow_missing) if threshold is not None else []  # before any output
    gate = [f"gate --fail-on {fail_on}: " + ("FAILED" if failures else "passed")] + failures
    con = report.console()
    if said:  # after everything that can refuse: a refusal stays one line
        echo_folded(said, con.width, err=markdown)
    for c in comparisons:
        if markdown:
            click.echo(report.markdown_comparison(c))
        else:
            for line in report.comparison_lines(c):
                con.print(line, markup=False, highlight=False)
            con.print(report.comparison_table(c))
            con.print(report.comparison_summary(c), markup=False, highlight=False)
    if threshold is not None:
        click.echo("\n".join(gate) + ("\n" if markdown else ""))
    if plot_path:
        plot.plot_comparison(comparisons, plot_path)
        click.echo(f"plot: {plot_path}", err=True)
    if failures:
        sys.exit(1)


compare_cmd.params.append(wide_option("Show every column however narrow the terminal (it folds long lines); "
                                       "the default view hides n, p and % of roofline where they do not fit."))
