"""GPU busy % (issue 43's live line): NVML's utilization polled from the parent in a thread, on a fake NVML; no
figure rather than an error when NVML cannot say; ``cudalab tune`` shows it live and in its result."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from cudalab.instruments.busy import BusyMeter, gpu_of


class FakeNvml:
    def __init__(self, values, refuse_every=0):
        self.values, self.refuse_every, self.calls, self.shut = list(values), refuse_every, 0, False

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802  (NVML's name)
        assert handle == "gpu0"
        self.calls += 1
        if self.refuse_every and self.calls % self.refuse_every == 0:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return SimpleNamespace(gpu=self.values[(self.calls - 1) % len(self.values)], memory=0)

    def nvmlShutdown(self):  # noqa: N802
        self.shut = True


def _run(meter: BusyMeter, polls: int) -> BusyMeter:
    meter.start()
    deadline = time.monotonic() + 5
    # a meter whose thread ended (no NVML: nothing to poll) gets no more readings: waiting on was 5 s a test
    while meter.readings < polls and time.monotonic() < deadline and meter._thread.is_alive():
        time.sleep(0.005)
    meter.stop()
    return meter


def test_the_mean_of_the_polls_and_nvml_shut_after():
    nvml = FakeNvml([100, 50])
    m = _run(BusyMeter(lambda: (nvml, "gpu0"), period_s=0.01), 4)
    assert m.readings >= 4 and 70 <= m.percent <= 80 and nvml.shut


def test_a_refused_poll_is_left_out_not_counted_idle():
    nvml = FakeNvml([90], refuse_every=2)
    m = _run(BusyMeter(lambda: (nvml, "gpu0"), period_s=0.01), 3)
    assert m.percent == 90 and nvml.calls > m.readings


@pytest.mark.parametrize("opener", [lambda: None, lambda: 1 / 0])
def test_no_nvml_no_figure_and_no_error(opener):
    m = _run(BusyMeter(opener, period_s=0.01), 1)
    assert m.percent is None and m.readings == 0


def test_one_reading_is_not_a_figure():
    m = BusyMeter(lambda: (FakeNvml([40]), "gpu0"), period_s=0.01)
    m._readings.append(40)
    assert m.percent is None


def test_tune_shows_gpu_busy_live_and_records_it(fake_workers, tmp_path, monkeypatch, invoke):
    pytest.importorskip("optuna")
    from cudalab.execute.local import engine

    fake_workers({"_ms": "1 + abs(UNROLL - 5) / 10", "_delay": 0.05})
    nvml = FakeNvml([80, 60])
    asked = []
    monkeypatch.setattr(engine, "gpu_of", lambda pids: asked.append(pids()) or (nvml, "gpu0"))
    monkeypatch.setattr("cudalab.instruments.busy.PERIOD_S", 0.01)
    monkeypatch.setattr(BusyMeter.__init__, "__defaults__", (0.01,))
    monkeypatch.chdir(tmp_path)
    res = invoke("tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8", "--block", "256",
                 "--trials", "8", "--seed", "2", "--build-ahead", "0", "--race", "0", "--json", "t.json")
    assert res.exit_code == 0, res.output
    assert "GPU busy 70%" in res.stderr and "; GPU busy 70% while they ran (NVML)" in res.stdout
    assert json.loads((tmp_path / "t.json").read_text())["tune"]["gpu_busy_pct"] == pytest.approx(70, abs=10)
    assert asked and all(isinstance(p, int) for p in asked[0])  # the workers' pids, to find their GPU by


class TwoGpus:
    """NVML of two GPUs; our worker (pid 42) shows on the second after ``late`` looks."""

    def __init__(self, late=2, hide=False, count=2):
        self.looks, self.late, self.hide, self.count, self.shut = 0, late, hide, count, False

    def nvmlDeviceGetCount(self):  # noqa: N802
        return self.count

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return f"gpu{i}"

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        if self.hide:
            raise RuntimeError("NVML_ERROR_NO_PERMISSION")
        if h == "gpu0":
            self.looks += 1
            return [SimpleNamespace(pid=7)]          # another process, on the other GPU
        return [SimpleNamespace(pid=42)] if self.looks > self.late else []

    def nvmlShutdown(self):  # noqa: N802
        self.shut = True


def test_the_gpu_is_the_one_the_worker_computes_on_found_when_its_context_appears():
    nvml = TwoGpus(late=2)
    assert gpu_of(lambda: {42}, wait_s=10, nvml=nvml, sleep=lambda s: None) == (nvml, "gpu1")
    assert nvml.looks == 3 and not nvml.shut


def test_one_gpu_needs_no_looking_and_a_hidden_list_gives_no_figure():
    one = TwoGpus(hide=True, count=1)
    assert gpu_of(lambda: {42}, nvml=one) == (one, "gpu0")
    hidden = TwoGpus(hide=True)
    assert gpu_of(lambda: {42}, wait_s=0, nvml=hidden, sleep=lambda s: None) is None and hidden.shut
    never = TwoGpus(late=10**9)
    assert gpu_of(lambda: {42}, wait_s=0, nvml=never, sleep=lambda s: None) is None


# --- where a campaign's time goes (tuning/account.py) ---------------------------------------------------------

def test_the_account_adds_each_bucket_and_says_it_in_one_line():
    from cudalab.tuning.account import TimeAccount, describe

    now = [100.0]
    acct = TimeAccount(clock=lambda: now[0])
    for bucket, s in (("trials", 30.0), ("builds", 2.0), ("search", 1.0), ("trials", 0.5), ("race", 0.0)):
        with acct.timed(bucket):
            now[0] += s
    d = acct.to_dict()
    assert d == {"trials": 30.5, "builds": 2.0, "search": 1.0, "race": 0.0, "wall": 33.5, "in_workers": 0.0}
    assert describe(d, 62.4) == ("where the time went (33.5 s): trials in the worker 30.5 s (GPU busy 62%), "
                                 "waiting for builds 2.0 s, search and storage 1.0 s")


def test_a_campaign_accounts_for_its_trials_its_build_waits_and_its_search(fake_workers, tmp_path, monkeypatch, invoke):
    """Builds the pool has not finished when their trial's turn comes are waited for in the parent, timed as
    'waiting for builds'; the trials' time is the workers'; the buckets do not exceed the wall time."""
    pytest.importorskip("optuna")
    from cudalab.tuning import runs

    fake_workers({"_ms": "1 + abs(UNROLL - 5) / 10", "_delay": 0.1})
    monkeypatch.setattr(runs, "build_of", lambda req, arch: (lambda: time.sleep(0.3)))  # a slow nvcc
    monkeypatch.chdir(tmp_path)
    res = invoke("tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8", "--block", "256",
                 "--trials", "6", "--seed", "2", "--build-ahead", "1", "--race", "0", "--json", "t.json")
    assert res.exit_code == 0, res.output
    t = json.loads((tmp_path / "t.json").read_text())["tune"]["time"]
    assert t["trials"] >= 6 * 0.1 and t["builds"] >= 0.3 and t["in_workers"] >= 6 * 0.1, t
    assert t["trials"] + t["builds"] + t["search"] + t["race"] <= t["wall"] + 0.01
    assert "where the time went" in res.stdout and "waiting for builds" in res.stdout


def test_the_closing_lines_fit_a_120_column_terminal_without_splitting_a_number(fake_workers, tmp_path, monkeypatch,
                                                                                 invoke):
    """On a terminal the closing lines (trials, where the time went, the winner with its ties) fold at words to its
    width: long configuration names and GPU busy make them longer than 120 columns."""
    pytest.importorskip("optuna")
    from cudalab import report
    from cudalab.report.console import CleanConsole
    from cudalab.execute.local import engine

    fake_workers({"_ms": "1 + abs(UNROLL - 5) / 10", "_delay": 0.02})
    nvml = FakeNvml([80, 60])
    monkeypatch.setattr(engine, "gpu_of", lambda pids: (nvml, "gpu0"))
    monkeypatch.setattr(BusyMeter.__init__, "__defaults__", (0.01,))
    monkeypatch.setattr(report, "console", lambda stderr=False: CleanConsole(width=120, soft_wrap=False))
    monkeypatch.chdir(tmp_path)
    res = invoke("tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8",
                 "-D", "A_RATHER_LONG_DEFINE_NAME=1,2", "--block", "256", "--trials", "8", "--seed", "2",
                 "--build-ahead", "0")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if not ln.startswith("rerun:")]  # a command stays one line
    assert max(len(ln) for ln in lines) <= 120, [ln for ln in lines if len(ln) > 120]
    text = " ".join(ln.strip() for ln in res.stdout.splitlines())
    assert "GPU busy 70% while they ran" in text and "where the time went" in text and "winner after" in text


def test_the_live_line_is_one_terminal_line_and_the_parameters_give_way_not_the_figures(monkeypatch, capsys):
    """On a terminal the live line is rewritten in place ("\\r"): a line longer than the terminal would leave its
    second half behind on every update. The best's parameters are shortened; the figures stay whole."""
    from cudalab.cli import tune as T

    live = T._Live(quiet=False)
    live.tty = True
    monkeypatch.setattr(T._Live, "width", staticmethod(lambda: 120))
    best = SimpleNamespace(values=(2.78791,), point={f"WT_PARAMETER_{i}": str(64 * i) for i in range(12)})
    live("trial", {"done": 17, "budget": 40, "best": best, "builds": 3, "elapsed": 34.0, "gpu_busy": 87.4})
    line = capsys.readouterr().err.split("\r")[-1].replace("\033[K", "")  # click drops the escape off a tty
    assert len(line) <= 119, line
    assert line.startswith("[17/40] best 2.788 (WT_PARAMETER_0=0") and "…)" in line
    assert line.endswith(" · builds queued 3 · GPU busy 87% · ETA 0:46")
