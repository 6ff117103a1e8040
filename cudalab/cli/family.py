"""``cudalab <family>``: run the variants of one family, print the table, save the record.

The command is built from the family's module (its options), which its caller has loaded
(:func:`cudalab.cli.app.family_subcommand`); the run's modules (workers, tables,
records) are imported when it runs, so ``cudalab FAMILY --help`` does without them.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

import click

from cudalab import catalog
from cudalab.cli.options import CONTEXT, problem_options, run_options, timing_options, workers_of
from cudalab.errors import UsageError
from cudalab.textcells import clean

if TYPE_CHECKING:
    from cudalab.plan import Plan, RunRequest
    from cudalab.execute.point import Point
    from cudalab.families import Family
    from cudalab.records.results import RunRecord


def family_command(spec: catalog.FamilySpec, fam: Family) -> click.Command:
    """Build ``cudalab <family>`` from the family's spec and its module's options."""
    params = problem_options(spec, fam) + timing_options() + worker_options() + [
        click.Option(["--ncu", "ncu_"], is_flag=True,
                     help="Add Nsight Compute columns (wavefronts/request, bank conflicts, ncu ms) after timing."),
    ]
    if fam.SHOW:
        params.append(click.Option(["--show"], is_flag=True, help="Print the inputs and each variant's result (small problems)."))

    def callback(**kw: Any) -> None:
        run_family(spec, fam, kw)

    return click.Command(spec.name, callback=callback, params=params, context_settings=CONTEXT,
                         help=f"{clean(spec.description)}.\n\nVariants: {', '.join(spec.names())}.",
                         short_help=clean(spec.description))


def worker_options() -> list[click.Option]:
    """``--devices`` and ``--timeout``: where the GPU workers run and how long a kernel may take."""
    return [
        click.Option(["--devices"], default=None, metavar="LIST",
                     help="Spread the sweep's points over these GPUs, one worker each: 0,1 or all (default: --device)."),
        click.Option(["--cluster"], default=None, metavar="local|tcp://HOST:PORT",
                     help="Run the sweep's points on a Dask cluster, one worker per GPU: 'local' (this host's GPUs, "
                          "see --devices) or a scheduler's address (docs/cluster.md)."),
        click.Option(["--timeout"], type=float, default=None, metavar="SECONDS",
                     help="A kernel that has not finished after this long is killed and its row is 'timeout' "
                          "(default: the larger of 10 s and 100x the slowest passed row)."),
    ]


@dataclass(frozen=True)
class Outputs:
    """What the family command does with a run besides running it (render and save only; the run itself is
    :class:`~cudalab.session.options.RunOptions`, where it runs :class:`~cudalab.execute.Workers`): made once from
    click's keyword arguments by :meth:`of`, used by :func:`deliver`."""

    json: str | None = None
    csv: str | None = None
    plot: str | None = None
    layout: str = "points"
    quiet: bool = False
    ncu: bool = False
    emit: Callable[[RunRecord], None] | None = None  # ``--json -``: gets the final record (record_to_stdout)

    @classmethod
    def of(cls, kw: dict[str, Any]) -> "Outputs":
        """The outputs of a family command's keyword arguments."""
        return cls(json=kw.get("json_path"), csv=kw.get("csv_path"), plot=kw.get("plot_path"),
                   layout=kw.get("layout") or "points", quiet=bool(kw.get("quiet")), ncu=bool(kw.get("ncu_")),
                   emit=kw.get("json_emit"))

    def check(self) -> None:
        """Refuse an output path now, not after minutes of measuring; no two are one file.

        Raises:
            UsageError: a path that cannot be written, or matplotlib missing for ``--plot``.
        """
        from cudalab import files  # noqa: PLC0415

        paths = {opt: p for opt, p in (("json", self.json), ("csv", self.csv), ("plot", self.plot)) if p is not None}
        for opt, path in paths.items():
            files.check_output_path(path, f"--{opt}", [p for o, p in paths.items() if o != opt])
        if self.plot:
            from cudalab.report import plot  # noqa: PLC0415  (matplotlib is optional: checked before any work)

            plot.check(self.plot)


class Saver:
    """Writes ``--json`` and ``--csv`` as rows arrive (atomic replace each time): a run killed later
    keeps what it measured. The host's facts (:func:`cudalab.records.machine.facts`: git, package versions) are
    read once a run, not once a row (~20-40 ms a read), while the GPU works (:meth:`read_host_soon`)."""

    def __init__(self, spec: catalog.FamilySpec, outs: Outputs, started: float, info: dict[str, Any]):
        self.spec, self.outs, self.started, self.info = spec, outs, started, info
        self._host: dict[str, Any] | None = None
        self._host_lock = threading.Lock()
        self._reader: threading.Thread | None = None

    def host(self) -> dict[str, Any]:
        """The host's facts (read now unless read already)."""
        with self._host_lock:
            if self._host is None:
                from cudalab.records import machine  # noqa: PLC0415

                self._host = machine.facts()
            return self._host

    def read_host_soon(self) -> None:
        """Read the host's facts in a thread (the run is under way: the record will need them)."""
        if self._reader is None:
            self._reader = threading.Thread(target=self.host, daemon=True)
            self._reader.start()

    def save(self, runs: list[Point], incomplete: bool = True, info: dict[str, Any] | None = None) -> None:
        """Write both files for ``runs`` as they stand."""
        if not (self.outs.json or self.outs.csv):
            return
        from cudalab.session import sweep  # noqa: PLC0415

        record = sweep.record(self.spec, runs, incomplete, info or self.info, sys.argv, self.started, host=self.host())
        self.write(record)

    def write(self, record: RunRecord) -> None:
        """Write ``record`` to ``--json`` and its rows to ``--csv``."""
        from cudalab import report  # noqa: PLC0415
        from cudalab.records.results import save_record  # noqa: PLC0415

        if self.outs.json:
            save_record(self.outs.json, record)
        if self.outs.csv:
            report.write_csv(self.outs.csv, [r for p in record.points for r in p.results])


