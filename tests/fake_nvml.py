"""A stand-in for the ``pynvml`` module: the NVML calls cudalab.instruments.telemetry makes, with settable answers."""

from __future__ import annotations

from dataclasses import dataclass


class NVMLError(Exception):
    """Like pynvml.NVMLError: str() is NVML's message."""


@dataclass
class Proc:
    pid: int
    usedGpuMemory: int = 0


@dataclass
class _Value:
    uiVal: int


@dataclass
class FieldValue:
    nvmlReturn: int
    value: _Value


class FakeNVML:
    """One GPU. Clock, power and temperature readings cycle through the given lists."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVMLError = NVMLError

    def __init__(self, sm=(1980,), mem=(2619,), power_mw=(300000,), temp=(50,), reasons=(0,),
                 pids=(), lock_error: str | None = None, energy_step_mj: int = 1000, instant: bool = True):
        self.sm, self.mem, self.power_mw, self.temp, self.reasons = list(sm), list(mem), list(power_mw), list(temp), list(reasons)
        self.pids = list(pids)
        self.lock_error = lock_error
        self.energy_mj = 10_000_000
        self.energy_step_mj = energy_step_mj
        self.instant = instant
        self.calls: list[tuple] = []
        self.i = 0
        self.shutdown = 0

    def _next(self, values):
        v = values[self.i % len(values)]
        return v

    def nvmlInit(self):
        self.calls.append(("init",))

    def nvmlShutdown(self):
        self.shutdown += 1

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        self.calls.append(("bus", bus))
        return "handle"

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return "handle"

    def nvmlDeviceGetClockInfo(self, h, which):
        if which == self.NVML_CLOCK_SM:
            self.i += 1  # one poll reads SM first: advance the cycle here
            return self._next(self.sm)
        return self._next(self.mem)

    def nvmlDeviceGetPowerUsage(self, h):
        return self._next(self.power_mw)

    def nvmlDeviceGetFieldValues(self, h, ids):
        """Only the instantaneous power field (186), from the same cycle as nvmlDeviceGetPowerUsage;
        ``instant=False`` makes the driver lack it."""
        if not self.instant or list(ids) != [186]:
            raise self.NVMLError("Not Supported")
        return [FieldValue(nvmlReturn=0, value=_Value(uiVal=self._next(self.power_mw)))]

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self._next(self.temp)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._next(self.reasons)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.energy_mj += self.energy_step_mj
        return self.energy_mj

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [Proc(p) for p in self.pids]

    def nvmlDeviceSetGpuLockedClocks(self, h, lo, hi):
        self.calls.append(("lock", lo, hi))
        if self.lock_error:
            raise NVMLError(self.lock_error)

    def nvmlDeviceResetGpuLockedClocks(self, h):
        self.calls.append(("reset",))
