"""One family run, as the command line (``cudalab FAMILY``) and :func:`cudalab.run` both make it.

Both describe the run as one typed :class:`~cudalab.session.options.RunOptions` and where it runs as a
:class:`~cudalab.execute.Workers`, and both call
:func:`run_points`: the GPU workers start, the points are built (:func:`requests_from`) and planned once
each on the CPU while the workers come up (refusing what can be refused), then every planned point runs.
What differs is only what each does with the points (the command line prints and saves them, the API
returns the record).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cudalab.session import sweep
from cudalab.bench import LAUNCH_METHODS, Protocol
from cudalab.catalog import FamilySpec
from cudalab.build.defines import parse_defines
from cudalab.errors import UsageError
from cudalab.families import Family
from cudalab.progress import Observer
from cudalab.plan import Plan, RunRequest
from cudalab.execute.point import Point
from cudalab.execute import Workers, open_executor
from cudalab.execute.executor import Executor
from cudalab.session.options import RunOptions, seconds

__all__ = ["requests_from", "on_its_device", "start_session", "Ran", "run_points"]


def requests_from(spec: FamilySpec, fam: Family, opts: RunOptions) -> list[RunRequest]:
    """The runs the options ask for: the cross product of every comma list (a sweep), else one.

    Raises:
        UsageError: conflicting or malformed options, a missing ``--add`` file.
    """
    if opts.all and opts.variants:
        raise UsageError("give --all or --variant, not both")
    if opts.budget <= 0 or opts.min_samples < 1:
        raise UsageError("--budget must be positive and --min-samples at least 1")
    if opts.launch not in LAUNCH_METHODS:
        raise UsageError(f"--launch {opts.launch!r}: one of {', '.join(LAUNCH_METHODS)}")
    protocol = Protocol(budget_s=opts.budget, min_samples=opts.min_samples, flush_l2=not opts.hot,
                        energy_s=1.0 if opts.energy else 0.0, drop_throttled=opts.drop_throttled,
                        launch=opts.launch)
    base = sweep.base_request(
        spec, fam, variants=opts.variants, grid=opts.grid, add=opts.add, protocol=protocol,
        seed=opts.seed, roofline=opts.roofline, device=opts.device, keep_outputs=opts.keep_outputs,
        force=opts.force, exclusive=opts.exclusive, lock_clocks=opts.lock_clocks)
    ax = sweep.axes(spec, fam, n=opts.n, shape=opts.shape, dtype=opts.dtype, block=opts.block,
                    options=dict(opts.options), defines=parse_defines(opts.defines, spec))
    return sweep.requests(spec, base, ax)


def on_its_device(opts: RunOptions, timeout: float | None = None) -> Workers:
    """One worker on the run's own ``device`` (no ``--devices``, no cluster): the studies' runs (truth, calibrate)."""
    return Workers(device=opts.device, timeout=timeout, energy=opts.energy,
                   nvml_first=opts.exclusive or opts.lock_clocks is not None)


def check_timeout(workers: Workers) -> None:
    """Refuse a ``--timeout`` that is not a positive, finite number of seconds.

    Raises:
        UsageError: it is not.
    """
    if workers.timeout is not None:
        seconds(workers.timeout, "--timeout")


def start_session(workers: Workers, observer: Observer | None = None,
                  on_ready: Callable[[dict[str, Any]], None] | None = None,
                  on_change: Callable[[list[Point]], None] | None = None) -> Executor:
    """The run's executor (:func:`~cudalab.execute.executor.open_executor`: the one place the engine is chosen),
    started now, so the GPU workers open their GPUs while this process plans the run.

    ``--exclusive`` and ``--lock-clocks`` first ask NVML about the GPU (the run starts the workers
    after that), so no worker starts here then.

    Raises:
        UsageError: a bad ``--cluster``, ``--devices`` or ``--timeout``.
    """
    check_timeout(workers)
    executor = open_executor(workers, observer, on_ready, on_change)
    executor.start()
    return executor


@dataclass(frozen=True)
class Ran:
    """What :func:`run_points` returns: the planned points and what ran."""

    plans: list[Plan]
    executed: sweep.Executed

    @property
    def requests(self) -> list[RunRequest]:
        """Each point's request (its seed fixed by the plan)."""
        return [p.request for p in self.plans]


def run_points(spec: FamilySpec, fam: Family, opts: RunOptions, workers: Workers, observer: Observer | None = None, *,
               check: Callable[[], None] | None = None,
               on_open: Callable[[dict[str, Any], list[Plan]], None] | None = None,
               on_change: Callable[[list[Point]], None] | None = None) -> Ran:
    """Start the workers, build and plan the points meanwhile, run them (Ctrl-C keeps what finished).

    Args:
        spec, fam: the family.
        opts: the run.
        workers: where it runs.
        observer: progress.
        check: called once the workers are starting, before the points are built (the command line
            refuses its output paths there); what it raises ends the workers.
        on_open: gets a GPU's facts and the plans as its worker opens it.
        on_change: gets the points after every row and roofline.

    Raises:
        UsageError, LaunchConfigError: bad options, or no point can run (before any GPU work).
        WorkerError: no worker could open its GPU.
    """
    plans: list[Plan] = []  # filled once planned; the GPU opens (on_open) only after that
    opened = (lambda device: on_open(device, plans)) if on_open is not None else None
    executor = start_session(workers, observer, on_ready=opened, on_change=on_change)
    try:
        if check is not None:
            check()
        requests = requests_from(spec, fam, opts)
        plans += sweep.plan_points(requests)  # planned once each, before using a GPU
    except BaseException:
        executor.cancel()
        raise
    ex = sweep.execute(plans, sum(len(p.variants) for p in plans), executor)
    return Ran(plans, ex)
