"""What NVML readings become: polls, a window's summary, a sustained run's power (pure, no NVML).

See :mod:`cudalab.instruments.telemetry` for how they are read and why power is the instantaneous field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

#: Clock-event (throttle) reason bits, NVML's ``nvmlClocksEventReason*``.
REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "idle"), (0x2, "app-clocks"), (0x4, "sw-power-cap"), (0x8, "hw-slowdown"), (0x10, "sync-boost"),
    (0x20, "sw-thermal"), (0x40, "hw-thermal"), (0x80, "hw-power-brake"), (0x100, "display-clocks"),
)
#: Reasons that say nothing about the samples: idle is the gap between samples, app-clocks is a
#: clock setting (``--lock-clocks`` shows it too).
BENIGN = frozenset({"idle", "app-clocks"})
#: The reasons that slow a sample down for the board's sake (power cap, thermal, slowdown, power brake):
#: a poll with one of them set marks the samples around it throttled.
SLOWING = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
#: An SM clock under this fraction of its nominal marks the samples around it throttled (a poll that
#: says the GPU is idle is not held against them: the clock drops between samples, not inside one).
SLOW_CLOCK = 0.75
IDLE = 0x1


def decode_reasons(mask: int) -> tuple[str, ...]:
    """Names of the set bits of a clock-event reason mask, in NVML's bit order."""
    names = tuple(name for bit, name in REASONS if mask & bit)
    known = sum(bit for bit, _ in REASONS)
    if mask & ~known:
        names += (f"0x{mask & ~known:x}",)
    return names


@dataclass(frozen=True)
class Poll:
    """One poll of the GPU (None: NVML could not say)."""

    sm_mhz: int | None = None
    mem_mhz: int | None = None
    power_w: float | None = None
    temp_c: int | None = None
    reasons: int = 0
    instant: bool = True    # power_w is the instantaneous draw (False: NVML's one-second average)
    t: float = 0.0          # when it was read (time.perf_counter, the clock the samples' spans use)

    def throttled(self, nominal_mhz: int | None) -> bool:
        """Whether the GPU was held back at this poll: a power or thermal reason set, or (not idle) an
        SM clock under :data:`SLOW_CLOCK` of ``nominal_mhz`` (None: only the reasons count)."""
        if self.reasons & SLOWING:
            return True
        slow = nominal_mhz and self.sm_mhz is not None and self.sm_mhz < SLOW_CLOCK * nominal_mhz
        return bool(slow) and not self.reasons & IDLE


@dataclass(frozen=True)
class Reading:
    """One window's telemetry: clocks (min, median), throttle reasons seen, power, temperature."""

    polls: int
    seconds: float
    sm_mhz: tuple[int, int] | None = None
    mem_mhz: tuple[int, int] | None = None
    power_w: float | None = None
    temp_c: int | None = None
    reasons: tuple[str, ...] = ()
    other_pids: tuple[int, ...] = ()
    power_avg: bool = False

    @property
    def throttle(self) -> tuple[str, ...]:
        """The reasons that matter for the samples (idle gaps and clock settings left out)."""
        return tuple(r for r in self.reasons if r not in BENIGN)

    def extra(self) -> dict[str, Any]:
        """``Result.extra`` entries for this window (fields NVML could not read are left out)."""
        out: dict[str, Any] = {"telemetry_polls": self.polls}
        if self.sm_mhz:
            out["sm_mhz_min"], out["sm_mhz"] = self.sm_mhz
        if self.mem_mhz:
            out["mem_mhz_min"], out["mem_mhz"] = self.mem_mhz
        if self.power_w is not None:
            out["power_w"] = self.power_w
            if self.power_avg:
                out["power_avg_1s"] = True  # NVML's one-second average: it lags a short window
        if self.temp_c is not None:
            out["temp_c"] = self.temp_c
        out["throttle"] = "+".join(self.throttle)
        out["clock_events"] = list(self.reasons)
        if self.other_pids:
            out["other_process"] = list(self.other_pids)
        return out


def _median(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else None


def summarize(polls: list[Poll], seconds: float, other: Iterable[int] = ()) -> Reading:
    """Reduce a window's polls to a :class:`Reading`."""
    def clock(values: list[int | None]) -> tuple[int, int] | None:
        v = [x for x in values if x is not None]
        return (int(min(v)), int(round(float(np.median(v))))) if v else None

    mask = 0
    for p in polls:
        mask |= p.reasons
    temps = [p.temp_c for p in polls if p.temp_c is not None]
    return Reading(
        polls=len(polls), seconds=seconds, sm_mhz=clock([p.sm_mhz for p in polls]),
        mem_mhz=clock([p.mem_mhz for p in polls]), power_w=_median(p.power_w for p in polls),
        temp_c=max(temps) if temps else None, reasons=decode_reasons(mask),
        other_pids=tuple(sorted(set(other))),
        power_avg=any(not p.instant for p in polls if p.power_w is not None),
    )


def throttled_samples(polls: list[Poll], spans: Iterable[tuple[float, float]], nominal_mhz: int | None) -> list[bool]:
    """Per sample, whether it was taken while the GPU was throttled (:meth:`Poll.throttled`).

    A sample's span is the host time from before its enqueue to after its end event was waited for: the
    GPU ran it inside that span. It is judged by the polls inside its span and the last poll before it
    (a sample shorter than the polling interval has none inside: the state it started in is the latest
    known). Polls are in time order.
    """
    times = [p.t for p in polls]
    out = []
    for a, b in spans:
        lo = int(np.searchsorted(times, a, side="right"))  # polls[lo - 1] is the last one at or before a
        hi = int(np.searchsorted(times, b, side="right"))
        out.append(any(p.throttled(nominal_mhz) for p in polls[max(lo - 1, 0):hi]))
    return out


@dataclass(frozen=True)
class Sustained:
    """Board power over back-to-back launches (:meth:`Telemetry.sustained_watts`)."""

    watts: float
    seconds: float   # between the first and last counter step used
    steps: int       # counter steps in that span

    def extra(self, launch_ms: float, work_bytes: int = 0, work_flops: int = 0) -> dict[str, Any]:
        """``Result.extra`` entries: the power, and per launch of ``launch_ms`` (the event median)
        its energy and the work done per joule."""
        joules = self.watts * launch_ms / 1e3
        out: dict[str, Any] = {"sustained_w": self.watts, "energy_span_s": self.seconds,
                               "energy_mj_per_launch": joules * 1e3}
        if work_bytes and joules > 0:
            out["gb_per_j"] = work_bytes / 1e9 / joules
        if work_flops and joules > 0:
            out["gflop_per_j"] = work_flops / 1e9 / joules
        return out
