"""Search strategies: Optuna's samplers, and how a space's dimensions are shown to them.

Each dimension becomes one Optuna distribution: a power-of-two range its exponent (an integer), an
integer range the integers, a list of integers their index (an ordered integer: neighbours stay
neighbours for CMA-ES and the Gaussian process), any other list a categorical choice. Dimensions with
one value are fixed and not shown. Nothing here runs a kernel.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any, Mapping, Sequence

from cudalab.errors import UsageError
from cudalab.tuning.space import ENUMERATE_LIMIT, Dim, Space

__all__ = ["STRATEGIES", "distributions", "decode", "encode", "sampler", "quiet_optuna"]

#: ``--strategy`` names.
STRATEGIES = ("grid", "random", "tpe", "cmaes", "gp", "nsga2")


def quiet_optuna() -> Any:
    """Import Optuna with its per-trial log lines and experimental-feature warnings off.

    Raises:
        UsageError: Optuna is not installed.
    """
    try:
        import optuna  # noqa: PLC0415
    except ImportError:
        raise UsageError("cudalab tune needs Optuna: pip install 'cudalab[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message=".*independent sampl.*")
    warnings.filterwarnings("ignore", category=FutureWarning, module="optuna")
    warnings.filterwarnings("ignore", category=UserWarning, module="optuna")
    return optuna


@functools.lru_cache(maxsize=256)  # per ask and tell: reading 100,000 values each time cost seconds a trial
def _kind(d: Dim) -> str:
    if d.pow2:
        return "pow2"
    if d.numeric:
        ints = [int(v) for v in d.values]
        if ints == list(range(ints[0], ints[0] + len(ints))):
            return "range"
        if ints == sorted(ints):
            return "ordinal"
    return "categorical"


def distributions(space: Space) -> dict[str, Any]:
    """Optuna distributions of the space's free dimensions (name -> distribution)."""
    optuna = quiet_optuna()
    D = optuna.distributions
    out: dict[str, Any] = {}
    for d in space.dims:
        if len(d.values) < 2:
            continue
        kind = _kind(d)
        if kind == "pow2":
            out[d.name] = D.IntDistribution(int(math.log2(int(d.values[0]))), int(math.log2(int(d.values[-1]))))
        elif kind == "range":
            out[d.name] = D.IntDistribution(int(d.values[0]), int(d.values[-1]))
        elif kind == "ordinal":
            out[d.name] = D.IntDistribution(0, len(d.values) - 1)
        else:
            out[d.name] = D.CategoricalDistribution(list(d.values))
    return out


def decode(space: Space, params: Mapping[str, Any]) -> dict[str, str]:
    """A point (name -> value text) from a trial's parameters."""
    point = {}
    for d in space.dims:
        if len(d.values) < 2:
            point[d.name] = d.values[0]
            continue
        p, kind = params[d.name], _kind(d)
        point[d.name] = (str(1 << int(p)) if kind == "pow2" else str(int(p)) if kind == "range"
                         else d.values[int(p)] if kind == "ordinal" else str(p))
    return point


def encode(space: Space, point: Mapping[str, str]) -> dict[str, Any]:
    """A trial's parameters from a point (the inverse of :func:`decode`)."""
    params: dict[str, Any] = {}
    for d in space.dims:
        if len(d.values) < 2:
            continue
        v, kind = point[d.name], _kind(d)
        params[d.name] = (int(math.log2(int(v))) if kind == "pow2" else int(v) if kind == "range"
                          else d.values.index(v) if kind == "ordinal" else v)
    return params


def _grid(space: Space) -> dict[str, list[Any]]:
    dist = distributions(space)
    out: dict[str, list[Any]] = {}
    for name, dd in dist.items():
        out[name] = list(dd.choices) if hasattr(dd, "choices") else list(range(dd.low, dd.high + 1))
    return out


def sampler(name: str, seed: int | None, space: Space, objectives: int = 1) -> Any:
    """The Optuna sampler for ``--strategy name``.

    Raises:
        UsageError: an unknown strategy, one that cannot handle the objectives, or one whose package
            is missing (cmaes, torch for gp).
    """
    optuna = quiet_optuna()
    S = optuna.samplers
    if name not in STRATEGIES:
        raise UsageError(f"--strategy {name!r} is not one of {', '.join(STRATEGIES)}")
    if objectives > 1 and name in ("cmaes", "gp"):
        raise UsageError(f"--strategy {name} optimises one objective; for two use nsga2, tpe or random")
    if name == "grid":
        if not any(len(d.values) > 1 for d in space.dims):
            raise UsageError("the space has one point: nothing to search")
        if space.size() > ENUMERATE_LIMIT:  # the campaign walks it lazily (propose.Proposer); Optuna's lists it all
            return S.RandomSampler(seed=seed)
        class Grid(S.GridSampler):
            def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
                pass  # Optuna's stops an optimize() loop here; the campaign stops itself when the space is spent

        return Grid(_grid(space), seed=seed)
    if name == "random":
        return S.RandomSampler(seed=seed)
    if name == "tpe":
        return S.TPESampler(seed=seed, n_startup_trials=min(10, max(2, space.size() // 20)),
                            multivariate=True)
    if name == "nsga2":
        return S.NSGAIISampler(seed=seed, population_size=min(50, max(4, space.size() // 10)))
    if name == "cmaes":
        _need("cmaes", "cmaes", "--strategy cmaes")
        return S.CmaEsSampler(seed=seed, warn_independent_sampling=False,
                              independent_sampler=S.RandomSampler(seed=seed))
    _need("torch", "torch and scipy", "--strategy gp", "'cudalab[gp]'")
    _need("scipy", "torch and scipy", "--strategy gp", "'cudalab[gp]'")
    return S.GPSampler(seed=seed, deterministic_objective=False, warn_independent_sampling=False)


def _need(module: str, packages: str, what: str, install: str = "") -> None:
    import importlib.util  # noqa: PLC0415

    if importlib.util.find_spec(module) is None:
        raise UsageError(f"{what} needs {packages}: pip install {install or packages}")


def strategy_for(name: str | None, objectives: Sequence[str]) -> str:
    """The strategy to use: the one named, else tpe (nsga2 for two objectives)."""
    return name or ("nsga2" if len(objectives) > 1 else "tpe")
