"""``cudalab sanitize``: compute-sanitizer over a family's kernels (see :mod:`cudalab.sanitize`)."""

from __future__ import annotations

import sys

import click

from cudalab import __version__, files
from cudalab.cli.app import cli


@cli.command("sanitize")
@click.argument("family")
@click.option("--variant", "variants", default=None, help="Comma list of variants (default: every kernel variant).")
@click.option("--tool", type=click.Choice(["memcheck", "racecheck", "synccheck", "initcheck", "all"]),
              default="all", show_default=True, help="compute-sanitizer tool.")
@click.option("--n", "sizes", multiple=True,
              help="Size to run at (repeatable; default: the family's SANITIZE_SIZES, else 64 and 33).")
@click.option("--log", "log_dir", default=None, type=click.Path(file_okay=False),
              help="Write the sanitizer's raw output of each run to this folder.")
@click.option("--json", "json_path", default=None, help="Write the rows to this JSON file.")
@click.option("--print-limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="Reports the sanitizer prints per run.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=600.0,
              show_default=True, help="Seconds one run may take.")
def sanitize_cmd(family: str, variants: str | None, tool: str, sizes: tuple[str, ...], log_dir: str | None,
                 json_path: str | None, print_limit: int, timeout_s: float) -> None:
    """Run each kernel variant under compute-sanitizer at small sizes (one a multiple of the tile,
    one not): out-of-bounds accesses, shared-memory races, barrier misuse, uninitialised reads.

    Exits 1 when a variant that is not marked legacy has a finding (or its run failed).
    """
    from cudalab import report
    from cudalab import sanitize as S

    tools = S.tools_for(tool)
    if json_path is not None:
        files.check_output_path(json_path, "--json")
    if log_dir is not None:
        files.check_output_dir(log_dir, "--log")
    err = report.console(stderr=True)

    done: list = []

    def progress(r) -> None:
        done.append(r)
        what = f"{r.findings} error(s)" if r.status == S.FINDINGS else r.reason if r.status != S.CLEAN else ""
        err.print(f"  {family}/{r.variant} {r.tool} {r.size}: {r.status} {what}".rstrip(), markup=False)

    interrupted = False
    try:
        rows = S.sanitize(family, variants, tools, sizes or None, log_dir, print_limit, timeout_s, on_row=progress)
    except KeyboardInterrupt:  # subprocess.run has killed the child; keep the rows judged so far
        interrupted, rows = True, done
        err.print("interrupted: showing the runs finished so far", markup=False)
    con = report.console()
    con.print(report.sanitize_table(rows, title=f"cudalab sanitize {family} ({', '.join(tools)})"
                                    + ("  [INCOMPLETE: interrupted]" if interrupted else "")))
    if any(r.legacy for r in rows):
        con.print("legacy rows are faithful textbook code, undefined on current GPUs: their findings are "
                  "shown, not counted (see `cudalab list " + family + "`).", markup=False)
    for v in S.never_ran(rows):
        err.print(f"warning: {v} was skipped at every size, so the sanitizer never ran it; give sizes it "
                  "accepts with --n (or SANITIZE_SIZES in the family module)", markup=False)
    if log_dir:
        con.print(f"raw sanitizer output: {log_dir}/", markup=False)
    if json_path:
        report.write_json(json_path, {"cudalab": __version__, "family": family, "tools": list(tools),
                                      "incomplete": interrupted, "rows": [r.to_dict() for r in rows]})
    if interrupted:
        sys.exit(130)
    bad = S.failing(rows)
    if bad:
        con.print(f"{len(bad)} run(s) of non-legacy variants with findings or failures", markup=False)
        sys.exit(1)
