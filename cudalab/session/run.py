"""One family run, as the command line (``cudalab FAMILY``) and :func:`cudalab.run` both make it.

Both describe the run in the family command's own words, its keyword arguments as click names them
(``variants``, ``n``, ``budget``, ``energy``, ``exclusive``, ``lock_clocks``, ``force``, ``devices``,
``timeout``, the family's options with ``-`` as ``_``...), and both call :func:`run_points`: the GPU
workers start, the points are built (:func:`requests_from`) and refused on the CPU where they can be
while the workers come up, then every point runs. What differs is only what each does with the runs
(the command line prints and saves them, the API returns the record).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cudalab.session import sweep
from cudalab.catalog import user
from cudalab.bench import Protocol
from cudalab.catalog import FamilySpec
from cudalab.build.defines import parse_defines
from cudalab.errors import UsageError
from cudalab.families import Family
from cudalab.progress import Observer
from cudalab.worker.executor import FamilyRun, RunRequest
from cudalab.session.devices import parse_devices
from cudalab.session.drive import Session

__all__ = ["requests_from", "start_session", "Ran", "run_points"]


def requests_from(spec: FamilySpec, fam: Family, kw: dict[str, Any]) -> list[RunRequest]:
    """The runs the options ask for: the cross product of every comma list (a sweep), else one.

    Raises:
        UsageError: conflicting or malformed options, a missing ``--add`` file.
    """
    if kw.get("all_") and kw.get("variants"):
        raise UsageError("give --all or --variant, not both")
    if kw.get("budget", 1.0) <= 0 or kw.get("min_samples", 1) < 1:
        raise UsageError("--budget must be positive and --min-samples at least 1")
    protocol = Protocol(budget_s=kw.get("budget", 0.5), min_samples=kw.get("min_samples", 10),
                        flush_l2=not kw.get("hot", False), energy_s=1.0 if kw.get("energy") else 0.0)
    base = sweep.base_request(
        spec, fam, variants=kw.get("variants"), grid=kw.get("grid"), add=user.parse_adds(kw.get("add") or ()),
        protocol=protocol, seed=kw.get("seed"), roofline=not kw.get("no_roofline", False), device=kw.get("device", 0),
        keep_outputs=bool(kw.get("show") or kw.get("example")), force=bool(kw.get("force")),
        exclusive=bool(kw.get("exclusive")), lock_clocks=kw.get("lock_clocks"))
    options = {o.name: kw.get(o.name.replace("-", "_")) for o in fam.OPTIONS}
    ax = sweep.axes(spec, fam, n=kw.get("n"), shape=kw.get("shape"), dtype=kw.get("dtype"), block=kw.get("block"),
                    options=options, defines=parse_defines(kw.get("defines") or (), spec))
    return sweep.requests(spec, base, ax)


def start_session(kw: dict[str, Any]) -> Session:
    """Start the GPU workers now, so they open their GPUs while this process plans the run.

    ``--exclusive`` and ``--lock-clocks`` first ask NVML about the GPU (the run starts the workers
    after that), so no worker starts here then.

    Raises:
        UsageError: a bad ``--devices`` or ``--timeout``.
    """
    timeout = kw.get("timeout")
    if timeout is not None and not (timeout > 0 and timeout < float("inf")):
        raise UsageError(f"--timeout must be a positive number of seconds (got {timeout})")
    devices = parse_devices(kw.get("devices"), kw.get("device", 0))
    session = Session(devices, timeout=timeout, energy=bool(kw.get("energy")))
    if not (kw.get("exclusive") or kw.get("lock_clocks") is not None):
        session.start()
    return session


@dataclass(frozen=True)
class Ran:
    """What :func:`run_points` returns: the points asked for, each one's variant count, and what ran."""

    requests: list[RunRequest]
    counts: list[int]
    executed: sweep.Executed


def run_points(spec: FamilySpec, fam: Family, kw: dict[str, Any], observer: Observer | None = None, *,
               check: Callable[[], None] | None = None,
               on_open: Callable[[dict[str, Any], list[RunRequest]], None] | None = None,
               on_change: Callable[[list[FamilyRun]], None] | None = None) -> Ran:
    """Start the workers, build and precheck the points meanwhile, run them (Ctrl-C keeps what finished).

    Args:
        spec, fam: the family.
        kw: the family command's keyword arguments (click's names; what is missing takes its default).
        observer: progress.
        check: called once the workers are starting, before the points are built (the command line
            refuses its output paths there); what it raises ends the workers.
        on_open: gets a GPU's facts and the points as its worker opens it.
        on_change: gets the runs after every row and roofline.

    Raises:
        UsageError, LaunchConfigError: bad options, or no point can run (before any GPU work).
        WorkerError: no worker could open its GPU.
    """
    session = start_session(kw)
    try:
        if check is not None:
            check()
        requests = requests_from(spec, fam, kw)
        counts = sweep.precheck_points(requests)  # what can be refused without a GPU, before using one
    except BaseException:
        session.kill()
        raise
    opened = (lambda device: on_open(device, requests)) if on_open is not None else None
    # The GPUs and the limit again: --exclusive and --lock-clocks start the workers in execute (after NVML).
    gpus = "all" if session.all_devices else [s.device for s in session.slots]
    ex = sweep.execute(requests, observer, sum(counts), on_open=opened, session=session, on_change=on_change,
                       devices=gpus, timeout=session.timeout)
    return Ran(requests, counts, ex)
