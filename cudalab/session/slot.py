"""One GPU of a run as the parent sees it: its worker (started on demand, replaced after a fault)."""

from __future__ import annotations

from typing import Any

from cudalab.errors import GpuUnavailableError
from cudalab.worker import process as W


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
