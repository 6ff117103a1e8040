"""The local engine: this host's GPU workers (:class:`~cudalab.execute.local.drive.Session`) as an
:class:`~cudalab.execute.executor.Executor`, with what only a local run does: ``--exclusive`` and
``--lock-clocks`` asked of NVML in this process before any worker computes."""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

from cudalab.execute.executor import Executor
from cudalab.execute.local.drive import Session
from cudalab.plan import Plan, RunRequest
from cudalab.progress import Observer
from cudalab.execute.point import Point

__all__ = ["LocalPool", "open_telemetry"]


class LocalPool(Executor):
    """One isolated GPU worker per GPU of this host (``devices``; None: every GPU the first worker sees).

    Args:
        devices, timeout, energy, observer, on_ready, on_change: as :class:`Session`'s.
        nvml_first: ``--exclusive`` or ``--lock-clocks``: no worker starts before NVML was asked (a worker of
            ours must not count as another process on the GPU, and a killed one must not leave a clock locked).
        session: a session made already (a test's, with fake workers).
    """

    def __init__(self, devices: Sequence[int] | None = (0,), timeout: float | None = None, energy: bool = False,
                 observer: Observer | None = None, on_ready: Callable[[dict[str, Any]], None] | None = None,
                 on_change: Callable[[list[Point]], None] | None = None, nvml_first: bool = False,
                 session: Session | None = None):
        self.session = session or Session(None if devices is None else list(devices), observer=observer,
                                          timeout=timeout, energy=energy, on_ready=on_ready, on_change=on_change)
        self.nvml_first = nvml_first
        self._tele: Any = None  # NVML, opened by submit for --exclusive or --lock-clocks
        self._locked: int | None = None  # the clock it locked (read before it is restored)

    def start(self) -> None:
        if not self.nvml_first:
            self.session.start()

    def submit(self, plans: Sequence[Plan], total: int) -> None:
        if plans and (plans[0].request.exclusive or plans[0].request.lock_clocks is not None):
            self._tele = open_telemetry(plans[0].request)
        self.session.start()  # a session started already starts nothing more
        self.session.submit(plans, total)

    def wait(self) -> tuple[list[Point], bool]:
        runs, incomplete = self.session.wait()
        if self.session.fatal is not None:  # a GPU that could not be used; the others ran its points
            print(f"warning: {self.session.fatal}", file=sys.stderr)
        return runs, incomplete

    def cancel(self) -> None:
        self.session.kill()
        self._release()

    def close(self) -> None:
        self.session.close()
        self._release()

    def _release(self) -> None:
        if self._tele is not None and self._tele.telemetry is not None:
            self._locked = self._tele.telemetry.locked_mhz
            self._tele.telemetry.close()  # restores a locked clock

    def info(self) -> dict[str, Any]:
        info = self.session.info()
        tele = self._tele
        if "telemetry" not in info:
            info["telemetry"] = {"note": tele.note if tele is not None else "telemetry off: no worker reported it"}
        if self._locked is not None:  # the lock is the parent's; the workers' summaries do not know of it
            info["telemetry"] = dict(info["telemetry"], locked_sm_mhz=self._locked)
        return info


def open_telemetry(req: RunRequest) -> Any:
    """NVML for the request's GPU (:func:`cudalab.instruments.telemetry.open_telemetry`), or a note why not.

    Raises:
        TelemetryError: ``--exclusive`` with another process on the GPU, or ``--lock-clocks`` refused.
    """
    from cudalab.execute.local.process import pci_bus_id  # noqa: PLC0415  (NVML's name for the GPU: likewise)
    from cudalab.instruments import telemetry  # noqa: PLC0415  (NVML only for --exclusive and --lock-clocks)

    return telemetry.open_telemetry(req.device, pci_bus_id(req.device), exclusive=req.exclusive,
                                    lock_mhz=req.lock_clocks, energy=req.protocol.energy_s > 0)
