"""The one door from a tuning campaign into cudalab's run machinery (everything tune runs goes here).

A trial is an ordinary family run point: a :class:`~cudalab.runner.RunRequest`, built, verified and
timed by a GPU worker under the session's watchdog (a crash or a hang is one ``failed`` or
``timeout`` row, and a fresh worker goes on). One session lives for the whole campaign: its workers
open their GPU once and stay open between trials (no process or CUDA context per trial).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from cudalab import runner
from cudalab.progress import Observer
from cudalab.results import Result

__all__ = ["Runs", "precheck"]


def precheck(req: runner.RunRequest) -> None:
    """Refuse on the CPU what the request's launch rules refuse (no build, no GPU).

    Raises:
        UsageError, LaunchConfigError: the reason.
    """
    runner.precheck(req)


class _Rows(Observer):
    """Passes every row to a callback as it arrives."""

    def __init__(self, on_row: Callable[[Result], None]):
        self.on_row = on_row

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
        from cudalab.session.drive import Session  # noqa: PLC0415

        self.session = Session(list(devices), timeout=timeout, energy=energy)
        self.session.keep_workers = True

    def start(self) -> "Runs":
        """Start the workers (they open their GPUs while the campaign plans)."""
        self.session.start()
        return self

    def run(self, reqs: Sequence[runner.RunRequest],
            on_row: Callable[[Result], None] | None = None) -> tuple[list[runner.FamilyRun], bool]:
        """Run these points in order (one GPU: one after the other); returns their runs and whether an
        interrupt (Ctrl-C, SIGTERM) cut them short. The workers stay up for the next call; after an
        interrupt the next call starts fresh ones.

        Raises:
            WorkerError: no worker could open its GPU.
        """
        s = self.session
        s.observer = _Rows(on_row or (lambda r: None))
        runs, incomplete = s.run(list(reqs), 0)
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
