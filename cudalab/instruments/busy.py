"""How busy a GPU is while a campaign runs on it: NVML's utilization ("GPU-Util" in nvidia-smi, the share of
the driver's sample period in which a kernel ran), polled from the parent in a thread of its own.

``cudalab tune`` shows it on its live line and records it, so that a campaign's wall time can be read as GPU
work and the rest (builds, verification on the host, the search itself). NVML is not CUDA: the parent may ask
it without loading the driver's CUDA side. A GPU NVML cannot open, or a poll it refuses, gives no figure, never
an error: the campaign is what matters.

The GPU is found by its worker: the NVML device whose compute processes include the worker's process id
(:func:`gpu_of`). Asking CUDA for its bus id would need a process with a CUDA context of its own, which the
worker's telemetry would then see as another process computing on its GPU.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

__all__ = ["BusyMeter", "gpu_of"]

#: Seconds between two polls (NVML's own sample period is 1/6 s to 1 s, by GPU).
PERIOD_S = 0.5


class BusyMeter:
    """Polls one GPU's utilization from :meth:`start` until :meth:`stop`.

    Args:
        opener: returns ``(nvml, handle)`` for the GPU, or None when NVML cannot say; called in the thread
            (finding the GPU waits for its worker to open it: the campaign does not wait for that).
        period_s: seconds between polls.
    """

    def __init__(self, opener: Callable[[], tuple[Any, Any] | None], period_s: float = PERIOD_S):
        self._opener, self._period = opener, period_s
        self._readings: list[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "BusyMeter":
        """Start polling in a daemon thread (returns self)."""
        self._thread = threading.Thread(target=self._run, name="cudalab-busy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling (safe twice; waits about one period for the thread, no more)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._period + 0.1)  # a daemon still looking for its GPU is left behind

    @property
    def percent(self) -> float | None:
        """The mean utilization so far, in % (None before two readings: one says little)."""
        with self._lock:
            r = list(self._readings)
        return sum(r) / len(r) if len(r) >= 2 else None

    @property
    def readings(self) -> int:
        """How many polls NVML answered."""
        with self._lock:
            return len(self._readings)

    def _run(self) -> None:
        try:
            opened = self._opener()
        except Exception:  # no NVML, or NVML refusing: no figure
            return
        if opened is None:
            return
        nvml, handle = opened
        try:
            while not self._stop.wait(self._period):
                try:
                    gpu = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                except Exception:  # a poll NVML refuses is left out, not counted as idle
                    continue
                with self._lock:
                    self._readings.append(gpu)
        finally:
            try:
                nvml.nvmlShutdown()
            except Exception:
                pass


def gpu_of(pids: Callable[[], set[int]], wait_s: float = 60.0, nvml: Any = None,
           sleep: Callable[[float], None] = time.sleep) -> tuple[Any, Any] | None:
    """``(nvml, handle)`` of the GPU on which one of ``pids`` (the workers' processes, asked again at each
    look: a worker may be replaced) holds a CUDA context, looked for until ``wait_s`` has passed (a worker
    opens its GPU a second or more after it starts); the only GPU when NVML lists one; None when NVML is
    missing or never shows the process (a container may hide the lists).

    Args:
        nvml: an initialised NVML module (tests pass a fake); None imports and initialises ``pynvml``.
    """
    if nvml is None:
        from cudalab.instruments.telemetry import import_nvml  # noqa: PLC0415

        nvml, _ = import_nvml()
        if nvml is None:
            return None
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
    except Exception:
        handles = []
    if len(handles) == 1:
        return nvml, handles[0]
    deadline = time.monotonic() + wait_s
    while handles:
        want = pids()
        for h in handles:
            try:
                if want & {int(p.pid) for p in nvml.nvmlDeviceGetComputeRunningProcesses(h)}:
                    return nvml, h
            except Exception:  # a GPU whose list NVML refuses: look at the others
                continue
        if time.monotonic() >= deadline:
            break
        sleep(0.5)
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass
    return None
