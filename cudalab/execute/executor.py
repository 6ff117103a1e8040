"""The one interface between a run and where its points run.

A run (a sweep, ``cudalab truth``, ``watch``) plans every point once (:func:`cudalab.plan.precheck`) and hands
the plans to an :class:`Executor`; the executor gives back each point's rows as they come (through the
``observer`` and ``on_change`` it was made with) and, at the end, the points with their rows. Two engines
implement it: the local pool of isolated GPU workers (:class:`cudalab.execute.local.engine.LocalPool`) and a Dask
cluster (:class:`cudalab.execute.dask.engine.DaskPool`). :func:`cudalab.execute.open_executor` chooses between them,
once, where the command starts its run (:func:`cudalab.execute.open_campaign` for ``tune``); nothing else asks which
engine runs.

A tuning campaign uses the same executor a task at a time (:meth:`Executor.send`, :meth:`Executor.next_done`): a
few planned points run back to back on one GPU worker, each task handed back as it finishes, the next trials'
kernels built ahead meanwhile (:meth:`Executor.prebuild`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Sequence

from cudalab.plan import Plan

if TYPE_CHECKING:
    from cudalab.execute.point import Point

__all__ = ["Executor"]


class Executor(ABC):
    """Where planned points run: submit them, their rows come back as they finish, cancel, close.

    The order: :meth:`start` (optional, early: the GPUs open while the parent plans), :meth:`submit` once,
    :meth:`wait`, then :meth:`close` (or :meth:`cancel` after an interrupt or a failed check), then :meth:`info`.

    A campaign instead: :meth:`start`, :meth:`ready`, then tasks (:meth:`send`, :meth:`next_done`, builds ahead
    with :meth:`prebuild`), then :meth:`close` or :meth:`cancel`; :meth:`info` may be asked at any time.
    """

    @abstractmethod
    def start(self) -> None:
        """Begin opening the GPUs now, if this engine can (the parent plans meanwhile)."""

    @abstractmethod
    def submit(self, plans: Sequence[Plan], total: int) -> None:
        """Hand over the planned points, in order (``total``: their rows in all, for the progress).

        Raises:
            CudalabError: the engine cannot run them (no GPU could be opened, a cluster that does not answer).
        """

    @abstractmethod
    def wait(self) -> tuple[list[Point], bool]:
        """Wait for the submitted points: (the points with their rows in the plans' order, incomplete). Each row
        reaches the observer and ``on_change`` as it comes. An interrupt (KeyboardInterrupt) cancels what is in
        flight and returns what finished, incomplete."""

    @abstractmethod
    def cancel(self) -> None:
        """Stop now: nothing more runs, the GPUs are let go (what finished stays)."""

    @abstractmethod
    def close(self) -> None:
        """End politely once the points are done (a worker's telemetry comes back)."""

    @abstractmethod
    def info(self) -> dict[str, Any]:
        """The facts of the GPU(s) that ran, for the record (after :meth:`close` or :meth:`cancel`)."""

    # --- a campaign's tasks: points sent a few at a time, each task's points back as it finishes -----------------
    # A tuning campaign asks its strategy for the next trials while others run: it sends each trial (or a few of a
    # walk's) as one task, builds the next ones' kernels ahead, and records each task the moment it comes back.

    @abstractmethod
    def ready(self, one_model: bool = False) -> None:
        """Open the GPUs now and wait until they can run (this host's first worker opened its GPU; a cluster
        connected and checked).

        Args:
            one_model: refuse GPUs of several models (a campaign ranks configurations on one model).

        Raises:
            CudalabError: no GPU could be opened, a cluster that does not answer or mixes GPU models.
        """

    @abstractmethod
    def slots(self) -> int:
        """How many tasks run at once (the GPU workers); a campaign keeps two in flight for each."""

    @abstractmethod
    def send(self, plans: Sequence[Plan]) -> Any:
        """Run ``plans`` as one task, back to back on one GPU worker; its handle (:meth:`next_done` gives it back).
        A worker stays open across tasks; the watchdog, the timeout and a fresh worker after a crash are as for
        :meth:`submit`'s points."""

    @abstractmethod
    def next_done(self, timeout: float | None = None) -> tuple[Any, list[Point] | BaseException] | None:
        """The next task sent to finish: its handle and its points with their rows (fewer than it was sent when an
        interrupt cut it short), or the exception the engine gave up on it with (one task's, the campaign goes on);
        None when ``timeout`` seconds passed first (None: wait for one).

        Raises:
            CudalabError: the engine itself is gone (no GPU could be opened; ClusterLost: the scheduler went away).
            KeyboardInterrupt: while it waited (the caller cancels what is in flight: :meth:`cancel_tasks`).
        """

    @abstractmethod
    def cancel_tasks(self, handles: Sequence[Any]) -> None:
        """Stop these tasks now (what they finished is lost; the next task sent starts on fresh workers)."""

    @abstractmethod
    def ahead(self) -> int:
        """How many tasks' builds may run ahead of the GPUs at once (0: none)."""

    @abstractmethod
    def prebuild(self, plan: Plan) -> None:
        """Start building ``plan``'s kernels now, ahead of its task, where its GPU worker will look for them (the
        build cache); nothing when this engine builds nothing ahead. Never raises: a build that fails is left to
        the task, whose row reports it."""

    @abstractmethod
    def built(self, plan: Plan) -> bool:
        """Whether ``plan``'s build ahead has finished (True where none was started: its task builds for itself)."""

    @abstractmethod
    def builds_queued(self) -> int:
        """Builds ahead not finished yet."""

    @abstractmethod
    def stop_builds(self) -> None:
        """Drop the builds ahead not started (nothing more will be sent for them)."""

    @abstractmethod
    def in_workers(self) -> float:
        """The finished tasks' seconds in their GPU workers, summed (several GPUs: more than the wall)."""

    @abstractmethod
    def waited_builds(self) -> float:
        """The seconds tasks waited for their builds ahead before they ran, summed (0 where no task waits)."""

    @abstractmethod
    def batch(self, trial_s: float) -> int:
        """How many trials of ``trial_s`` seconds in the worker one task should take (a task's own cost, where it
        has one, spread over several)."""

    @abstractmethod
    def describe(self) -> str:
        """Where the tasks run, in one line ('' for this host's GPU: nothing to say)."""

    @abstractmethod
    def busy_meter(self) -> Any:
        """A started :class:`~cudalab.instruments.busy.BusyMeter` of the GPU the tasks run on, or None where it
        cannot be read from here (a cluster's GPUs are on other hosts)."""
