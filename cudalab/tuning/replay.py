"""Replaying strategies against a finished campaign's measurements, without a GPU.

Each strategy runs as in a campaign, but a trial's value is looked up in the campaign's trials (an
exhaustive ``--strategy grid`` campaign knows every point; a point it never measured counts as
infeasible). After each evaluation (repeats and refused points cost nothing, as in a campaign) the
best time so far is compared with the best of the campaign: ``fraction`` 1.0 is the best found.

As in a live campaign, each replayed strategy's first evaluation is the family's own configuration when the
campaign measured it (a valid point: the campaign measured nothing the constraints refuse): a walk starts
with it, a model-based strategy has it enqueued before its first ask and learns from it. The default comes
from the campaign (written since campaigns measure it first), else from the family's catalog entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from cudalab.errors import UsageError
from cudalab.tuning import campaign as C
from cudalab.tuning import strategy as S
from cudalab.tuning.result import point_key
from cudalab.tuning.propose import Proposer
from cudalab.tuning.space import ENUMERATE_LIMIT, Dim, Space

__all__ = ["Replay", "load_campaign", "replay", "checkpoints"]


@dataclass(frozen=True)
class Replay:
    """The replay of one strategy: ``curves[seed][i]`` is the fraction of the best reached after ``i + 1``
    evaluations (0 before any feasible one)."""

    strategy: str
    curves: np.ndarray

    def at(self, n: int) -> tuple[float, int]:
        """After ``n`` evaluations: (the median fraction over seeds, seeds at >= 95% of the best)."""
        col = self.curves[:, min(n, self.curves.shape[1]) - 1]
        return float(np.median(col)), int((col >= 0.95).sum())


def load_campaign(url: str, name: str | None = None) -> tuple[Space, dict[str, float | None], dict[str, Any]]:
    """A finished campaign's space, its measurements (point key -> time, None: infeasible) and its attributes,
    ``default`` among them: the family's own configuration as a point (None when it cannot be known).

    Raises:
        UsageError: the storage cannot be opened, holds no campaign, or several without ``name``.
    """
    optuna = S.quiet_optuna()
    storage = C._storage(url, read_only=True)  # a replay only reads: it never creates nor changes the file
    names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
    if name is None:
        if len(names) != 1:
            raise UsageError(f"{url} holds {len(names)} campaigns ({', '.join(names) or 'none'}): name one with --name")
        name = names[0]
    if name not in names:
        raise UsageError(f"{url} holds no campaign {name!r} (it holds: {', '.join(names) or 'none'})")
    study = optuna.load_study(study_name=name, storage=storage)
    attrs = dict(study.user_attrs)
    if "space" not in attrs:
        raise UsageError(f"{url}: campaign {name!r} was not written by cudalab tune")
    desc = json.loads(attrs["space"])
    space = Space(dims=tuple(Dim(d["name"], d["kind"], tuple(d["values"]), d["pow2"]) for d in desc["dims"]),
                  require=())
    table: dict[str, float | None] = {}
    for m in C.measured(study):
        if m.status in ("interrupted", "refused"):  # refused points cost a campaign nothing: a replay too
            continue
        table[point_key(m.point)] = m.values[0] if m.values is not None else None
    if not any(v is not None for v in table.values()):
        raise UsageError(f"{url}: campaign {name!r} has no passed trial to replay against")
    attrs["default"] = _default_of(attrs, space)
    return space, table, attrs


def _default_of(attrs: dict[str, Any], space: Space) -> dict[str, str] | None:
    """The campaign's default configuration: as it wrote it, else the family's catalog entry's (a campaign
    written before it recorded its default); None when neither can say."""
    if isinstance(attrs.get("default"), str):
        try:
            got = json.loads(attrs["default"])
        except ValueError:
            got = None
        if isinstance(got, dict):
            return {str(k): str(v) for k, v in got.items()}
    from cudalab import catalog  # noqa: PLC0415
    from cudalab.errors import CudalabError  # noqa: PLC0415
    from cudalab.families import load  # noqa: PLC0415
    from cudalab.tuning.spaces import default_point  # noqa: PLC0415

    try:
        spec = catalog.family(str(attrs.get("family")))
        return default_point(spec, load(spec.module), spec.variant(str(attrs.get("variant"))), space)
    except (CudalabError, KeyError):  # a family no longer there (or renamed): the replay starts as the strategy does
        return None


#: The most seeds a replay takes (each seed is a study of its own: a median over more moves no figure).
MAX_SEEDS = 10_000


def replay(space: Space, table: dict[str, float | None], strategy: str, seeds: int, trials: int,
           first: Mapping[str, str] | None = None) -> Replay:
    """Run ``strategy`` ``seeds`` times against ``table`` for ``trials`` evaluations each.

    Args:
        first: the family's own configuration (``load_campaign``'s ``default``): the first evaluation of
            each seed when ``table`` holds it, as in a live campaign.

    Raises:
        UsageError: a bad strategy, seed count or trial count.
    """
    if seeds < 1 or trials < 1:
        raise UsageError("--seeds and --trials must be at least 1")
    if seeds > MAX_SEEDS:
        raise UsageError(f"--seeds {seeds}: a replay takes at most {MAX_SEEDS:,} seeds a strategy")
    trials = min(trials, len(table))  # no configuration is asked twice: past those measured nothing changes
    optuna = S.quiet_optuna()
    best = min(v for v in table.values() if v is not None)
    dists = S.distributions(space)
    curves = np.zeros((seeds, trials))
    # The campaign's valid points are the ones it measured (a ground truth measured every one).
    valid = [pt for pt in space.points() if point_key(pt) in table] if space.size() <= ENUMERATE_LIMIT else None
    if first is not None:  # the default in the space's order, and only when the campaign measured it
        first = {d.name: str(first.get(d.name)) for d in space.dims}
        first = first if point_key(first) in table else None
    for seed in range(seeds):
        prop = Proposer(space, strategy, seed, valid, first=first)  # walked or repaired as in a campaign
        study = optuna.create_study(sampler=S.sampler("random" if prop.walk is not None else strategy, seed, space))
        opening = prop.opening(())
        if opening is not None:  # a model-based strategy's first trial: the default, as in a campaign
            study.enqueue_trial(S.encode(space, opening))
        seen: set[str] = set()
        done, so_far, stale = 0, None, 0
        while done < trials and stale < 500 and len(seen) < prop.size:
            if prop.walk is not None:
                nxt = prop.next_walk(seen)
                if nxt is None:
                    break
                study.enqueue_trial(S.encode(space, nxt))
            trial = study.ask(dists)
            point = prop.repair(S.decode(space, trial.params))
            key = point_key(point)
            value = table.get(key)
            if key in seen or key not in table:
                stale += 1
                study.tell(trial, value) if value is not None else study.tell(trial, state=optuna.trial.TrialState.FAIL)
                seen.add(key)
                if prop.walk is None and key in table:  # a repeat: the nearest point not yet seen is asked next
                    nxt = prop.nearest_unseen(point, seen)
                    if nxt is not None:
                        study.enqueue_trial(S.encode(space, nxt))
                continue
            stale = 0
            seen.add(key)
            if value is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, value)
                so_far = value if so_far is None else min(so_far, value)
            curves[seed, done] = best / so_far if so_far else 0.0
            done += 1
        if done < trials:  # the strategy ran out of new points: its last standing holds
            curves[seed, done:] = curves[seed, done - 1] if done else 0.0
    return Replay(strategy, curves)


def checkpoints(trials: int, size: int) -> list[int]:
    """Numbers of evaluations to report: 1, 2, 5, 10, 20, 50... up to ``trials``, and 10% of the space."""
    out = {trials}
    k = 1
    while k < trials:
        out.update(x for x in (k, 2 * k, 5 * k) if x < trials)
        k *= 10
    if 0 < size // 10 <= trials:
        out.add(max(1, size // 10))
    return sorted(out)


def table_rows(results: Sequence[Replay], marks: Sequence[int]) -> list[tuple[str, ...]]:
    """One row per strategy: at each mark, the median fraction and how many seeds reached 95%."""
    rows = []
    for r in results:
        cells = []
        for n in marks:
            med, hits = r.at(n)
            cells.append(f"{med:.1%} ({hits}/{r.curves.shape[0]})")
        rows.append((r.strategy, *cells))
    return rows
