"""Throttled samples (issue 46, item 4): which samples NVML saw held back, how many the row says, and
``--drop-throttled`` leaving them out of the statistics (fake NVML, fake GPU)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from cudalab import report
from cudalab.bench import Protocol, summarize
from cudalab.cli import cli
from cudalab.instruments.readings import Poll, throttled_samples
from cudalab.instruments.telemetry import Telemetry
from cudalab.records.results import PASSED, Result
from cudalab.worker.sampling import Timing, throttle_marks
from fake_nvml import FakeNVML
from test_telemetry import fake_cli  # noqa: F401  (the fixture)

NOMINAL = 1980


def test_a_poll_is_throttled_by_a_power_or_thermal_reason_or_a_slow_busy_clock():
    assert not Poll(sm_mhz=1980).throttled(NOMINAL)
    assert not Poll(sm_mhz=1500).throttled(NOMINAL)          # 76%: above the line
    assert Poll(sm_mhz=1480).throttled(NOMINAL)              # 74.7%: under it
    assert not Poll(sm_mhz=345, reasons=0x1).throttled(NOMINAL)   # idle between samples: not held against them
    assert not Poll(sm_mhz=1400).throttled(None)             # no nominal: only the reasons count
    for bit in (0x4, 0x8, 0x20, 0x40, 0x80):
        assert Poll(sm_mhz=1980, reasons=bit).throttled(NOMINAL), hex(bit)
    assert not Poll(sm_mhz=1980, reasons=0x2 | 0x10 | 0x100).throttled(NOMINAL)   # settings, not throttles


def test_samples_are_judged_by_the_polls_inside_them_and_the_last_one_before():
    polls = [Poll(sm_mhz=1980, t=0.0), Poll(sm_mhz=1000, t=1.0), Poll(sm_mhz=1980, t=2.0), Poll(reasons=0x40, t=5.0)]
    spans = [(0.1, 0.2),   # only poll 0 before it: fine
             (0.5, 1.5),   # poll 1 inside: slow clock
             (1.2, 1.3),   # none inside, poll 1 the last before: throttled
             (2.1, 4.9),   # poll 2 before, nothing inside: fine
             (4.0, 6.0),   # poll 4 (thermal) inside
             (-1.0, -0.5)]  # before any poll: nothing known, not throttled
    assert throttled_samples(polls, spans, NOMINAL) == [False, True, True, False, True, False]


def test_nominal_is_the_locked_clock_else_the_default_application_clock_else_the_maximum():
    class Clocks(FakeNVML):
        default = 1755

        def nvmlDeviceGetDefaultApplicationsClock(self, h, which):
            if self.default is None:
                raise self.NVMLError("Not Supported")
            return self.default

        def nvmlDeviceGetMaxClockInfo(self, h, which):
            return 1980

    assert Telemetry(Clocks(), "h", our_pid=1).nominal_mhz() == 1755
    nvml = Clocks()
    nvml.default = None
    tele = Telemetry(nvml, "h", our_pid=1)
    assert tele.nominal_mhz() == 1980
    tele.lock_clocks(1200)
    assert tele.nominal_mhz() == 1200
    assert Telemetry(FakeNVML(), "h", our_pid=1).nominal_mhz() is None   # NVML says none


class Window:
    def __init__(self, flags):
        self.flags = flags

    def throttled(self, spans):
        assert len(spans) == len(self.flags)
        return self.flags


def _timing(samples):
    return Timing(summarize(samples), "max", spans=tuple((i, i + 0.5) for i in range(len(samples))))


def test_throttle_marks_count_and_drop_only_when_asked():
    t = _timing([1.0, 1.0, 5.0, 1.0, 5.0])
    flags = [False, False, True, False, True]
    stats, marks = throttle_marks(Window(flags), t, drop=False)
    assert marks == {"throttled": 2} and stats is t.stats
    stats, marks = throttle_marks(Window(flags), t, drop=True)
    assert marks == {"throttled": 2, "throttled_dropped": 2}
    assert stats.n == 3 and stats.samples == (1.0, 1.0, 1.0) and stats.median == 1.0
    stats, marks = throttle_marks(Window([True] * 5), t, drop=True)   # every sample throttled: nothing left
    assert stats is t.stats and marks["throttled"] == 5 and "none dropped" in marks["throttled_note"]
    stats, marks = throttle_marks(Window([False] * 5), t, drop=True)
    assert stats is t.stats and marks == {"throttled": 0}
    stats, marks = throttle_marks(Window([]), Timing(summarize([1.0]), "host"), drop=True)   # no spans
    assert marks == {} and stats.n == 1


def test_table_shows_the_throttled_column_and_the_legend_only_when_a_sample_was():
    calm = Result("a", "kernel", PASSED, stats=summarize([0.1] * 4), max_error=0.0, extra={"throttled": 0})
    hot = Result("b", "kernel", PASSED, stats=summarize([0.1] * 4), max_error=0.0,
                 extra={"throttled": 3, "throttled_dropped": 3})
    con = report.console()
    for rows, shown in (([calm], False), ([calm, hot], True)):
        with con.capture() as cap:
            con.print(report.results_table(rows, "none", wide=False))
        assert ("throttled" in cap.get()) is shown
        head = "\n".join(report.header_lines(None, "t", "p", Protocol(), None, rows))
        assert ("throttled = samples taken while" in head) is shown
    assert "3 dropped" in cap.get() and "b 3; left out of the statistics" in head


def _run(tmp_path, *extra):
    out = tmp_path / "run.json"
    res = CliRunner().invoke(cli, ["copy", "--n", "64", "--variant", "naive", "--no-roofline", "--budget", "0.01",
                                   "--json", str(out), *extra])
    assert res.exit_code == 0, res.output
    return res.output, json.loads(out.read_text())["points"][0]


def test_a_run_on_a_throttled_gpu_counts_every_sample(fake_cli, tmp_path):
    fake_cli.reasons = [0x40]   # hw-thermal the whole run
    out, point = _run(tmp_path)
    row = point["results"][0]
    assert row["extra"]["throttled"] == row["stats"]["n"] > 0
    assert "throttled = samples taken while" in out and "kept in the statistics" in out
    out, point = _run(tmp_path, "--drop-throttled")
    assert "every sample was throttled: none dropped" == point["results"][0]["extra"]["throttled_note"]
    assert point["protocol"]["drop_throttled"] is True


def test_a_calm_gpu_counts_none_and_shows_no_column(fake_cli, tmp_path):
    out, point = _run(tmp_path)
    assert point["results"][0]["extra"]["throttled"] == 0
    assert "throttled" not in out


def test_drop_throttled_leaves_the_flagged_samples_out_of_the_row(fake_cli, tmp_path, monkeypatch):
    from cudalab.instruments import telemetry

    # every other sample throttled (the polls' timing is the thread's: here the judgement is set)
    monkeypatch.setattr(telemetry.Window, "throttled", lambda self, spans: [i % 2 == 0 for i in range(len(spans))])
    _, point = _run(tmp_path, "--min-samples", "10")
    kept = point["results"][0]
    assert kept["extra"]["throttled"] == (kept["stats"]["n"] + 1) // 2 and "throttled_dropped" not in kept["extra"]
    _, point = _run(tmp_path, "--min-samples", "10", "--drop-throttled")
    row = point["results"][0]
    total = row["stats"]["n"] + row["extra"]["throttled_dropped"]
    assert row["extra"]["throttled"] == row["extra"]["throttled_dropped"] == (total + 1) // 2
    assert row["stats"]["n"] == total // 2 >= 5
