"""Sweeps: every axis of a family run may be a list; the cross product is one RunRequest per point.

Shared by the family command (:mod:`cudalab.cli.options`) and the Python API (:mod:`cudalab.api`):
:func:`requests` builds the points, :func:`plan_points` plans each once (refusing what can be refused
without a GPU), :func:`execute` runs the plans on GPU workers and :func:`record` makes the saved
:class:`~cudalab.records.results.RunRecord` (one :class:`~cudalab.records.results.RunPoint` per point). No click, no rich.
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from cudalab import __version__
from cudalab.bench import Protocol
from cudalab.catalog import FamilySpec
from cudalab.errors import CudalabError, UsageError
from cudalab.families import Family
from cudalab.plan import Plan, RunRequest, precheck
from cudalab.execute.executor import Executor
from cudalab.records.results import RunPoint, RunRecord
from cudalab.roofline import pct_column
from cudalab.execute.point import Point
from cudalab.catalog.user import UserKernel

__all__ = ["Axes", "axes", "split", "base_request", "requests", "plan_points", "Executed", "execute", "record",
           "point_of"]


def split(value: Any, what: str) -> list[Any]:
    """One axis as a list: ``None`` is one point with the default, a comma text or a list is a sweep.

    Raises:
        UsageError: an empty entry (``--n 1k,,4k``).
    """
    if value is None:
        return [None]
    items = [s.strip() for s in value.split(",")] if isinstance(value, str) else list(value)
    if not items or any(isinstance(x, str) and not x for x in items):
        raise UsageError(f"{what} {value!r} has an empty entry (example: {what} a,b,c)")
    return items


@dataclass(frozen=True)
class Axes:
    """The values of every axis of a sweep (each a list; ``[None]``: the default).

    Attributes:
        n, shape, dtype, block: as the family command's options, one entry per point.
        options: family option name -> values (``tile`` -> [8, 16, 32]).
        defines: macro name -> values (``-D UNROLL=2,4,8``).
    """

    n: tuple[Any, ...] = (None,)
    shape: tuple[Any, ...] = (None,)
    dtype: tuple[Any, ...] = (None,)
    block: tuple[Any, ...] = (None,)
    options: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    defines: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _typed(fam: Family, name: str, values: list[Any]) -> tuple[Any, ...]:
    opt = next((o for o in fam.OPTIONS if o.name == name), None)
    if opt is None:
        raise UsageError(f"no option {name!r}; valid: {', '.join(o.name for o in fam.OPTIONS) or 'none'}")
    if opt.type is bool or any(v is None for v in values):
        return tuple(opt.default if v is None else v for v in values)
    out = []
    for v in values:
        try:
            out.append(opt.type(v.strip() if isinstance(v, str) else v))
        except (TypeError, ValueError):
            raise UsageError(f"--{name} {v!r} is not a{'n int' if opt.type is int else ' number'}") from None
    return tuple(out)


def axes(spec: FamilySpec, fam: Family, n: Any = None, shape: Any = None, dtype: Any = None, block: Any = None,
         options: dict[str, Any] | None = None, defines: Iterable[tuple[str, Any]] = ()) -> Axes:
    """Read every axis from texts (``"1k,4k"``) or lists, checking dtypes and option types.

    Raises:
        UsageError: an unknown dtype or option, a value of the wrong type, an empty entry.
    """
    dtypes = split(dtype, "--dtype")
    bad = [d for d in dtypes if d is not None and d not in spec.dtypes]
    if bad:
        raise UsageError(f"{spec.name} has no dtype {bad[0]!r}; valid: {', '.join(spec.dtypes)}")
    opts = tuple((k, _typed(fam, k, split(v, f"--{k}") if not isinstance(v, (int, float)) else [v]))
                 for k, v in (options or {}).items())
    defs: dict[str, tuple[str, ...]] = {}
    for name, value in defines:
        defs[name] = tuple(str(x) for x in split(value if not isinstance(value, (int, float)) else str(value),
                                                 f"-D {name}="))
    return Axes(n=tuple(split(n, "--n")), shape=tuple(split(shape, "--shape")), dtype=tuple(dtypes),
                block=tuple(split(block, "--block")), options=opts, defines=tuple(defs.items()))


#: The most points one sweep may have: a run of more would take days, and its requests alone fill memory
#: (``-D X=<2000 values> -D Y=<2000 values>`` is four million).
MAX_POINTS = 10_000


def count(ax: Axes) -> int:
    """How many points the axes make: the product of their lengths (nothing built)."""
    lengths = [len(ax.n), len(ax.shape), len(ax.dtype), len(ax.block), *(len(v) for _, v in ax.options),
               *(len(v) for _, v in ax.defines)]
    return math.prod(lengths)


def requests(spec: FamilySpec, base: RunRequest, ax: Axes) -> list[RunRequest]:
    """The cross product of the axes, one RunRequest per point (block varies fastest, sizes slowest).

    Raises:
        UsageError: more than :data:`MAX_POINTS` points (counted before any is built).
    """
    total = count(ax)
    if total > MAX_POINTS:
        sizes = [(f"--{k}" if k in ("n", "shape", "dtype", "block") else k, len(v)) for k, v in (
            ("n", ax.n), ("shape", ax.shape), ("dtype", ax.dtype), ("block", ax.block), *(
                (f"--{k}", v) for k, v in ax.options), *((f"-D {k}", v) for k, v in ax.defines)) if len(v) > 1]
        raise UsageError(f"the sweep has {total:,} points ({' x '.join(f'{n} {k}' for k, n in sizes)}); "
                         f"cudalab runs at most {MAX_POINTS:,} in one command: split it")
    opt_names = [k for k, _ in ax.options]
    def_names = [k for k, _ in ax.defines]
    out = []
    for n, shape, dtype, opt_vals, def_vals, block in itertools.product(
            ax.n, ax.shape, ax.dtype, itertools.product(*[v for _, v in ax.options]),
            itertools.product(*[v for _, v in ax.defines]), ax.block):
        options = dict(base.options)
        options.update(zip(opt_names, opt_vals))
        defines = dict(base.defines)
        defines.update(zip(def_names, def_vals))
        out.append(RunRequest(**{
            **{f: getattr(base, f) for f in base.__dataclass_fields__},
            "n": None if n is None else str(n), "shape": shape, "dtype": dtype,
            "block": None if block is None else str(block), "options": tuple(options.items()),
            "defines": tuple(defines.items()),
        }))
    return out


def base_request(spec: FamilySpec, fam: Family, variants: str | None = None, grid: str | None = None,
                 add: Sequence[UserKernel] = (), protocol: Protocol = Protocol(), seed: int | None = None,
                 roofline: bool = True, device: int = 0, keep_outputs: bool = False,
                 force: bool = False, exclusive: bool = False, lock_clocks: int | None = None) -> RunRequest:
    """What every point of a sweep shares (family option defaults filled in)."""
    return RunRequest(
        family=spec.name, variants=variants, grid=grid, options=tuple((o.name, o.default) for o in fam.OPTIONS),
        protocol=protocol, seed=seed, roofline=roofline, device=device, keep_outputs=keep_outputs, add=tuple(add),
        force=force, exclusive=exclusive, lock_clocks=lock_clocks)


def plan_points(reqs: Sequence[RunRequest]) -> list[Plan]:
    """Plan every point once (:func:`cudalab.plan.precheck`), refusing on the CPU what no point can run.

    A bad name or size anywhere is refused at once; a point where no variant fits its rules is
    kept (its skipped rows are shown) as long as another point can run.

    Raises:
        UsageError, LaunchConfigError: the first reason, when no point can run (or a bad size).
    """
    plans = [precheck(req, strict=False) for req in reqs]  # a bad size raises here, at once
    blocked = [p.blocked for p in plans if p.blocked is not None]
    if plans and len(blocked) == len(plans):
        raise blocked[0]
    return plans


@dataclass(frozen=True)
class Executed:
    """What :func:`execute` returns.

    Attributes:
        runs: one :class:`~cudalab.execute.point.Point` per point started (its plan, rows, roofline, GPU).
        incomplete: interrupted (Ctrl-C, SIGTERM) or cut short: what finished is kept.
        info: the GPU's facts (every GPU's under ``devices``), with the telemetry summary.
        exit_code: 130 after Ctrl-C, 143 after SIGTERM, 0 otherwise.
    """

    runs: list[Point]
    incomplete: bool
    info: dict[str, Any]
    exit_code: int = 0

    def refusal(self) -> CudalabError | None:
        """The error to report when every point was refused before any GPU work (its memory plan did not
        fit the GPU's free memory): one line and its exit code, as any bad input."""
        if not self.runs or not all(r.refused for r in self.runs):
            return None
        why, code = self.runs[0].refused  # type: ignore[misc]
        err = CudalabError(why)
        err.exit_code = code
        return err


def execute(plans: Sequence[Plan], total: int, executor: Executor) -> Executed:
    """Run every planned point on ``executor`` (:func:`cudalab.execute.executor.open_executor` chose it); Ctrl-C
    or SIGTERM keeps what finished.

    Args:
        plans: the planned points (:func:`plan_points`).
        total: rows in all, for the bar's ETA.
        executor: where they run; closed (cancelled after an interrupt) when they are done.

    Raises:
        WorkerError: no worker could open its GPU; ClusterError, ClusterLost: as the cluster's.
        TelemetryError: ``--exclusive`` with another process on the GPU, or ``--lock-clocks`` refused.
    """
    from cudalab.execute.signals import interrupts  # noqa: PLC0415  (only when points run)

    runs: list[Point] = []
    incomplete, code = True, 0
    try:
        with interrupts() as caught:
            executor.submit(plans, total)
            runs, incomplete = executor.wait()
        if caught.signum is not None:
            code = 128 + caught.signum
            print("interrupted: keeping the rows measured so far (marked incomplete)", file=sys.stderr)
    finally:
        if code:
            executor.cancel()
        else:
            executor.close()
    return Executed(runs, incomplete or bool(code), executor.info(), code)


def point_of(run: Point, spec: FamilySpec) -> RunPoint:
    """A finished run as a record point (rates as % of the roofline, or of the library row for FLOPs)."""
    return RunPoint(family=spec.name, metric=spec.metric, problem=run.problem.to_dict(), block=run.req.block or "",
                    protocol=dict(run.req.protocol.__dict__), roofline=run.roofline,
                    results=tuple(pct_column(run.results, spec.metric)), defines=run.req.defines,
                    device=getattr(run, "gpu", None), roofline_note=getattr(run, "roofline_note", ""))


def record(spec: FamilySpec, runs: Sequence[Point], incomplete: bool, device: dict[str, Any],
           command: Sequence[str], started: float | None = None, points: Sequence[RunPoint] | None = None,
           host: dict[str, Any] | None = None) -> RunRecord:
    """The saved record of a run (``points`` when a tool has added columns to them; ``host``: the host's
    facts when the caller has them already, :func:`cudalab.records.machine.facts` otherwise, ~20 ms with git)."""
    from cudalab.records import machine  # noqa: PLC0415

    pts = tuple(points) if points is not None else tuple(point_of(r, spec) for r in runs)
    return RunRecord(cudalab=__version__, command=tuple(command), started=started or time.time(), device=device,
                     points=pts, incomplete=incomplete, machine=host if host is not None else machine.facts())
