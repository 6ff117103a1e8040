"""``cudalab <family>``: run the variants of one family, print the table, save the record."""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import replace
from typing import Any

import click

from cudalab import __version__, catalog, gpu, machine, report, runner
from cudalab.cli.app import CONTEXT
from cudalab.cli.options import problem_options, requests_from, timing_options
from cudalab.errors import UsageError
from cudalab.families import Family, load
from cudalab.results import RunPoint, RunRecord, Status, save_record


def family_command(spec: catalog.FamilySpec) -> click.Command:
    """Build ``cudalab <family>`` from the family's spec and its options."""
    fam = load(spec.module)

    def callback(**kw: Any) -> None:
        run_family(spec, fam, kw)

    params = problem_options(spec, fam) + timing_options() + [
        click.Option(["--ncu", "ncu_"], is_flag=True,
                     help="Add Nsight Compute columns (wavefronts/request, bank conflicts, ncu ms) after timing."),
    ]
    if fam.SHOW:
        params.append(click.Option(["--show"], is_flag=True, help="Print the inputs and each variant's result (small problems)."))
    return click.Command(spec.name, callback=callback, params=params, context_settings=CONTEXT,
                         help=f"{spec.description}.\n\nVariants: {', '.join(spec.names())}.",
                         short_help=spec.description)


def run_family(spec: catalog.FamilySpec, fam: Family, kw: dict[str, Any]) -> None:
    """Precheck on the CPU, open the GPU, run every request, render, save; exit 1 on a bad row."""
    requests = requests_from(spec, fam, kw)
    for req in requests:
        runner.precheck(req)  # everything that can be refused without a GPU, before opening one
    started = time.time()
    runs, incomplete, info = execute(requests)
    points = [point_of(run, spec) for run in runs]
    if kw["ncu_"] and not incomplete:
        from cudalab import ncu  # noqa: PLC0415

        points = [ncu.add_ncu(p, req) for p, req in zip(points, requests)]
    record = RunRecord(cudalab=__version__, command=tuple(sys.argv), started=started, device=info,
                       points=tuple(points), incomplete=incomplete, machine=machine.facts())
    con = report.console()
    for p in record.points:
        report.print_point(con, record, p, fam.EXTRA_COLUMNS)
        if p.results and fam.SHOW:
            show(con, fam, runs[record.points.index(p)])
    if kw["json_path"]:
        save_record(kw["json_path"], record)
    rows = [r for p in record.points for r in p.results]
    if kw["csv_path"]:
        report.write_csv(kw["csv_path"], rows)
    if incomplete:
        sys.exit(130)
    if any(r.status.bad for r in rows):
        sys.exit(1)
    if rows and all(r.status == Status.SKIPPED for r in rows):
        raise UsageError(rows[0].reason)


def execute(requests: list[runner.RunRequest]) -> tuple[list[runner.FamilyRun], bool, dict]:
    """Run the requests on one GPU; Ctrl-C or SIGTERM keeps the rows measured so far.

    Returns:
        (runs, incomplete, device facts).
    """
    tele = open_telemetry(requests[0])  # before the context: who else is on the GPU; --exclusive, --lock-clocks
    try:
        dev = gpu.Device(requests[0].device)
    except BaseException:
        if tele.telemetry is not None:
            tele.telemetry.close()
        raise
    if tele.telemetry is not None:
        tele.telemetry.after_open()
    err = report.console(stderr=True)

    def progress(r: runner.Result) -> None:
        t = f"{r.median_ms:.4f} ms" if r.median_ms is not None else ""
        err.print(f"  {requests[0].family}/{r.variant}: {r.status} {t} {r.reason}".rstrip(), markup=False)

    runs: list[runner.FamilyRun] = []
    incomplete = False
    # A batch system's SIGTERM is handled like Ctrl-C: the rows measured so far are kept.
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    try:
        for req in requests:
            runs.append(runner.FamilyRun(req, dev, on_result=progress, telemetry=tele.telemetry))
            runs[-1].run()
    except KeyboardInterrupt:
        incomplete = True
        err.print("interrupted: keeping the rows measured so far (marked incomplete)")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        info = dev.info.to_dict()
        if tele.telemetry is not None:
            info["telemetry"] = tele.telemetry.summary()
            tele.telemetry.close()  # restores a locked clock
        else:
            info["telemetry"] = {"note": tele.note}
        try:
            dev.close()
        except Exception:  # after a sticky GPU error closing can fail too; the rows matter more
            pass
    return runs, incomplete, info


def open_telemetry(req: runner.RunRequest):
    """NVML for the request's GPU (:func:`cudalab.telemetry.open_telemetry`), or a note why not.

    Raises:
        TelemetryError: ``--exclusive`` with another process on the GPU, or ``--lock-clocks`` refused.
    """
    from cudalab import telemetry  # noqa: PLC0415

    try:
        bus = gpu.pci_bus_id(req.device)
    except Exception:  # the device is opened next and says what is wrong in its own words
        bus = None
    return telemetry.open_telemetry(req.device, bus, exclusive=req.exclusive, lock_mhz=req.lock_clocks)


def point_of(run: runner.FamilyRun, spec: catalog.FamilySpec) -> RunPoint:
    """A finished run as a record point (rates as % of the roofline, or of the library row for FLOPs)."""
    return RunPoint(family=spec.name, metric=spec.metric, problem=run.problem.to_dict(), block=run.req.block or "",
                    protocol=dict(run.req.protocol.__dict__), roofline=run.roofline,
                    results=tuple(report.pct_column(run.results, spec.metric)), defines=run.req.defines)


def show(con: Any, fam: Family, run: runner.FamilyRun) -> None:
    """``--show``: the inputs, then each variant's result."""
    if not run.outputs:
        return
    con.print(fam.show(run.problem, run.inputs, None), markup=False)
    for name, out in run.outputs.items():
        con.print(f"--- {name}", markup=False)
        con.print(fam.show(run.problem, {}, out), markup=False)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
