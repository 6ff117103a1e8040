"""Racing: the campaign's best configurations measured again, side by side, until the winner is decided.

One round runs every contender once, one after the other on the same GPU (A B C D E, the L2 flushed
before each sample as the protocol does), so a clock or thermal drift touches them all alike. After
each round the leader (lowest median over all its rounds' samples) is judged against every other by
the statistics ``cudalab compare`` uses (:func:`cudalab.records.compare.judge`: Mann-Whitney and a bootstrap
interval of the ratio of medians). The race ends when each other contender is decided ``slower`` or
the ``same`` within the tolerance, or after the last round (the undecided are then named ``unsure``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from cudalab.records import compare
from cudalab.records.results import PASSED

__all__ = ["Contender", "RaceResult", "race"]


@dataclass(frozen=True)
class Contender:
    """One configuration in the race: its key (``WT_BK=16 WT_STAGES=3``), point and request."""

    key: str
    point: dict[str, str]
    request: Any


@dataclass(frozen=True)
class RaceResult:
    """What the race decided.

    Attributes:
        winner: the leader's key ('' when no contender passed).
        verdicts: other key -> the verdict of it against the winner (``slower``, ``same``, ``unsure``...,
            with its ratio and 95% interval: > 1 is slower than the winner).
        samples: key -> every sample (ms) of every round.
        rounds: rounds run.
        dropped: key -> why it left the race (a round where it did not pass).
        runs: key -> its last round's run (rows, roofline: what the record saves).
        interrupted: Ctrl-C ended the race (then no winner: its last round is left out, nothing dropped in it).
    """

    winner: str
    verdicts: dict[str, compare.Verdict]
    samples: dict[str, list[float]]
    rounds: int
    dropped: dict[str, str] = field(default_factory=dict)
    runs: dict[str, Any] = field(default_factory=dict)
    interrupted: bool = False
    tolerance: float = 0.01
    calibrated: str = ""    # the noise floor's line when the tolerance is the GPU's calibrated floor

    @property
    def ties(self) -> list[str]:
        """The contenders the same as the winner within the tolerance."""
        return [k for k, v in self.verdicts.items() if v.verdict == compare.SAME]

    def runner_up(self) -> str:
        """The contender with the lowest median after the winner ('' when none)."""
        rest = sorted((float(np.median(s)), k) for k, s in self.samples.items() if k != self.winner and s
                      and k not in self.dropped)
        return rest[0][1] if rest else ""

    @property
    def decided(self) -> bool:
        """Every other contender is slower or the same as the winner."""
        return bool(self.winner) and all(v.verdict in (compare.SLOWER, compare.SAME) for v in self.verdicts.values())


def race(run: Callable[[Sequence[Any]], tuple[list[Any], bool]], contenders: Sequence[Contender], variant: str,
         tolerance: float = 0.01, max_rounds: int = 8, extra: Sequence[Contender] = (),
         on_round: Callable[[int, "RaceResult"], None] | None = None) -> RaceResult:
    """Race ``contenders`` (each round also measures ``extra``, the default configuration when it is not a
    contender, which never wins: the campaign measures a default in its space as its first trial, so it
    can be a contender).

    Args:
        run: runs a list of requests in order and returns (their runs, interrupted): :meth:`Runs.run`.
        variant: the variant whose row is timed.
        tolerance: a difference below this (0.01: 1%) is a tie.
        max_rounds: at most this many rounds.
        on_round: called after each round with the standing result.
    """
    everyone = list(contenders) + [c for c in extra if c.key not in {x.key for x in contenders}]
    racing = {c.key for c in contenders}
    samples: dict[str, list[float]] = {c.key: [] for c in everyone}
    dropped: dict[str, str] = {}
    last: dict[str, Any] = {}
    result = RaceResult("", {}, samples, 0)
    for r in range(1, max_rounds + 1):
        live = [c for c in everyone if c.key not in dropped]
        runs, interrupted = run([c.request for c in live])
        if interrupted:
            # The interrupt killed the worker mid-round: a row it cut short is not the contender's failure, and a
            # round not every contender finished pairs nothing. The race ends undecided: no winner is named.
            result = RaceResult("", {}, samples, r - 1, dict(dropped), dict(last), True, tolerance)
            if on_round is not None:
                on_round(r, result)
            break
        for c, fr in zip(live, runs):
            row = next((x for x in fr.results if x.variant == variant), None)
            if row is None:
                continue  # not reached (an interrupt): no sample this round
            last[c.key] = fr
            if row.status == PASSED and row.stats is not None:
                samples[c.key].extend(row.stats.samples or (row.stats.median,))
            elif c.key in racing:
                dropped[c.key] = f"{row.status.value} in round {r}: {row.reason}"
        result = _standing(samples, racing - set(dropped), tolerance, r, dropped, last, False)
        if on_round is not None:
            on_round(r, result)
        if result.decided and r >= 2:
            break
    return result


def _standing(samples: dict[str, list[float]], racing: set[str], tolerance: float, rounds: int,
              dropped: dict[str, str], runs: dict[str, Any], interrupted: bool) -> RaceResult:
    alive = [k for k in racing if samples[k]]
    if not alive:
        return RaceResult("", {}, samples, rounds, dict(dropped), dict(runs), interrupted, tolerance)
    winner = min(alive, key=lambda k: (float(np.median(samples[k])), k))
    verdicts = {k: compare.judge(samples[winner], samples[k], min_effect=tolerance) for k in alive if k != winner}
    return RaceResult(winner, verdicts, samples, rounds, dict(dropped), dict(runs), interrupted, tolerance)
