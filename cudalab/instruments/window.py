"""One variant's polling window: NVML read on a background thread while its samples run
(:meth:`cudalab.instruments.telemetry.Telemetry.window` makes one), then summarised."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from cudalab.instruments.readings import Poll, Reading, summarize, throttled_samples

if TYPE_CHECKING:
    from cudalab.instruments.telemetry import Telemetry

__all__ = ["PROCESS_EVERY", "Window"]

#: Look for other processes every this many polls (the process list is the slowest NVML call).
PROCESS_EVERY = 10
#: A window's start and stop take the process list asked within this many seconds (a small kernel's window
#: is shorter than one NVML process query).
PROCESS_MAX_AGE_S = 1.0


class Window:
    """Polls on a background thread between :meth:`start` and :meth:`stop` (or ``with``)."""

    def __init__(self, tele: Telemetry):
        self.tele = tele
        self.polls: list[Poll] = []
        self.other: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self.reading: Reading | None = None
        self.kept: list[Poll] = []   # the window's polls as stop() took them

    def start(self) -> "Window":
        """Look for other processes, start polling."""
        self.other |= self.tele.others(PROCESS_MAX_AGE_S)
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._loop, name="cudalab-telemetry", daemon=True)
        self._thread.start()
        self.tele.threads[:] = [t for t in self.tele.threads if t.is_alive()] + [self._thread]
        return self

    def _loop(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.polls.append(self.tele.poll())
            i += 1
            if i % PROCESS_EVERY == 0:
                self.other |= self.tele.others()
            self._stop.wait(self.tele.interval_s)

    def stop(self) -> Reading:
        """Stop polling (one last poll if the window was too short for any) and summarise.

        The thread is not waited for here (it may be inside an NVML call): the polls it has made so
        far are the window's, and :meth:`Telemetry.close` joins every such thread before NVML shuts
        down. The process list here and in :meth:`start` is one asked within :data:`PROCESS_MAX_AGE_S`.
        """
        self._stop.set()
        t1 = time.perf_counter()
        polls = list(self.polls)  # what the thread appends after this belongs to no window
        if not polls:
            polls.append(self.tele.poll())
        self.other |= self.tele.others(PROCESS_MAX_AGE_S)
        seconds = t1 - self._t0
        self.tele.polls.extend(polls)
        self.kept = polls
        self.reading = summarize(polls, seconds, self.other)
        return self.reading

    def throttled(self, spans: list[tuple[float, float]]) -> list[bool]:
        """Per sample span (host ``perf_counter`` seconds), whether it ran throttled
        (:func:`cudalab.instruments.readings.throttled_samples`); call after :meth:`stop`."""
        return throttled_samples(sorted(self.kept, key=lambda p: p.t), spans, self.tele.nominal_mhz())

    def __enter__(self) -> "Window":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        if self.reading is None:
            self.stop()
