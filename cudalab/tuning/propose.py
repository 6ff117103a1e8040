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
refused, as before.

Every strategy's first trial is the family's own configuration (:attr:`Proposer.first`) when it is a valid
point: a walk starts with it (and does not come to it again), a model-based campaign enqueues it. A tuner
that samples around the default may never measure it, and then names a "winner" slower than what the user
already runs (seen on an H200: random's 30 trials of the matmul warptile missed its default, 2.817 ms, and
named one of 2.867 ms); measured first, the default is an ordinary trial that can win, and a model learns
from it. Nothing here runs a kernel.
"""

from __future__ import annotations

import random
from typing import Iterable, Iterator, Mapping

import numpy as np

from cudalab.tuning.result import point_key
from cudalab.tuning.space import Space

__all__ = ["WALKS", "Proposer"]

#: Points in a row a lazy walk (a space too large to list) may find refused before it ends: its time is bounded.
LAZY_MISSES = 200_000
#: Strategies that walk the valid points in an order of their own.
WALKS = ("grid", "random")


class Proposer:
    """The valid points of a space, walked (grid, random) or used to repair a proposal (the others).

    Args:
        space: the campaign's space.
        strategy: the ``--strategy`` name.
        seed: the walk's seed (random).
        valid: the valid points in the space's order (None: too many to list; nothing is walked or repaired).
        first: the family's own configuration (:attr:`first` when it is a valid point, else ignored).
    """

    def __init__(self, space: Space, strategy: str, seed: int | None, valid: list[dict[str, str]] | None,
                 first: Mapping[str, str] | None = None):
        self.space = space
        self.valid = valid
        self.keys = {point_key(p) for p in valid} if valid is not None else None
        self.first = self._valid_first(first)
        self.walk: list[dict[str, str]] | None = None
        self._iter: Iterator[dict[str, str]] = iter(())
        if valid is None and strategy == "grid":  # too many to list: walked in the space's order as asked
            self.walk = []
            self._iter = self._lazy_grid()
        elif valid is not None and strategy in WALKS:
            self.walk = list(valid)
            if strategy == "random":
                random.Random(seed).shuffle(self.walk)  # shuffled before the default moves: the same order after it
            if self.first is not None:  # the default first, and not again where the walk came to it
                key = point_key(self.first)
                self.walk = [self.first, *(p for p in self.walk if point_key(p) != key)]
            self._iter = iter(self.walk)
        self._at = 0
        self._free = [d for d in space.dims if len(d.values) > 1]
        # each value's scaled index, once: list.index per point made the grid quadratic in a dimension's length
        # (100,000 block sizes hung before the first trial)
        self._scaled = [{v: i / (len(d.values) - 1) for i, v in enumerate(d.values)} for d in self._free]
        if valid:
            self._grid = np.array([self._coords(p) for p in valid])

    def _valid_first(self, point: Mapping[str, str] | None) -> dict[str, str] | None:
        """``point`` in the space's order when it is one of the valid points (or, none listed, a point of the
        space that meets every constraint), else None."""
        if point is None or any(point.get(d.name) not in d.values for d in self.space.dims):
            return None
        pt = {d.name: str(point[d.name]) for d in self.space.dims}
        ok = point_key(pt) in self.keys if self.keys is not None else not self.space.allows(pt)
        return pt if ok else None

    @property
    def size(self) -> int:
        """The points a campaign can measure: the valid ones, else the whole cross product."""
        return len(self.valid) if self.valid is not None else self.space.size()

    def _coords(self, point: Mapping[str, str]) -> list[float]:
        return [scaled[point[d.name]] for d, scaled in zip(self._free, self._scaled)]

    def next_walk(self, skip: Iterable[str]) -> dict[str, str] | None:
        """The walk's next point whose key is not in ``skip`` (measured or in flight); None when spent."""
        skip = set(skip)
        assert self.walk is not None
        for point in self._iter:
            self._at += 1
            if point_key(point) not in skip:
                return point
        return None

    def _lazy_grid(self) -> Iterator[dict[str, str]]:
        """A space too large to list, walked: the default first, then every valid point in the space's order
        (memory and time before the first trial independent of the space's size)."""
        first = point_key(self.first) if self.first is not None else None
        if self.first is not None:
            yield dict(self.first)
        misses = 0
        for point in self.space.points():
            if point_key(point) != first and not self.space.allows(point):
                misses = 0
                yield point
            else:
                misses += 1
                if misses >= LAZY_MISSES:  # a sparse space's valid points may all be behind it: the walk ends
                    return

    def opening(self, skip: Iterable[str]) -> dict[str, str] | None:
        """What a model-based strategy enqueues before its first ask: :attr:`first`, unless its key is in
        ``skip`` (measured, or in flight); None for a walk, which starts with it itself."""
        if self.walk is not None or self.first is None or point_key(self.first) in set(skip):
            return None
        return dict(self.first)

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
