"""Telemetry with a fake NVML: clocks, throttle reasons, energy, other processes, --exclusive,
--lock-clocks, and what the report prints from them."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from cudalab.worker.gpu import EventTime
from cudalab import report
from cudalab.worker import gpu
from cudalab.worker import executor as runner
from cudalab.instruments import telemetry
from cudalab.cli import cli
from cudalab.records.device import DeviceInfo
from cudalab.records.results import Result
from cudalab.instruments.telemetry import Telemetry, TelemetryError, compute_pids, decode_reasons, open_telemetry
from fake_nvml import FakeNVML
from test_runcore import FakeDevice, good_copy

OUR = 1000


def test_decode_reasons():
    assert decode_reasons(0) == ()
    assert decode_reasons(0x4 | 0x40) == ("sw-power-cap", "hw-thermal")
    assert decode_reasons(0x1 | 0x1000) == ("idle", "0x1000")


def test_window_reads_clocks_power_temperature_and_reasons():
    # One power value: the poll thread may add a poll between the loop's last look and stop(), so the
    # median of alternating values would depend on that race.
    nvml = FakeNVML(sm=(1980, 1755, 1980, 1980), mem=(2619,), power_mw=(300000,), temp=(40, 61),
                    reasons=(0x1, 0x4))
    tele = Telemetry(nvml, "handle", our_pid=OUR, interval_s=0.001)
    w = tele.window().start()
    while len(w.polls) < 8:
        pass
    r = w.stop()
    assert r.sm_mhz == (1755, 1980) and r.mem_mhz == (2619, 2619)
    assert r.power_w == pytest.approx(300.0) and r.temp_c == 61
    assert r.reasons == ("idle", "sw-power-cap") and r.throttle == ("sw-power-cap",)
    extra = r.extra()
    assert extra["sm_mhz"] == 1980 and extra["sm_mhz_min"] == 1755 and extra["throttle"] == "sw-power-cap"
    assert "other_process" not in extra and "power_avg_1s" not in extra and "energy_mj_per_launch" not in extra
    assert nvml.energy_mj == 10_000_000   # a window never reads the energy counter (it steps every 100 ms)
    assert tele.summary()["sm_mhz"] == 1980 and tele.summary()["mem_mhz"] == 2619


def test_stop_does_not_wait_for_a_poll_in_flight_and_close_joins_it():
    import threading
    import time

    gate = threading.Event()
    inside = threading.Event()

    class Slow(FakeNVML):
        def _hang(self):
            if self.i > 1:
                inside.set()
                gate.wait(5)  # the second poll hangs inside "NVML" until released

        def nvmlDeviceGetPowerUsage(self, h):
            self._hang()
            return super().nvmlDeviceGetPowerUsage(h)

        def nvmlDeviceGetFieldValues(self, h, ids):  # the instantaneous power, read first where it exists
            self._hang()
            return super().nvmlDeviceGetFieldValues(h, ids)

        def nvmlShutdown(self):
            self.alive_at_shutdown = poller.is_alive()
            super().nvmlShutdown()

    nvml = Slow()
    tele = Telemetry(nvml, "handle", our_pid=OUR, interval_s=0.001)
    w = tele.window().start()
    assert inside.wait(5)  # the poller is in the hung call (polling i raced it on a loaded machine)
    t0 = time.perf_counter()
    r = w.stop()
    assert time.perf_counter() - t0 < 1.0 and r.sm_mhz == (1980, 1980)
    poller = tele.threads[0]
    assert poller.is_alive()    # still inside the hung call
    threading.Timer(0.05, gate.set).start()
    tele.close()
    assert nvml.alive_at_shutdown is False and nvml.shutdown == 1  # joined before NVML shut down


def test_missing_fields_are_left_out_not_guessed():
    class Partial(FakeNVML):
        def nvmlDeviceGetPowerUsage(self, h):
            raise self.NVMLError("Not Supported")

    tele = Telemetry(Partial(instant=False), "handle", our_pid=OUR)
    r = tele.window().start().stop()
    extra = r.extra()
    assert "power_w" not in extra
    assert extra["sm_mhz"] == 1980


class CounterNVML(FakeNVML):
    """An energy counter that steps every 100 ms of a fake clock at ``watts``; each read takes 4 ms."""

    def __init__(self, watts=400.0, **kw):
        super().__init__(**kw)
        self.now, self.watts = 0.0, watts

    def clock(self):
        return self.now

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        self.now += 0.004
        return int(int(self.now / 0.1) * 0.1 * self.watts * 1000)


def test_sustained_watts_divides_counter_steps_by_the_time_between_them():
    nvml = CounterNVML(watts=400.0)
    tele = Telemetry(nvml, "handle", our_pid=OUR)
    batches = []

    def enqueue():
        batches.append(nvml.now)
        return 0.05

    got = tele.sustained_watts(enqueue, lambda: setattr(nvml, "now", nvml.now + 0.01), 1.0, nvml.clock)
    assert got.watts == pytest.approx(400.0, rel=0.01) and got.seconds >= 1.0 and got.steps >= 10
    assert len(batches) > 10   # the GPU is kept busy the whole time
    extra = got.extra(launch_ms=0.5, work_bytes=2 * 10**9)
    assert extra["energy_mj_per_launch"] == pytest.approx(got.watts * 0.5)       # W x ms = mJ
    assert extra["gb_per_j"] == pytest.approx(2.0 / (got.watts * 0.5e-3))
    assert extra["sustained_w"] == got.watts


def test_sustained_watts_gives_up_when_the_counter_never_moves():
    class Stuck(CounterNVML):
        def nvmlDeviceGetTotalEnergyConsumption(self, h):
            self.now += 0.004
            return 5

    nvml = Stuck()
    assert Telemetry(nvml, "handle", our_pid=OUR).sustained_watts(lambda: 0.05, lambda: None, 1.0, nvml.clock) is None
    assert 3.0 <= nvml.now < 3.5   # the span asked for and two seconds more, not forever


def test_without_the_instantaneous_field_power_is_marked_average():
    nvml = FakeNVML(power_mw=(200000,), instant=False)
    tele = Telemetry(nvml, "handle", our_pid=OUR)
    extra = tele.window().start().stop().extra()
    assert extra["power_w"] == 200.0 and extra["power_avg_1s"] is True
    assert report.core.telemetry_cell("power_w", extra) == "200 avg"


def test_other_process_is_flagged_and_our_container_pid_is_learnt():
    nvml = FakeNVML(pids=[222])
    tele = Telemetry(nvml, "handle", our_pid=OUR)
    tele.before_open()                  # 222 was there first
    nvml.pids = [222, 9999]             # we opened our context: NVML shows us as 9999 (host pid)
    tele.after_open()
    assert tele.others() == {222}
    r = tele.window().start().stop()
    assert r.other_pids == (222,) and r.extra()["other_process"] == [222]
    nvml.pids = [9999]
    assert tele.others() == set()       # asked now: gone (a window takes an answer up to a second old)
    assert tele.window().start().stop().other_pids == ()
    assert tele.summary()["other_process"] == [222]


def test_a_baseline_read_before_an_early_context_still_learns_our_pid():
    """A worker's context is made while it imports (cudalab.worker.warm); NVML's list was read before that. In a
    container NVML shows us under a host pid: the one new pid since the baseline is us, at once, so
    --exclusive does not refuse our own context."""
    nvml = FakeNVML(pids=[222])
    baseline = compute_pids(nvml)
    assert baseline == {222}
    nvml.pids = [222, 9999]  # our context came before open_telemetry
    tele = open_telemetry(0, "0000:01:00.0", nvml=nvml, baseline=baseline).telemetry
    assert tele.others() == {222}
    nvml.pids = [9999]
    assert open_telemetry(0, "0000:01:00.0", nvml=nvml, exclusive=True, baseline=set()).telemetry is not None
    with pytest.raises(TelemetryError, match="pid 9999"):  # without the baseline it would be taken for another
        open_telemetry(0, "0000:01:00.0", nvml=nvml, exclusive=True)


def test_exclusive_refuses_while_another_process_computes():
    nvml = FakeNVML(pids=[4242])
    with pytest.raises(TelemetryError, match=r"--exclusive: another process .*pid 4242"):
        open_telemetry(0, "0000:01:00.0", nvml=nvml, exclusive=True, lock_mhz=1500)
    assert not any(c[0] == "lock" for c in nvml.calls)  # refused before touching the clocks
    assert nvml.shutdown == 1
    opened = open_telemetry(0, "0000:01:00.0", nvml=FakeNVML(), exclusive=True)
    assert opened.telemetry is not None


def test_lock_clocks_refused_is_one_clear_error():
    nvml = FakeNVML(lock_error="Insufficient Permissions")
    with pytest.raises(TelemetryError, match=r"--lock-clocks 1500: the driver refused .*Insufficient Permissions"):
        open_telemetry(0, None, nvml=nvml, lock_mhz=1500)
    assert ("reset",) not in nvml.calls


def test_lock_clocks_locks_and_close_restores():
    nvml = FakeNVML()
    tele = open_telemetry(0, "0000:01:00.0", nvml=nvml, lock_mhz=1500).telemetry
    assert ("lock", 1500, 1500) in nvml.calls and tele.summary()["locked_sm_mhz"] == 1500
    tele.close()
    tele.close()
    assert nvml.calls.count(("reset",)) == 1


def test_without_nvml_the_columns_go_and_a_note_stays(monkeypatch):
    monkeypatch.setattr(telemetry, "import_nvml", lambda: (None, "nvidia-ml-py is not installed: pip ..."))
    opened = open_telemetry(0, None)
    assert opened.telemetry is None and opened.note.startswith("telemetry off: nvidia-ml-py")
    with pytest.raises(TelemetryError, match="--exclusive and --lock-clocks need NVML"):
        open_telemetry(0, None, exclusive=True, lock_mhz=1400)


# --- report -----------------------------------------------------------------------------------------

DEVICE = DeviceInfo(0, "Fake GPU", (9, 0), 132, 80 * 2**30, 50 * 2**20, 1980, 2619, 5120, "13.0", "13.0").to_dict()


def test_header_prints_measured_clocks_or_says_nominal():
    measured = dict(DEVICE, telemetry={"source": "nvml", "sm_mhz": 1755, "mem_mhz": 2619, "polls": 90})
    text = "\n".join(report.header_lines(measured, "t", "p", None, None))
    assert "SM clock 1755 MHz" in text and "measured" in text and "nominal" not in text
    off = dict(DEVICE, telemetry={"note": "telemetry off: nvidia-ml-py is not installed"})
    text = "\n".join(report.header_lines(off, "t", "p", None, None))
    assert "SM clock 1980 MHz (nominal max)" in text and "telemetry off" in text


def test_table_shows_telemetry_batch_and_other_process():
    from cudalab.bench import Protocol, summarize

    rows = [Result("a", "kernel", runner.PASSED, stats=summarize([0.002] * 3), max_error=0.0,
                   extra={"batch": 95, "sm_mhz": 1980, "sm_mhz_min": 1500, "power_w": 321.0,
                          "energy_mj_per_launch": 0.0123, "telemetry_polls": 10, "throttle": "",
                          "other_process": [4242]}),
            Result("b", "kernel", runner.PASSED, stats=summarize([0.05] * 3), max_error=0.0,
                   extra={"host_gaps": 2})]
    con = report.console()
    with con.capture() as cap:
        con.print(report.results_table(rows, "none"))
    out = cap.get()
    assert "×95" in out and "SM MHz" in out and "1980 (min 1500)" in out and "mJ/launch" in out
    assert "a !" in out and "throttle" not in out    # no row has a throttle reason: no column
    head = "\n".join(report.header_lines(DEVICE, "t", "p", Protocol(), None, rows))
    assert "L2 flushed before each batch of 95" in head
    assert "WARNING: another process (pid 4242)" in head
    assert "may hold host latency: b (2 of 3)" in head and "a (" not in head


# --- the command line, end to end with fakes --------------------------------------------------------


class FakeGpu(FakeDevice):
    """A GPU whose copy kernels are NumPy (:class:`test_runcore.FakeDevice`), so the real worker runs the real
    copy family on it; a launch takes 50 µs. ``on_open`` / ``on_launch``: what else happens on the GPU then."""

    opened: list[int] = []
    on_open = None
    on_launch = None

    def __init__(self, index=0):
        super().__init__({"copy_naive": self._launched, "copy_shared": self._launched, "copy_vec4": self._launched,
                          "copy_block": self._launched})
        FakeGpu.opened.append(index)
        self.info = DeviceInfo(0, "Fake GPU", (9, 0), 132, 80 * 2**30, 50 * 2**20, 1980, 2619, 5120, "13.0", "13.0")
        self.launches = 0
        if FakeGpu.on_open:
            FakeGpu.on_open()

    def _launched(self, *args):
        self.launches += 1
        if FakeGpu.on_launch:
            FakeGpu.on_launch()
        good_copy(*args)

    def close(self):
        pass

    def compile(self, source, defines, names, **kw):
        return super().compile(source, defines, names)

    def time_ms(self, enqueue):
        before = self.launches
        enqueue()
        return EventTime(0.05 * (self.launches - before), True)


@pytest.fixture
def fake_cli(monkeypatch, inline_worker):
    """The command line on :class:`FakeGpu` and a fake NVML (returned), workers in-process."""
    nvml = FakeNVML()
    FakeGpu.opened = []
    FakeGpu.on_open = FakeGpu.on_launch = None
    monkeypatch.setattr(telemetry, "import_nvml", lambda: (nvml, ""))
    monkeypatch.setattr(gpu, "pci_bus_id", lambda index: "0000:01:00.0")
    monkeypatch.setattr(gpu, "Device", FakeGpu)
    return nvml


def test_exclusive_refuses_in_one_line_without_opening_the_gpu(fake_cli):
    fake_cli.pids = [4242]
    res = CliRunner().invoke(cli, ["copy", "--n", "64", "--exclusive"])
    assert res.exit_code == 2, res.output
    assert "--exclusive" in res.output and "4242" in res.output and "Traceback" not in res.output
    assert FakeGpu.opened == []


def test_lock_clocks_refused_exits_2_without_gpu_work(fake_cli):
    fake_cli.lock_error = "Insufficient Permissions"
    res = CliRunner().invoke(cli, ["copy", "--n", "64", "--lock-clocks", "1500"])
    assert res.exit_code == 2, res.output
    assert "--lock-clocks 1500" in res.output and "Traceback" not in res.output
    assert FakeGpu.opened == []


def test_lock_clocks_is_restored_after_the_run(fake_cli):
    res = CliRunner().invoke(cli, ["copy", "--n", "64", "--variant", "naive", "--no-roofline", "--lock-clocks", "1500", "--budget", "0.01"])
    assert res.exit_code == 0, res.output
    assert ("lock", 1500, 1500) in fake_cli.calls and fake_cli.calls[-1] == ("reset",)
    assert "SM clock locked at 1500 MHz" in res.output


def test_second_process_on_the_gpu_prints_a_warning_and_flags_the_row(fake_cli, tmp_path):
    FakeGpu.on_open = lambda: setattr(fake_cli, "pids", [os.getpid()])
    # someone else starts computing as our kernel runs
    FakeGpu.on_launch = lambda: setattr(fake_cli, "pids", [os.getpid(), 4242])
    out = tmp_path / "run.json"
    res = CliRunner().invoke(cli, ["copy", "--n", "64", "--variant", "naive", "--no-roofline", "--budget", "0.01", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "WARNING: another process (pid 4242) was computing on this GPU" in res.output
    assert "SM clock 1980 MHz, memory clock 2619 MHz (measured" in res.output
    data = json.loads(out.read_text())
    row = data["points"][0]["results"][0]
    assert row["extra"]["other_process"] == [4242] and row["extra"]["sm_mhz"] == 1980
    assert data["device"]["telemetry"]["other_process"] == [4242]


def test_energy_measures_sustained_power_per_row_and_needs_nvml(fake_cli, monkeypatch, tmp_path):
    out = tmp_path / "run.json"
    res = CliRunner().invoke(cli, ["copy", "--n", "64", "--variant", "naive", "--no-roofline", "--budget", "0.01", "--energy",
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    extra = json.loads(out.read_text())["points"][0]["results"][0]["extra"]
    assert extra["sustained_w"] > 0 and extra["energy_span_s"] >= 1.0
    assert extra["energy_mj_per_launch"] == pytest.approx(extra["sustained_w"] * 0.05)   # W x 0.05 ms
    assert extra["gb_per_j"] > 0
    assert "W busy" in res.output and "--energy: W busy" in res.output
    plain = tmp_path / "plain.json"
    res = CliRunner().invoke(cli, ["copy", "--n", "64", "--variant", "naive", "--no-roofline", "--budget", "0.01", "--json", str(plain)])
    assert "sustained_w" not in json.loads(plain.read_text())["points"][0]["results"][0]["extra"]
    monkeypatch.setattr(telemetry, "import_nvml", lambda: (None, "nvidia-ml-py is not installed"))
    res = CliRunner().invoke(cli, ["copy", "--n", "64", "--energy"])
    assert res.exit_code == 2 and "--energy needs NVML" in res.output and "Traceback" not in res.output


def test_throttle_reasons_fall_back_to_the_older_nvml_name():
    class OldDriver(FakeNVML):
        def nvmlDeviceGetCurrentClocksEventReasons(self, h):
            raise self.NVMLError("Function Not Found")

        def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
            return 0x40

    tele = Telemetry(OldDriver(), "handle", our_pid=OUR)
    assert tele.poll().reasons == 0x40 and tele.poll().reasons == 0x40


def test_a_window_takes_a_recent_process_list_instead_of_asking_nvml_twice():
    # the process list is NVML's slowest call (~18 ms on an H200): two a window were a third of a tuning trial
    nvml = FakeNVML(pids=[222])
    calls = []
    real = nvml.nvmlDeviceGetComputeRunningProcesses
    nvml.nvmlDeviceGetComputeRunningProcesses = lambda h: calls.append(1) or real(h)
    tele = Telemetry(nvml, "handle", our_pid=OUR)
    tele.others()
    before = len(calls)
    for _ in range(5):
        w = tele.window()
        w._loop = lambda: None  # the poller's own process checks are not this test's
        assert w.start().stop().other_pids == (222,)
    assert len(calls) == before  # the answer asked a moment ago served every window
    tele._others_at -= 10  # an answer older than PROCESS_MAX_AGE_S is asked again
    tele.window().start().stop()
    assert len(calls) > before
