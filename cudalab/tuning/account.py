"""Where a campaign's wall time goes: the trials in the GPU worker, the GPU waiting for a build the pool had
not finished, the search (the strategy's proposals, planning, the study's storage) and the race.

Measured in the parent around each step of the loop, so the buckets add up to the campaign's wall time less
what nothing here times (the workers' start, the cluster's scheduling). With the GPU busy % (NVML's
utilization while the trials ran) it says how much of a campaign was GPU work and what the rest was.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["TimeAccount", "BUCKETS", "describe"]

#: The buckets, in the order the closing line names them.
BUCKETS = ("trials", "builds", "search", "race")

_WORDS = {"trials": "trials in the worker", "builds": "waiting for builds", "search": "search and storage",
          "race": "race"}


class TimeAccount:
    """Seconds a bucket, added up as the campaign runs (one thread: the campaign's loop)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.started = clock()
        self.seconds = {b: 0.0 for b in BUCKETS}
        #: The campaign's own seconds in its GPU workers, summed (several GPUs: more than the wall): its trials' and
        #: its library row's (GPU work the campaign does before its race); not a bucket.
        self.in_workers = 0.0

    @contextmanager
    def timed(self, bucket: str) -> Iterator[None]:
        """Add the time the ``with`` body takes to ``bucket``."""
        t0 = self._clock()
        try:
            yield
        finally:
            self.seconds[bucket] += self._clock() - t0

    def to_dict(self) -> dict[str, float]:
        """The buckets, ``wall`` (seconds since the account started) and ``in_workers``, rounded to ms."""
        return {**{b: round(s, 3) for b, s in self.seconds.items()}, "wall": round(self._clock() - self.started, 3),
                "in_workers": round(self.in_workers, 3)}


def describe(account: dict[str, float], gpu_busy_pct: float | None = None) -> str:
    """``where the time went: trials in the worker 30.1 s (GPU busy 62%), waiting for builds 2.0 s, ...``."""
    parts = []
    for b in BUCKETS:
        s = account.get(b) or 0.0
        if s < 0.05 and b != "trials":
            continue
        busy = f" (GPU busy {gpu_busy_pct:.0f}%)" if b == "trials" and gpu_busy_pct is not None else ""
        parts.append(f"{_WORDS[b]} {s:.1f} s{busy}")
    wall = account.get("wall")
    return f"where the time went{f' ({wall:.1f} s)' if wall else ''}: " + ", ".join(parts)
