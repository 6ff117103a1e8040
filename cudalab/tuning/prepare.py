"""A tuning campaign checked before any GPU work (:func:`plan`): the family, the space, its constraints, the
strategy, the storage and the base request; and the run point of one configuration (:func:`trial_request`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterator

from cudalab import catalog
from cudalab.bench import Protocol
from cudalab.errors import LaunchConfigError, UsageError
from cudalab.families import load
from cudalab import plan as planning
from cudalab.plan import RunRequest, make_problem
from cudalab.session import sweep
from cudalab.tuning import campaign as C
from cudalab.tuning import own
from cudalab.tuning import strategy as S
from cudalab.tuning.options import TuneOptions
from cudalab.tuning.runs import precheck
from cudalab.tuning.space import BLOCK, ENUMERATE_LIMIT, Space
from cudalab.tuning.spaces import default_point, kernel_variant, make_space, table_for

__all__ = ["DEFAULT_TRIALS", "CampaignPlan", "first_requests", "plan", "trial_request"]

#: Trials when neither --trials nor --time is given (grid: the whole space).
DEFAULT_TRIALS = 100


@dataclass(frozen=True)
class CampaignPlan:
    """A checked campaign, before any GPU work: the family, the space, the storage, the base request."""

    opts: TuneOptions
    spec: Any
    fam: Any
    variant: Any
    space: Space
    valid: int
    base: Any
    name: str
    url: str
    meta: dict[str, Any]
    strategy: str
    budget: int
    valid_points: list[dict[str, str]] | None = None  # in the space's order (None: too many to list)
    add: Any = None  # the --add kernel tuned (a UserKernel), None for a family's variant


def plan(opts: TuneOptions) -> CampaignPlan:
    """Check everything that can be checked without a GPU.

    Raises:
        UsageError, LaunchConfigError: one line each (bad names, values, constraints, empty space, budget).
    """
    if opts.trials is not None and opts.trials < 1:
        raise UsageError(f"--trials must be at least 1 (got {opts.trials})")
    if opts.time_s is not None and not opts.time_s > 0:
        raise UsageError("--time must be a positive duration (example: --time 10m)")
    bad = [o for o in opts.objectives if o not in ("time", "energy")]
    if bad or not opts.objectives or len(set(opts.objectives)) != len(opts.objectives):
        raise UsageError(f"--objective {','.join(opts.objectives)!r}: give time, energy or time,energy")
    if opts.tolerance is not None and not 0 < opts.tolerance < 0.5:
        raise UsageError(f"--tolerance must be between 0 and 0.5 (got {opts.tolerance})")
    spec = catalog.family(opts.family)
    fam = load(spec.module)
    uk = None
    if opts.add is not None:  # the user's kernel on the family's problem (tuning/own.py)
        uk, v = own.own_variant(spec, opts.add, opts.variant)
    else:
        v = kernel_variant(spec, opts.variant)
    table = table_for(spec, v.name) if uk is None else None
    space = make_space(spec, fam, v, defines=opts.defines, block=opts.block, options=dict(opts.options),
                       require=opts.require, use_table=opts.use_table and uk is None)
    valid_points = space.valid_points() if space.size() <= ENUMERATE_LIMIT else None
    valid = len(valid_points) if valid_points is not None else None
    if valid == 0:
        first = next(space.points())
        raise UsageError(f"the space is empty: none of its {space.size():,} points meets every constraint "
                         f"(the first breaks {space.allows(first)!r})")
    strategy = S.strategy_for(opts.strategy, opts.objectives)
    S.sampler(strategy, opts.seed, space, len(opts.objectives))  # an unknown or unusable strategy: now
    n = opts.n or (table.n if table else None)
    shape = opts.shape or (table.shape if table else None)
    protocol = Protocol(budget_s=opts.budget, min_samples=opts.min_samples, flush_l2=not opts.hot,
                        energy_s=1.0 if "energy" in opts.objectives else 0.0)
    base = sweep.base_request(spec, fam, variants="none" if uk is not None else v.name, protocol=protocol,
                              seed=opts.seed or 0, device=opts.device, add=(uk,) if uk is not None else ())
    base = replace(base, n=n, shape=shape, dtype=opts.dtype)
    # the family's own configuration, as the campaign measures it first: a replay starts with it too
    dflt = default_point(spec, fam, v, space, dict(base.options))
    if uk is not None:  # the names its expressions use, before any build
        problem = make_problem(spec, fam, base)
        own.check_names(v, space, fam.defines(problem, v), dict(problem.options))
    own.check_tiles(v, space, valid_points)  # a tile expression of 0 at a valid point: before any build
    if uk is None:
        precheck(base)  # a bad size, dtype or a default configuration the rules refuse: before any GPU work
    else:
        first = dflt if all(dflt.values()) and not space.allows(dflt) else (valid_points or [None])[0]
        if first is not None:  # the size, the dtype, one configuration's launch and the kernel's parameters
            planning.precheck(_point_request(base, space, fam, first))  # (its build is the first trial's)
    context = {"family": spec.name, "variant": v.name, "n": n, "shape": shape, "dtype": opts.dtype,
               "objectives": list(opts.objectives)}
    fp = space.fingerprint(context)
    name = opts.name or f"{spec.name}-{v.name.lstrip('+')}"
    url = opts.storage or C.default_storage(name)[0]
    meta = {**context, "fingerprint": fp, "space": json.dumps(space.describe()), "default": json.dumps(dflt),
            "build": own.build_identity(spec, v)}
    # a space too large to list (valid None) has no "whole space" to default to: DEFAULT_TRIALS
    budget = opts.trials or (valid if valid is not None and (strategy == "grid" or valid <= DEFAULT_TRIALS)
                             else DEFAULT_TRIALS)
    return CampaignPlan(opts, spec, fam, v, space, valid or 0, base, name, url, meta, strategy, budget,
                        valid_points, uk)


def trial_request(p: CampaignPlan, point: dict[str, str]) -> Any:
    """The run point of one configuration: the base request with the point's block, options and defines."""
    return _point_request(p.base, p.space, p.fam, point)


