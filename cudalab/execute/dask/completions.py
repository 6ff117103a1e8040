"""A cluster's futures handed back as they complete, their results fetched on Dask's callback thread
(:class:`Completions`, used by :class:`cudalab.execute.dask.cluster.Cluster` and tune's cluster runs)."""

from __future__ import annotations

import queue
import time
from typing import Any, Iterable

__all__ = ["Completions"]

#: How often the driver wakes while it waits (Ctrl-C, a lost scheduler): seconds.
TICK_S = 0.2


class Completions:
    """Futures of a cluster, handed back as they complete, with their results already fetched.

    Each future's done-callback fetches its result on Dask's callback thread and queues it, so the driver's
    thread never waits on a round trip to a worker (it asks the strategy and records while results come in),
    and waiting is one ``queue.get``, not a poll of the scheduler per trial.
    """

    def __init__(self, cluster: Any):
        self.cluster = cluster
        self.pending: set[Any] = set()
        self._done: queue.Queue = queue.Queue()

    def add(self, future: Any) -> None:
        """Watch ``future`` (one result each, whichever order they complete in)."""
        self.pending.add(future)
        future.add_done_callback(self._fetch)

    def _fetch(self, f: Any) -> None:
        """On Dask's callback thread: the future's result, its exception, or that it was cancelled."""
        from concurrent.futures import CancelledError  # noqa: PLC0415

        from distributed.client import FuturesCancelledError  # noqa: PLC0415

        if f.status == "cancelled":
            self._done.put((f, _CANCELLED))
        elif f.status == "error":  # Dask gave up on it (its workers kept dying, or it raised)
            self._done.put((f, f.exception()))
        else:  # finished, or "lost" (its result went with a worker): result() waits for Dask to compute it again
            try:
                self._done.put((f, f.result()))
            except (FuturesCancelledError, CancelledError):
                self._done.put((f, _CANCELLED))
            except Exception as exc:  # noqa: BLE001  (this thread must not die: the driver waits on it)
                if self.cluster.client.status not in ("running", "newly-created"):
                    self._done.put((f, _CANCELLED))  # the scheduler went away while it fetched
                elif f.status in ("pending", "lost"):
                    f.add_done_callback(self._fetch)  # Dask computes it again: fetch it when it is done
                else:
                    self._done.put((f, exc))  # a result that cannot be fetched: one failed trial, with why

    def next(self, timeout: float | None = None) -> tuple[Any, dict[str, Any] | BaseException] | None:
        """The next future to complete and its result (or the exception it ended with); None when ``timeout``
        seconds passed first (None: wait for one).

        Raises:
            ClusterLost: the scheduler went away (the futures were cancelled under us, or no answer for
                :data:`LOST_S`).
        """
        if not self.pending:
            raise LookupError("no future in flight")  # waiting would never end
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                f, got = self._done.get(timeout=TICK_S if end is None else max(0.0, min(TICK_S, end - time.monotonic())))
            except queue.Empty:
                self.cluster._watch()
                if end is not None and time.monotonic() >= end:
                    return None
                continue
            if f not in self.pending:  # cancelled by the driver (Ctrl-C) or already handed back
                continue
            if got is _CANCELLED:
                raise self.cluster._lost()
            self.pending.discard(f)
            return f, got

    def drop(self, futures: Iterable[Any]) -> None:
        """Forget these futures (the driver cancelled them)."""
        self.pending.difference_update(futures)


_CANCELLED = object()
