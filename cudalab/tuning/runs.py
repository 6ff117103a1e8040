"""The one door from a tuning campaign into cudalab's run machinery (everything tune runs goes here).

A trial is an ordinary family run point: a :class:`~cudalab.plan.RunRequest`, planned once
(:class:`~cudalab.plan.Plan`), then built, verified and timed by a GPU worker under the session's watchdog (a crash or a hang is one ``failed`` or
``timeout`` row, and a fresh worker goes on). One session lives for the whole campaign: its workers
open their GPU once and stay open between trials (no process or CUDA context per trial).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from cudalab import plan as planning
from cudalab.plan import Plan, RunRequest
from cudalab.progress import Observer
from cudalab.records.results import Result
from cudalab.session.drive import Session
from cudalab.session.point import Point

__all__ = ["Runs", "precheck"]


def precheck(req: RunRequest) -> Plan:
    """Plan a trial's point: refuse on the CPU what its launch rules refuse (no build, no GPU).

    Raises:
        UsageError, LaunchConfigError: the reason.
    """
    return planning.precheck(req)


class _Rows(Observer):
    """Passes every row to a callback as it arrives."""

    def __init__(self) -> None:
        self.on_row: Callable[[Result], None] = lambda r: None  # this batch's (set by :meth:`Runs.run`)

    def result(self, r: Result) -> None:
        self.on_row(r)


class Runs:
    """A long-lived session of GPU workers for one campaign.

    Args:
        devices: GPU indices (one worker each).
        timeout: the watchdog's limit (None: derived from the rows).
        energy: the workers read NVML's energy counter (``--objective energy``).
    """

    def __init__(self, devices: Sequence[int] = (0,), timeout: float | None = None, energy: bool = False):
        self._rows = _Rows()
        self.session = Session(list(devices), observer=self._rows, timeout=timeout, energy=energy, keep_workers=True)
        self._plans: dict[RunRequest, Plan] = {}  # a raced point runs again; it is not planned again

    def start(self) -> "Runs":
        """Start the workers (they open their GPUs while the campaign plans)."""
        self.session.start()
        return self

    def plan(self, point: RunRequest | Plan) -> Plan:
        """The point's one plan (a request is planned the first time it is run).

        Raises:
            UsageError, LaunchConfigError: the request's rules refuse it.
        """
        if isinstance(point, Plan):
            self._plans.setdefault(point.request, point)
            return point
        if point not in self._plans:
            self._plans[point] = precheck(point)
        return self._plans[point]

    def run(self, points: Sequence[RunRequest | Plan],
            on_row: Callable[[Result], None] | None = None) -> tuple[list[Point], bool]:
        """Run these points in order (one GPU: one after the other); returns them with their rows and whether
        an interrupt (Ctrl-C, SIGTERM) cut them short. The workers stay up for the next call; after an
        interrupt the next call starts fresh ones.

        Raises:
            WorkerError: no worker could open its GPU.
        """
        s = self.session
        self._rows.on_row = on_row or (lambda r: None)
        runs, incomplete = s.run([self.plan(p) for p in points], 0)
        interrupted = s.stopping.is_set()
        if interrupted:  # the session killed its workers; the campaign may still race what it has
            s.stopping.clear()
        return runs, interrupted

    def arch(self) -> str | None:
        """The first GPU's architecture (``sm_90``) once its worker has opened it, else None."""
        for slot in self.session.slots:
            cc = str((slot.info or {}).get("compute_capability", ""))
            if cc:
                return "sm_" + cc.replace(".", "")
        return None

    def info(self) -> dict[str, Any]:
        """The GPU's facts (a run record's ``device``)."""
        return self.session.info()

    def close(self) -> None:
        """End the workers politely."""
        self.session.close()

    def kill(self) -> None:
        """End the workers now."""
        self.session.kill()
