"""Where a strategy's next point comes from on a constrained space.

Most points of a tuning space's cross product break a constraint: 282 of the matmul warptile's 8,748 meet
them. Asking the cross product, a strategy spends most of its asks on refused points, and a model-based
one goes on asking them, since Optuna's samplers learn nothing from a failed trial (seen on an H100: a
40-trial TPE campaign of the warptile had not finished after 5 minutes). So, when the valid points can be
listed:

* ``grid`` and ``random`` walk the valid points themselves: every one in the space's order, or every one
  in a seeded random order (sampling without replacement, as kernel_tuner's random strategy does);
* the model-based strategies (tpe, gp, cmaes, nsga2) keep the space's own dimensions, so neighbours stay
  neighbours, and a proposal that breaks a constraint is *repaired*: replaced by the nearest valid point
  (each dimension's value index scaled to [0, 1], summed distances; ties go to the first in the space's
  order), and the trial is told that point's value. The model learns the repaired point's value at the
  proposed coordinates: the usual repair of constrained evolutionary search. A proposal of a point already
  measured is told its known value, and the nearest valid point not yet measured runs next (at its own
  coordinates): a small space's model-based campaign otherwise spends most of its asks on repeats.

A space too large to list keeps asking the cross product, and a proposal that breaks a constraint is
refused, as before. Nothing here runs a kernel.
"""

from __future__ import annotations

import random
from typing import Iterable, Mapping

import numpy as np

from cudalab.tuning.result import point_key
from cudalab.tuning.space import Space

__all__ = ["WALKS", "Proposer"]

#: Strategies that walk the valid points in an order of their own.
WALKS = ("grid", "random")


class Proposer:
    """The valid points of a space, walked (grid, random) or used to repair a proposal (the others).

    Args:
        space: the campaign's space.
        strategy: the ``--strategy`` name.
        seed: the walk's seed (random).
        valid: the valid points in the space's order (None: too many to list; nothing is walked or repaired).
    """

    def __init__(self, space: Space, strategy: str, seed: int | None, valid: list[dict[str, str]] | None):
        self.space = space
        self.valid = valid
        self.keys = {point_key(p) for p in valid} if valid is not None else None
        self.walk: list[dict[str, str]] | None = None
        if valid is not None and strategy in WALKS:
            self.walk = list(valid)
            if strategy == "random":
                random.Random(seed).shuffle(self.walk)
        self._at = 0
        self._free = [d for d in space.dims if len(d.values) > 1]
        if valid:
            self._grid = np.array([self._coords(p) for p in valid])

    @property
    def size(self) -> int:
        """The points a campaign can measure: the valid ones, else the whole cross product."""
        return len(self.valid) if self.valid is not None else self.space.size()

    def _coords(self, point: Mapping[str, str]) -> list[float]:
        return [d.values.index(point[d.name]) / (len(d.values) - 1) for d in self._free]

    def next_walk(self, skip: Iterable[str]) -> dict[str, str] | None:
        """The walk's next point whose key is not in ``skip`` (measured or in flight); None when spent."""
        skip = set(skip)
        assert self.walk is not None
        while self._at < len(self.walk):
            point = self.walk[self._at]
            self._at += 1
            if point_key(point) not in skip:
                return point
        return None

    def nearest_unseen(self, point: dict[str, str], skip: Iterable[str]) -> dict[str, str] | None:
        """The valid point nearest ``point`` whose key is not in ``skip`` (None: every one is, or none listed).

        A model-based strategy often proposes a point it has measured (a repeat: the same answer, no GPU work,
        but an ask and a tell on the driver's clock); the campaign then runs this neighbour next, at its own
        coordinates, instead of asking again and again."""
        if not self.valid:
            return None
        skip = set(skip)
        # rounded, so that equal distances compare equal (1 - 2/3 and 1/3 differ in the last bit)
        dist = np.round(np.abs(self._grid - np.array(self._coords(point))).sum(axis=1), 9)
        for i in np.argsort(dist, kind="stable"):  # stable: equals in the space's order
            if point_key(self.valid[int(i)]) not in skip:
                return dict(self.valid[int(i)])
        return None

    def repair(self, point: dict[str, str]) -> dict[str, str]:
        """``point`` itself when it is valid (or nothing can be listed), else the nearest valid point."""
        if self.keys is None or point_key(point) in self.keys:
            return point
        return self.nearest_unseen(point, ()) or point
