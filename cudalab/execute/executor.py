"""The one interface between a run and where its points run.

A run (a sweep, ``cudalab truth``, ``watch``) plans every point once (:func:`cudalab.plan.precheck`) and hands
the plans to an :class:`Executor`; the executor gives back each point's rows as they come (through the
``observer`` and ``on_change`` it was made with) and, at the end, the points with their rows. Two engines
implement it: the local pool of isolated GPU workers (:class:`cudalab.execute.local.engine.LocalPool`) and a Dask
cluster (:class:`cudalab.execute.dask.engine.DaskPool`). :func:`cudalab.execute.open_executor` chooses between them,
once, where the command starts its run; nothing else asks which engine runs.
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