def record_to_stdout(spec: catalog.FamilySpec, fam: Family, kw: dict[str, Any]) -> None:
    """``--json -``: the run as :func:`run_family` makes it, its tables and header on stderr, and the whole record
    on stdout, alone (written before the exit code is decided: an incorrect row still gives the record)."""
    import contextlib  # noqa: PLC0415
    import json  # noqa: PLC0415

    out, got = sys.stdout, []
    try:
        with contextlib.redirect_stdout(sys.stderr):
            run_family(spec, fam, dict(kw, json_path=None, json_emit=got.append))
    finally:
        if got:
            out.write(json.dumps(got[-1].to_dict(), indent=1, default=str) + "\n")
            out.flush()


def run_family(spec: catalog.FamilySpec, fam: Family, kw: dict[str, Any]) -> None:
    """Start the workers, precheck on the CPU meanwhile, run every point, deliver; exit 1 on a bad row."""
    if kw.get("json_path") == "-":
        return record_to_stdout(spec, fam, kw)
    outs, started = Outputs.of(kw), time.time()
    opened: dict[str, Any] = {}  # the first GPU's facts, as its worker opens it
    saver = Saver(spec, outs, started, opened)
    # the command line, typed once: what runs (all the session sees of it) and where (all the engine sees)
    opts, workers = run_options(fam, kw), workers_of(kw)
    from cudalab.report import progress  # noqa: PLC0415
    from cudalab.session import sweep  # noqa: PLC0415
    from cudalab.records.results import Status  # noqa: PLC0415
    from cudalab.session.run import run_points  # noqa: PLC0415

    if outs.ncu:  # ncu missing or not executable: said before the GPU run, not after it
        from cudalab import ncu  # noqa: PLC0415

        ncu.find_ncu()

    def on_open(device: dict[str, Any], plans: list[Plan]) -> None:
        if not opened:
            opened.update(device)
            saver.read_host_soon()
        print_header(device, plans[0].request)

    ran = run_points(spec, fam, opts, workers, progress.for_stderr(outs.quiet), check=outs.check, on_open=on_open,
                     on_change=saver.save)
    ex = ran.executed
    refused = ex.refusal()
    if refused is not None and not ex.incomplete:  # nothing ran: a bad size for this GPU is bad input
        raise refused
    record = sweep.record(spec, ex.runs, ex.incomplete, ex.info, sys.argv, started, host=saver.host())
    if outs.ncu and not ex.incomplete:
        from cudalab import ncu  # noqa: PLC0415

        record = replace(record, points=tuple(ncu.add_ncu(p, req) for p, req in zip(record.points, ran.requests)))
    deliver(record, outs, saver, fam, ex.runs)
    rows = [r for p in record.points for r in p.results]
    if ex.incomplete:
        sys.exit(ex.exit_code or 130)
    if any(r.status.bad for r in rows):
        sys.exit(1)
    if rows and all(r.status == Status.SKIPPED for r in rows):
        raise UsageError(rows[0].reason)


def deliver(record: RunRecord, outs: Outputs, saver: Saver, fam: Family, runs: list[Point]) -> None:
    """Everything the command does with a finished run, in one place and in this order: the files (first: a
    broken terminal cannot cost them), ``--json -``'s record, the tables (:func:`cudalab.report.saved.print_run`:
    with ``--show``'s arrays and nvcc's logs), the plot."""
    from cudalab.report.console import console  # noqa: PLC0415
    from cudalab.report.saved import print_run  # noqa: PLC0415

    saver.write(record)
    if outs.emit is not None:
        outs.emit(record)
    print_run(console(), record, fam.EXTRA_COLUMNS, long=outs.layout == "long", family=fam if fam.SHOW else None,
              runs=runs)
    if outs.plot:
        from cudalab.report import plot  # noqa: PLC0415

        plot.plot_record(record, outs.plot)


def print_header(device: dict[str, Any], req: RunRequest) -> None:
    """What runs where, printed as the GPU opens: a user waiting on a slow run sees what it is."""
    from cudalab import report  # noqa: PLC0415

    con = report.console()
    for text in report.header_lines(device, f"cudalab {req.family}", "", req.protocol, None):
        if text:
            con.print(text, markup=False, highlight=False)
