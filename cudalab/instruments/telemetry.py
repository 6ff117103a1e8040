"""What the GPU was doing while a variant's samples ran, read from NVML (``nvidia-ml-py``, optional).

Per variant a :class:`Window` polls NVML on a background thread every few milliseconds while the samples run: SM and
memory clocks, power, temperature, clock-event (throttle) reasons. The run as a whole gives the measured clocks the
header prints instead of the nominal maximum, which is not a measurement.

Power is NVML's instantaneous reading (field ``NVML_FI_DEV_POWER_INSTANT``), not ``nvmlDeviceGetPowerUsage``, a
one-second average (under a copy it took a second to climb from 119 W to 381 W on an H100, while the instantaneous
reading stepped at once); where the driver lacks the field the average is shown, marked. Both sensors update every
100 ms on an H100, and so does the energy counter: a row's window of tens of milliseconds cannot give an energy
(read before and after a window, the counter gave nothing or a whole step: 1,000 mJ for a 0.2 ms launch). Energy is
measured apart, on request (``--energy``): :meth:`Telemetry.sustained_watts` keeps the GPU busy with the row's
launches for a second and divides the counter's steps by the time between them.

Another process computing on the same GPU makes every timing of the run doubtful (two runs at once read 2.5% IQR
where one alone reads 0.2%): it is looked for at the start and end of each window and now and then in between, and
flagged on the rows. Inside a container NVML may report host process ids, so our own id is learnt by difference: the
processes on the GPU before we open our context are others; one new process after it is us.

NVML numbers GPUs its own way: the GPU is found by the PCI bus id CUDA reports. Every NVML call may fail (old
driver, no permission, a field the GPU lacks); a failed field is left out, never guessed. Tests pass a fake NVML
module.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from cudalab.errors import CudalabError
from cudalab.instruments.gpu_pids import ancestors, compute_pids  # noqa: F401  (compute_pids: the worker's baseline)
from cudalab.instruments.window import PROCESS_EVERY, Window  # noqa: F401  (a Telemetry makes them; PROCESS_EVERY re-exported)
from cudalab.instruments.readings import BENIGN, REASONS, Poll, Reading, Sustained, decode_reasons, summarize, throttled_samples  # noqa: F401

INTERVAL_S = 0.005
#: NVML's field id of the instantaneous power draw (``pynvml.NVML_FI_DEV_POWER_INSTANT``, driver 530+).
FI_POWER_INSTANT = 186
INSTALL_HINT = "pip install -e '.[telemetry]' (nvidia-ml-py)"


class TelemetryError(CudalabError):
    """``--exclusive`` or ``--lock-clocks`` cannot be honoured (one line, exit 2, no GPU work done)."""


class Telemetry:
    """NVML for one GPU: polls, sustained power, other processes, the clock lock.

    Args:
        nvml: the ``pynvml`` module (initialised) or a fake with the same functions.
        handle: the NVML device handle.
        label: how messages name the GPU (``GPU 0``).
        our_pid: this process's id as we see it.
    """

    def __init__(self, nvml: Any, handle: Any, label: str = "GPU", our_pid: int | None = None,
                 interval_s: float = INTERVAL_S):
        self.nvml = nvml
        self.handle = handle
        self.label = label
        self.interval_s = interval_s
        self.our_pid = os.getpid() if our_pid is None else our_pid
        # Our own ancestors are not "another process": a script, ncu or compute-sanitizer that started
        # this run may hold an idle CUDA context (seen: a benchmark whose CuPy pool kept one).
        self.self_pids = {self.our_pid} | (ancestors() if our_pid is None else set())
        self.baseline: set[int] = set()
        self.locked_mhz: int | None = None
        self.polls: list[Poll] = []   # every poll of the run, for the header's measured clocks
        self.other_seen: set[int] = set()
        self._others: set[int] = set()  # the last answer of others(), and when (monotonic seconds)
        self._others_at: float | None = None
        self.threads: list[threading.Thread] = []  # pollers of stopped windows, joined by close()
        # The newer name first; a driver older than the binding lacks it, the older name is there.
        names = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
        self._reasons = [fn for fn in (getattr(nvml, n, None) for n in names) if fn is not None]
        self._instant = hasattr(nvml, "nvmlDeviceGetFieldValues")  # until the driver says otherwise
        self._nominal: int | None = None
        self._nominal_asked = False

    # --- processes -------------------------------------------------------------------------------
    def processes(self) -> set[int]:
        """Ids of the processes computing on this GPU (empty when NVML will not say)."""
        try:
            return {int(p.pid) for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)}
        except Exception:  # NVMLError, or a container that hides the list
            return set()

    def before_open(self, baseline: set[int] | None = None) -> None:
        """Remember who computes on the GPU before this process opens its context: asked now, or ``baseline``
        (:func:`compute_pids` at the worker's start); our context may be open then: our id is learnt at once."""
        if baseline is None:
            self.baseline = self.processes()
        else:
            self.baseline = set(baseline)
            self.after_open()

    def after_open(self) -> None:
        """Learn our own id as NVML reports it: one new process since :meth:`before_open` is us."""
        now = self.processes()
        if self.our_pid in now:
            return
        new = now - self.baseline
        if len(new) == 1:
            self.self_pids |= new

    def others(self, max_age: float = 0.0) -> set[int]:
        """Processes other than this one computing on the GPU now.

        Args:
            max_age: seconds an earlier answer stays good (0: ask NVML now). The process list is NVML's slowest
                call (about 18 ms on an H200): asked at every window's start and stop it was a third of a small
                kernel's tuning trial, while the poller asks every :data:`~cudalab.instruments.window.PROCESS_EVERY`
                polls anyway.
        """
        now = time.monotonic()
        if max_age > 0 and self._others_at is not None and now - self._others_at <= max_age:
            return set(self._others)
        found = self.processes() - self.self_pids
        self._others, self._others_at = found, now
        self.other_seen |= found
        return found

    def refuse_if_shared(self) -> None:
        """``--exclusive``: refuse to start while another process computes on the GPU.

        Raises:
            TelemetryError: naming the process ids.
        """
        others = self.others()
        if others:
            pids = ", ".join(str(p) for p in sorted(others))
            raise TelemetryError(f"--exclusive: another process is computing on {self.label} (pid {pids}); "
                                 "not starting (wait for it, or run without --exclusive)")

    # --- clocks ---------------------------------------------------------------------------------
    def lock_clocks(self, mhz: int) -> None:
        """Lock the SM clock at ``mhz`` (min = max); :meth:`close` restores it.

        Raises:
            TelemetryError: the driver refuses (no permission, not supported, a clock it cannot set).
        """
        try:
            self.nvml.nvmlDeviceSetGpuLockedClocks(self.handle, int(mhz), int(mhz))
        except Exception as exc:
            raise TelemetryError(f"--lock-clocks {mhz}: the driver refused to lock the SM clock of {self.label} "
                                 f"({_nvml_text(exc)}); nothing ran. Setting clocks needs root (or a driver "
                                 "that allows it) and a clock the GPU supports") from None
        self.locked_mhz = int(mhz)

    def close(self) -> None:
        """Restore a locked clock and shut NVML down (safe to call twice; never raises)."""
        for thread in self.threads:  # a poller still inside NVML must not outlive it
            thread.join(timeout=1.0)
        self.threads.clear()
        if self.locked_mhz is not None:
            try:
                self.nvml.nvmlDeviceResetGpuLockedClocks(self.handle)
            except Exception:
                pass
            self.locked_mhz = None
        try:
            self.nvml.nvmlShutdown()
        except Exception:
            pass

    # --- polling ----------------------------------------------------------------------------------
    def poll(self) -> Poll:
        """One reading of clocks, power, temperature and clock-event reasons (failed fields None)."""
        n, h = self.nvml, self.handle

        def get(fn: str, *args: Any) -> Any:
            try:
                return getattr(n, fn)(h, *args)
            except Exception:
                return None

        t = time.perf_counter()
        sm = get("nvmlDeviceGetClockInfo", getattr(n, "NVML_CLOCK_SM", 1))
        mem = get("nvmlDeviceGetClockInfo", getattr(n, "NVML_CLOCK_MEM", 2))
        mw, instant = self._instant_mw(), True
        if mw is None:
            mw, instant = get("nvmlDeviceGetPowerUsage"), False
        temp = get("nvmlDeviceGetTemperature", getattr(n, "NVML_TEMPERATURE_GPU", 0))
        reasons = 0
        while self._reasons:
            try:
                reasons = int(self._reasons[0](h))
                break
            except Exception:  # not in this driver: try the other name once, then give up
                self._reasons.pop(0)
        return Poll(sm_mhz=sm, mem_mhz=mem, power_w=None if mw is None else mw / 1000.0, temp_c=temp,
                    reasons=reasons, instant=instant, t=t)

    def nominal_mhz(self) -> int | None:
        """The SM clock the samples should run at: the locked clock (``--lock-clocks``), else the default
        application clock, else the maximum (None: NVML says none). Asked once, then kept."""
        if self.locked_mhz is not None:
            return self.locked_mhz
        if not self._nominal_asked:
            self._nominal_asked = True
            sm = getattr(self.nvml, "NVML_CLOCK_SM", 1)
            for fn in ("nvmlDeviceGetDefaultApplicationsClock", "nvmlDeviceGetMaxClockInfo"):
                try:
                    mhz = int(getattr(self.nvml, fn)(self.handle, sm))
                except Exception:
                    continue
                if mhz > 0:
                    self._nominal = mhz
                    break
        return self._nominal

    def _instant_mw(self) -> int | None:
        """The instantaneous power draw in milliwatts, or None (and never asked again) where the
        driver or GPU has no such field."""
        if not self._instant:
            return None
        try:
            value = self.nvml.nvmlDeviceGetFieldValues(self.handle, [FI_POWER_INSTANT])[0]
            if int(value.nvmlReturn) == 0:
                return int(value.value.uiVal)
        except Exception:
            pass
        self._instant = False
        return None

    def energy_mj(self) -> int | None:
        """NVML's energy counter in millijoules (None where the GPU has none)."""
        try:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except Exception:
            return None

    def sustained_watts(self, enqueue: Callable[[], float], wait: Callable[[], None], seconds: float = 1.0,
                        clock: Callable[[], float] = time.perf_counter) -> Sustained | None:
        """Average board power while ``enqueue`` keeps the GPU busy, from two steps of the energy
        counter at least ``seconds`` apart (None: no counter, or it never moved).

        The counter steps every 100 ms on an H100; it is read while each batch runs (a read takes
        ~4 ms), so a step's time is known to a few ms and the power over a second to under 1%. The
        first step seen ends a period that may hold idle time before the load: it starts the span.

        Args:
            enqueue: queues one batch of work without waiting; returns its expected GPU seconds.
            wait: waits for the GPU to finish everything queued.
            seconds: the shortest span between the first and last step used.
            clock: wall clock (injectable for tests).
        """
        last = self.energy_mj()
        if last is None:
            return None
        steps: list[tuple[float, int]] = []
        give_up = clock() + seconds + 2.0
        while clock() < give_up:
            busy = enqueue()
            until = clock() + 0.8 * busy   # stop reading before the batch ends: no idle gap
            while True:
                value = self.energy_mj()
                if value is not None and value != last:
                    steps.append((clock(), value))
                    last = value
                if clock() >= until:
                    break
            wait()
            if len(steps) >= 2 and steps[-1][0] - steps[0][0] >= seconds:
                (t0, e0), (t1, e1) = steps[0], steps[-1]
                return Sustained(watts=(e1 - e0) / 1e3 / (t1 - t0), seconds=t1 - t0, steps=len(steps) - 1)
        wait()
        return None

    def window(self) -> "Window":
        """A polling window around one variant's samples (a context manager; see :class:`Window`)."""
        return Window(self)

    def summary(self) -> dict[str, Any]:
        """The run's telemetry for ``RunRecord.device["telemetry"]``: measured clocks (median over
        every poll), the clock lock, and other processes seen."""
        out: dict[str, Any] = {"source": "nvml", "polls": len(self.polls)}
        run = summarize(self.polls, 0.0)
        if run.sm_mhz:
            out["sm_mhz"] = run.sm_mhz[1]
        if run.mem_mhz:
            out["mem_mhz"] = run.mem_mhz[1]
        if run.throttle:
            out["throttle"] = list(run.throttle)
        if self.locked_mhz is not None:
            out["locked_sm_mhz"] = self.locked_mhz
        if self.other_seen:
            out["other_process"] = sorted(self.other_seen)
        return out


def _nvml_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


@dataclass(frozen=True)
class Opened:
    """What :func:`open_telemetry` returns: the telemetry, or None and the one-line note why not."""

    telemetry: Telemetry | None
    note: str = ""


def import_nvml() -> tuple[Any | None, str]:
    """``(pynvml, '')`` initialised, or ``(None, why not)``."""
    try:
        import pynvml  # noqa: PLC0415  (optional extra)
    except ImportError:
        return None, f"nvidia-ml-py is not installed: {INSTALL_HINT}"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # no driver, no libnvidia-ml.so
        return None, f"NVML could not start ({_nvml_text(exc)})"
    return pynvml, ""


def open_telemetry(index: int, pci_bus_id: str | None, nvml: Any | None = None, exclusive: bool = False,
                   lock_mhz: int | None = None, energy: bool = False, baseline: set[int] | None = None) -> Opened:
    """Open NVML for CUDA device ``index`` before its context: look for other processes, refuse
    under ``--exclusive`` while one is there, lock the clock for ``--lock-clocks``.

    Args:
        index: the CUDA device index (messages; the NVML index when no bus id is known).
        pci_bus_id: the device's PCI bus id as CUDA reports it.
        nvml: an initialised NVML module (tests pass a fake); None imports ``pynvml``.
        exclusive: refuse while another process computes on the GPU.
        lock_mhz: lock the SM clock at this many MHz.
        energy: ``--energy`` asked for (it needs NVML).
        baseline: who computed before this process's context was made (:func:`compute_pids`); None: asked now.

    Raises:
        TelemetryError: NVML missing while ``--exclusive``/``--lock-clocks``/``--energy`` need it, another process
            under ``--exclusive``, or the driver refusing the lock.
    """
    note = ""
    if nvml is None:
        nvml, note = import_nvml()
    if nvml is None:
        needs = [o for o, on in (("--exclusive", exclusive), ("--lock-clocks", lock_mhz is not None),
                                 ("--energy", energy)) if on]
        if needs:
            raise TelemetryError(f"{' and '.join(needs)} need{'s' if len(needs) == 1 else ''} NVML: {note}")
        return Opened(None, f"telemetry off: {note}")
    try:
        handle = (nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id) if pci_bus_id
                  else nvml.nvmlDeviceGetHandleByIndex(index))
    except Exception as exc:
        if exclusive or lock_mhz is not None or energy:
            raise TelemetryError(f"NVML does not find GPU {index} ({_nvml_text(exc)})") from None
        return Opened(None, f"telemetry off: NVML does not find GPU {index} ({_nvml_text(exc)})")
    tele = Telemetry(nvml, handle, label=f"GPU {index}")
    try:
        tele.before_open(baseline)
        if exclusive:
            tele.refuse_if_shared()
        if lock_mhz is not None:
            tele.lock_clocks(lock_mhz)
    except BaseException:
        tele.close()
        raise
    return Opened(tele)
