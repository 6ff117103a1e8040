"""One GPU of a run as the parent sees it: its worker (started on demand, replaced after a fault)."""

from __future__ import annotations

import threading
from typing import Any, Callable

from cudalab.errors import GpuUnavailableError
from cudalab.execute.local import process as W


class WorkerError(GpuUnavailableError):
    """A worker could not open its GPU (no driver, no GPU, NVML missing for --energy): one line, exit 2."""


class Slot:
    """One GPU of the run: its worker (started on demand, replaced after a fault) and its facts."""

    def __init__(self, device: int, spawn: W.Spawn, energy: bool):
        self.device = device
        self._spawn = spawn
        self.energy = energy
        self.worker: Any | None = None
        self.info: dict[str, Any] | None = None
        self.bye: dict[str, Any] | None = None
        self.ready = False
        self.announced = False  # its facts were passed to ``on_ready`` (at its first real work)
        self.count = 1  # GPUs the worker's process sees (``--devices all``)

    def start(self) -> None:
        """Start a worker now (it opens its GPU while the parent plans)."""
        if self.worker is None:
            self.worker = self._spawn(self.device, self.energy)
            self.ready = False

    def start_now(self) -> "Slot":
        """:meth:`start`, returning the slot."""
        self.start()
        return self

    def drop(self) -> None:
        """Kill the worker (it faulted, hung or died): the next point starts a fresh one."""
        w, self.worker = self.worker, None
        if w is not None:
            w.kill()

    def close(self) -> None:
        """End the worker politely, keeping its telemetry summary."""
        if self.worker is not None:
            bye = self.worker.close()
            self.bye = bye or self.bye
            self.worker = None

    def send_ready(self, stopping: threading.Event, tick_s: float, **op: Any) -> Any:
        """Send ``op`` to the worker (started if need be) and return it, ready (:meth:`wait_ready`). A worker
        not ready yet gets ``op`` at once: a point sent early has its inputs drawn while its GPU opens
        (:mod:`cudalab.worker.early`).

        Raises:
            WorkerError: as :meth:`wait_ready`.
        """
        self.start()
        early = not self.ready and self.worker.send(**op)
        w = self.wait_ready(stopping, tick_s)
        if not early:
            w.send(**op)
        return w

    def wait_ready(self, stopping: threading.Event, tick_s: float) -> Any:
        """The worker, started and ready (its GPU open); its facts and GPU count kept.

        Raises:
            WorkerError: it could not open its GPU, died before saying so, or the run is stopping.
        """
        self.start()
        w = self.worker
        while not self.ready:
            ev = w.next(tick_s)
            if stopping.is_set():
                raise WorkerError("stopped")
            if ev is None:
                continue
            if ev["ev"] == "ready":
                self.ready = True
                self.count = int(ev.get("count") or 1)
                if self.info is None:
                    self.info = dict(ev.get("device") or {})
            elif ev["ev"] == "error":
                self.drop()
                raise WorkerError(str(ev.get("message") or "the GPU worker could not start"))
            elif ev["ev"] == "eof":
                why, words = w.exit_text(1.0), w.last_words()
                self.drop()
                raise WorkerError(f"the GPU worker ended before opening GPU {self.device} ({why})"
                                  + (f": {words}" if words else ""))
        return w


def every_gpu(slots: list[Slot], guess: int | None, ready: Callable[[Slot], Any], spawn: W.Spawn,
              energy: bool) -> list[Slot]:
    """``--devices all``: ``slots`` (the first GPU's first) and one on every other GPU, their workers started
    together (``guess``: how many GPUs NVML or CUDA_VISIBLE_DEVICES counts, no CUDA context here); where
    neither can, the first worker says, and the others start then.

    Raises:
        WorkerError: the first GPU cannot be opened (from ``ready``, which waits for a slot's worker).
    """
    first = slots[0]
    if guess:
        slots = slots + [Slot(d, spawn, energy).start_now() for d in range(1, guess)]
    ready(first)
    for extra in [s for s in slots if s.device >= first.count]:  # the guess saw more than CUDA does
        extra.drop()
        slots.remove(extra)
    have = {s.device for s in slots}
    return slots + [Slot(d, spawn, energy).start_now() for d in range(first.count) if d not in have]


def facts(slots: list[Slot]) -> dict[str, Any]:
    """The facts of the GPU(s) that ran: the first one's, with every GPU's under ``devices`` (each with its own
    worker's telemetry)."""
    infos = []
    for s in slots:
        if s.info:
            tele = (s.bye or {}).get("telemetry")
            infos.append(dict(s.info, telemetry=tele) if tele is not None else dict(s.info))
    out = dict(infos[0]) if infos else {}
    if len(infos) > 1:
        out["devices"] = infos
    return out