def _point_request(base: Any, space: Space, fam: Any, point: dict[str, str]) -> Any:
    opts = dict(base.options)
    defines = dict(base.defines)
    block = base.block
    types = {o.name: o.type for o in fam.OPTIONS}
    for d in space.dims:
        value = point[d.name]
        if d.kind == BLOCK:
            block = value
        elif d.kind == "option":
            try:
                opts[d.name] = types[d.name](value) if types[d.name] is not bool else value.lower() in ("1", "true")
            except (TypeError, ValueError):
                raise UsageError(f"--{d.name} {value!r} is not a valid value") from None
        else:
            defines[d.name] = value
    return replace(base, block=block, options=tuple(opts.items()), defines=tuple(defines.items()))


def first_requests(p: Any, prop: Any, count: int) -> Iterator[RunRequest]:
    """A campaign's first trials as run points, before its study is open: every strategy's first (the family's own
    configuration, ``prop.first``) and a walk's next ones, at most ``count`` and the campaign's budget (a build still
    running holds the command's exit); what the constraints or the launch rules refuse is left out (never built).

    Args:
        p: the campaign's plan (:class:`~cudalab.tuning.prepare.CampaignPlan`).
        prop: a fresh :class:`~cudalab.tuning.propose.Proposer` of the campaign (its walk is read here).
        count: how many at most.
    """
    points = [] if prop.first is None else [prop.first]
    if prop.walk is not None:  # the walk starts with the first, where it is a valid point
        points = []
        while len(points) < min(count, p.budget) and (pt := prop.next_walk(())) is not None:
            points.append(pt)
    for point in points:
        if p.space.allows(point):
            continue
        req = trial_request(p, point)
        try:
            precheck(req)
        except (UsageError, LaunchConfigError):
            continue
        yield req
