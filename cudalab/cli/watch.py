"""``cudalab watch FAMILY [the family command's options]``: the edit–run loop.

The first run prints the table; every save of a file the run is built from (the kernels its rows
use and what they include, ``--add`` files, the family's own ``family.toml`` and module) rebuilds,
re-verifies and re-times the rows that file changes, and prints the table again with each re-run row's
verdict against its last passed version. See :mod:`cudalab.watch.core`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from cudalab.cli.app import CONTEXT, cli
from cudalab.errors import UsageError

#: Family-command options a watch does not take (each version would run them again): why.
REFUSED = {"ncu_": "--ncu (run cudalab ncu FAMILY once the kernel is where you want it)",
           "plot_path": "--plot (plot the session file: cudalab report / compare read it)",
           "show": "--show"}


@cli.command("watch", context_settings={**CONTEXT, "ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--all", "rerun_all", is_flag=True,
              help="Re-run every row on every change (default: only the rows whose files changed; the others "
                   "are kept). Also taken after FAMILY.")
@click.option("--poll", is_flag=True,
              help="Look at the files every 0.25 s instead of the operating system's file events "
                   "(network file systems; also the fallback without the watchfiles package).")
@click.argument("family")
@click.argument("args", nargs=-1, type=click.UNPROCESSED, metavar="[FAMILY OPTIONS]...")
@click.pass_context
def watch_cmd(ctx: click.Context, rerun_all: bool, poll: bool, family: str, args: tuple[str, ...]) -> None:
    """Run a family, then again on every save of its files: rebuild, re-verify and re-time what changed.

    FAMILY and its options are those of the family command (cudalab FAMILY --help), --add kernels and
    families of your own included. On every save of a watched .cu / .cuh file (the kernels the rows use
    and the files they include, --add files) or of the family's family.toml or module, the rows built
    from it run again on fresh GPU workers; the others are kept (--all re-runs every row). Each re-run row
    that passed gets a verdict against its last passed version (faster / slower / same / unsure, from the
    raw samples, as cudalab compare judges). nvcc's errors are shown under the table and watching goes
    on; a kernel that crashes or hangs is a row. --json FILE keeps every version of the session (the file
    is also the latest table: cudalab report and compare read it). Ctrl-C ends.

    \b
    Examples:
      cudalab watch transpose --n 4096 --variant naive --add my.cu:my_transpose@block=32x8,tile=32x32
      cudalab watch --all reduce --n 16m --json session.json
    """
    from cudalab import catalog, files, report  # noqa: PLC0415
    from cudalab.report import progress  # noqa: PLC0415
    from cudalab.session import sweep  # noqa: PLC0415
    from cudalab.cli.app import family_subcommand  # noqa: PLC0415
    from cudalab.cli.family import family_command  # noqa: PLC0415
    from cudalab.session.run import start_session  # noqa: PLC0415
    from cudalab.cli.options import run_options, workers_of  # noqa: PLC0415
    from cudalab.session.run import requests_from  # noqa: PLC0415
    from cudalab.families import load  # noqa: PLC0415
    from cudalab.report.console import WIDE  # noqa: PLC0415
    from cudalab.catalog.user import SignatureError  # noqa: PLC0415
    from cudalab.watch import core, events, loop, screen  # noqa: PLC0415

    if "--poll" in args:  # watch's own flag after the family (as --all may be): the family command lacks it
        poll, args = True, tuple(a for a in args if a != "--poll")
    sub = family_subcommand(family, family_command)
    if sub is None:
        raise UsageError(f"no family {family!r}; valid: {', '.join(catalog.load_catalog())}")
    with sub.make_context(f"{ctx.command_path} {family}", list(args), parent=ctx) as sub_ctx:
        kw: dict[str, Any] = dict(sub_ctx.params)
        if "variants" not in kw:  # a broken family's command: it says why
            sub.invoke(sub_ctx)
            return
    for key, what in REFUSED.items():
        if kw.get(key):
            raise UsageError(f"watch does not take {what}")
    rerun_all = rerun_all or bool(kw.pop("all_", False))
    kw["all_"] = False
    for opt in ("json", "csv"):
        if kw.get(f"{opt}_path") is not None:
            files.check_output_path(kw[f"{opt}_path"], f"--{opt}")

    def plan() -> core.Watched:
        catalog.reread()  # this version's family.toml, not the one the command started with
        spec = catalog.family(family)
        fam = load(spec.module)
        return core.Watched(spec, fam, requests_from(spec, fam, run_options(fam, kw)))

    first = plan()  # bad options are refused now, in one line, before anything is watched
    try:
        sweep.plan_points(first.requests)
    except SignatureError:  # a kernel of yours that does not fit yet: the first version shows it
        pass
    fam = first.family
    workers = workers_of(kw)

    def new_session() -> Any:  # each version's workers, with that version's progress
        return start_session(workers, progress.for_stderr(kw.get("quiet", False)))

    session = new_session()  # --devices and --timeout checked; the workers open the GPU meanwhile
    source = events.best(poll)
    con = report.console()
    live = sys.stdout.isatty()
    wide = WIDE.get()
    watcher = core.Watcher(plan, start_session=new_session, rerun_all=rerun_all, session=session,
                           command=("cudalab", "watch", *sys.argv[2:]) if sys.argv[1:2] == ["watch"] else
                           ("cudalab", "watch", family, *args))

    def show(version: core.Version) -> None:
        screen.render(con, watcher, version, source.name, fam.EXTRA_COLUMNS, wide, kw.get("layout") or "points",
                      clear=live)

    def save() -> None:
        last = next((v.record for v in reversed(watcher.versions) if v.record is not None), None)
        if last is None:  # nothing measured yet: a file the user saved before is not replaced by an empty session
            return
        if kw.get("json_path"):
            files.atomic_write(kw["json_path"], json.dumps(watcher.session_record(), indent=1, default=str) + "\n")
        if kw.get("csv_path"):
            report.write_csv(kw["csv_path"], [r for p in last.points for r in p.results])

    code = loop.loop(watcher, source, show, lambda changed: screen.announce(con, len(watcher.versions) + 1, changed),
                     save)
    if code == 0:
        con.print(f"watch ended after {len(watcher.versions)} version{'s' if len(watcher.versions) != 1 else ''}"
                  + (f"; every version is in {kw['json_path']}" if kw.get("json_path") else ""), markup=False,
                  highlight=False)
    sys.exit(code)
