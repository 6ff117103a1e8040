"""Replaying strategies against a finished campaign's measurements, without a GPU.

Each strategy runs as in a campaign, but a trial's value is looked up in the campaign's trials (an
exhaustive ``--strategy grid`` campaign knows every point; a point it never measured counts as
infeasible). After each evaluation (repeats and refused points cost nothing, as in a campaign) the
best time so far is compared with the best of the campaign: ``fraction`` 1.0 is the best found.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

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
    """A finished campaign's space, its measurements (point key -> time, None: infeasible) and its attributes.

    Raises:
        UsageError: the storage cannot be opened, holds no campaign, or several without ``name``.
    """
    optuna = S.quiet_optuna()
    storage = C._storage(url)
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
    return space, table, attrs


def replay(space: Space, table: dict[str, float | None], strategy: str, seeds: int, trials: int) -> Replay:
    """Run ``strategy`` ``seeds`` times against ``table`` for ``trials`` evaluations each.

    Raises:
        UsageError: a bad strategy, seed count or trial count.
    """
    if seeds < 1 or trials < 1:
        raise UsageError("--seeds and --trials must be at least 1")
    optuna = S.quiet_optuna()
    best = min(v for v in table.values() if v is not None)
    dists = S.distributions(space)
    curves = np.zeros((seeds, trials))
    # The campaign's valid points are the ones it measured (a ground truth measured every one).
    valid = [pt for pt in space.points() if point_key(pt) in table] if space.size() <= ENUMERATE_LIMIT else None
    for seed in range(seeds):
        prop = Proposer(space, strategy, seed, valid)  # walked or repaired as in a campaign
        study = optuna.create_study(sampler=S.sampler("random" if prop.walk is not None else strategy, seed, space))
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
