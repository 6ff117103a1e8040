"""The parent's side of the GPU workers, driven by fake workers on the CPU: a worker that dies, hangs,
sends half a row or loses its context costs one row; the rest, the roofline and the saved files stay."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from cudalab.cli import cli
from cudalab.records.results import load_record
from cudalab.execute.local.drive import Session
from cudalab.worker.protocol import decode, encode, pack_array, unpack_array

VARIANTS = "naive,shared,block,bankopt"


def run_cli(args, tmp_path):
    out = tmp_path / "run.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "256", "--variant", VARIANTS, "--json", str(out), *args])
    return res, out


def rows_of(path):
    rec = load_record(path)
    return {r.variant: r for _, r in rec.rows()}, rec


@pytest.mark.parametrize("behaviour,status,words", [
    ("die", "failed", "killed by SIGSEGV"),
    ("half", "failed", "exit code 1"),
    ("lost", "failed", "illegal memory access"),
])
def test_a_worker_that_dies_costs_one_row_and_a_fresh_worker_goes_on(fake_workers, tmp_path, behaviour, status, words):
    use = fake_workers({"shared": behaviour})
    res, out = run_cli([], tmp_path)
    assert res.exit_code == 1, res.output
    rows, rec = rows_of(out)
    assert list(rows) == VARIANTS.split(",")  # every row, in order
    assert rows["shared"].status.value == status and words in rows["shared"].reason
    assert all(rows[v].status.value == "passed" for v in ("naive", "block", "bankopt"))
    assert len(use.started) == 2  # one fresh worker after the fault
    assert rec.points[0].roofline is not None and rows["bankopt"].pct_roofline == pytest.approx(50.0)
    assert rec.incomplete is False
    assert "Traceback" not in res.output


def test_a_hung_kernel_is_a_timeout_row_and_the_run_goes_on(fake_workers, tmp_path):
    use = fake_workers({"block": "hang"})
    t0 = time.monotonic()
    res, out = run_cli(["--timeout", "0.5"], tmp_path)
    assert time.monotonic() - t0 < 20
    assert res.exit_code == 1, res.output
    rows, rec = rows_of(out)
    assert rows["block"].status.value == "timeout" and "did not finish" in rows["block"].reason
    assert rows["bankopt"].status.value == "passed" and rec.points[0].roofline is not None
    assert len(use.started) == 2
    assert use.started[0].proc.poll() is not None  # the hung worker was killed


def test_beats_keep_a_long_kernel_alive(fake_workers, tmp_path):
    fake_workers({"block": "slow"})  # 1 s of beats every 0.1 s under a 0.5 s limit
    res, out = run_cli(["--timeout", "0.5"], tmp_path)
    assert res.exit_code == 0, res.output
    assert rows_of(out)[0]["block"].status.value == "passed"


def test_the_default_limit_grows_with_the_slowest_passed_row():
    s = Session([0], spawn=lambda d, e: None)
    assert s.limit_s() == 10.0
    s._slowest_ms = 500.0
    assert s.limit_s() == 50.0
    assert Session([0], timeout=3.0, spawn=lambda d, e: None).limit_s() == 3.0


def test_a_roofline_that_dies_keeps_the_rows(fake_workers, tmp_path):
    fake_workers({"roofline": "die"})
    res, out = run_cli([], tmp_path)
    assert res.exit_code == 0, res.output
    rows, rec = rows_of(out)
    assert all(r.status.value == "passed" for r in rows.values())
    assert rec.points[0].roofline is None and "died" in rec.points[0].roofline_note
    assert "roofline unavailable" in res.output


def test_a_worker_that_cannot_open_its_gpu_is_one_line_exit_2(fake_workers, tmp_path):
    fake_workers({"_open": "error"})
    res, out = run_cli([], tmp_path)
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == ["cudalab: no CUDA GPU found (fake)"]
    assert not out.exists()


def test_bad_input_kills_the_early_worker(fake_workers, tmp_path):
    use = fake_workers({})
    res = CliRunner().invoke(cli, ["transpose", "--n", "-5"])
    assert res.exit_code == 2
    assert use.started and all(w.proc.wait(timeout=5) is not None for w in use.started)


def test_an_interrupt_keeps_a_row_the_parent_had_not_read_yet(fake_workers, tmp_path, monkeypatch):
    """The worker sent naive's row, then the interrupt came before the parent read it (a busy machine: it
    was still in the pipe). Here the parent reads nothing more from the worker until the session kills it."""
    from cudalab.execute.local import process as P

    fake_workers({"shared": "sigterm"})
    real = P.spawn

    class Unread:
        def __init__(self, worker):
            self.worker, self.held, self.killed, self.released = worker, None, threading.Event(), False

        def next(self, timeout):
            if self.held is None:  # up to the first row, as ever
                ev = self.worker.next(timeout)
                if ev is None or ev["ev"] != "row":
                    return ev
                self.held = [ev]
            if not self.released:  # from the row on nothing, the poll the kill ends included
                self.released = self.killed.wait(timeout)
                return None
            return self.held.pop(0) if self.held else self.worker.next(timeout)

        def kill(self):
            self.killed.set()
            self.worker.kill()

        def __getattr__(self, name):
            return getattr(self.worker, name)

    monkeypatch.setattr(P, "spawn", lambda device, energy=False: Unread(real(device, energy)))
    res, out = run_cli([], tmp_path)
    assert res.exit_code == 143, res.output
    data = json.loads(out.read_text())
    assert data["incomplete"] is True and [r["variant"] for r in data["points"][0]["results"]] == ["naive"]


def test_json_is_written_as_rows_arrive(fake_workers, tmp_path):
    fake_workers({"bankopt": "hang"})
    out = tmp_path / "run.json"
    seen = []

    def watch():
        while not seen:
            if out.exists():
                data = json.loads(out.read_text())
                names = [r["variant"] for p in data["points"] for r in p["results"]]
                if "block" in names:
                    seen.append((data["incomplete"], names))
            time.sleep(0.05)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    CliRunner().invoke(cli, ["transpose", "--n", "256", "--variant", VARIANTS, "--json", str(out), "--timeout", "1"])
    t.join(5)
    assert seen and seen[0][0] is True  # saved while the run still went on, marked incomplete
    assert seen[0][1][:3] == ["naive", "shared", "block"]
    assert json.loads(out.read_text())["incomplete"] is False  # the final record


def test_devices_spread_points_over_workers_and_a_fault_stays_on_its_gpu(fake_workers, tmp_path):
    use = fake_workers({"_count": 2, "block": "die"})
    out = tmp_path / "run.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "256,512,1k,2k", "--variant", "naive,block",
                                   "--devices", "all", "--json", str(out)])
    assert res.exit_code == 1, res.output
    rec = load_record(out)
    assert len(rec.points) == 4 and {p.device for p in rec.points} == {0, 1}
    for p in rec.points:
        got = {r.variant: r.status.value for r in p.results}
        assert got == {"naive": "passed", "block": "failed"}
    assert len(rec.device["devices"]) == 2
    assert {w.device for w in use.started} == {0, 1}


@pytest.mark.parametrize("text", ["0,0", "-1", "x", ""])
def test_bad_devices_are_one_line(fake_workers, text):
    fake_workers({})
    res = CliRunner().invoke(cli, ["transpose", "--n", "256", "--devices", text])
    assert res.exit_code == 2 and res.output.startswith("cudalab: --devices")
    assert len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_bad_timeout_is_one_line(fake_workers, value):
    fake_workers({})
    res = CliRunner().invoke(cli, ["transpose", "--n", "256", "--timeout", value])
    assert res.exit_code == 2 and "--timeout" in res.output


def test_messages_survive_only_whole():
    assert decode(encode({"ev": "row", "row": {"variant": "x"}})) == {"ev": "row", "row": {"variant": "x"}}
    assert decode(b'{"ev":"row","row":{"variant":"x"') is None  # half a line
    assert decode(b'{"ev":"row","row":{"variant":"x"\n') is None  # a cut line, newline or not
    assert decode(b"[1,2]\n") is None and decode(b"garbage\n") is None
    import numpy as np

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert (unpack_array(pack_array(a)) == a).all()


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_hung_kernel_ends_the_run_in_2_s_keeping_the_json(tmp_path, signum, code):
    """A real ``cudalab`` process, its worker a fake that hangs on the second variant."""
    out = tmp_path / "run.json"
    script = (
        "import sys, json, os\n"
        "sys.path.insert(0, %r)\n"
        "from cudalab.execute.local import process as W\n"
        "import fake_workers as F\n"
        "W.spawn = lambda d, e=False: W.WorkerProcess(d, argv=lambda fd: [sys.executable, F.FAKE_MAIN, '--fd', str(fd)])\n"
        "from cudalab.cli import main\n"
        "sys.argv = ['cudalab', 'transpose', '--n', '256', '--variant', 'naive,shared,block', '--json', %r]\n"
        "main()\n" % (os.path.dirname(__file__), str(out)))
    env = dict(os.environ, FAKE_WORKER=json.dumps({"shared": "hang"}))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    from fake_workers import signal_once_saved, still_running

    took, stdout, stderr, workers = signal_once_saved(proc, out, "naive", signum, 30, 0.3, 10)
    assert took < 2.0
    assert proc.returncode == code, stderr
    data = json.loads(out.read_text())
    assert data["incomplete"] is True
    assert [r["variant"] for p in data["points"] for r in p["results"]] == ["naive"]
    assert "INCOMPLETE" in stdout and "Traceback" not in stderr
    assert workers and not still_running(workers)  # the hung worker was killed, not left behind


def test_info_asks_a_worker_and_holds_no_context_itself(fake_workers):
    use = fake_workers({"_count": 2})
    res = CliRunner().invoke(cli, ["info"])
    assert res.exit_code == 0, res.output
    assert "Fake GPU 0" in res.output and "Fake GPU 1" in res.output and "200" in res.output
    assert "largest --n, GPU 1" in res.output
    assert all(w.proc.wait(timeout=5) is not None for w in use.started)  # each said bye and ends by itself


def test_info_without_a_gpu_is_one_line(fake_workers):
    fake_workers({"_open": "error"})
    res = CliRunner().invoke(cli, ["info"])
    assert res.exit_code == 2 and res.output.strip().splitlines() == ["cudalab: no CUDA GPU found (fake)"]


@pytest.mark.parametrize("argv,plan", [
    (["transpose", "--n", "4k"], (0, False)),
    (["--debug", "reduce", "--all", "--device", "1"], (1, False)),
    (["copy", "--device=2", "--energy"], (2, True)),
    (["info"], (0, False)),
    (["list"], None), (["compile", "transpose"], None), (["report", "x.json"], None), (["ncu", "smem-square"], None),
    (["transpose", "--help"], None), (["transpose", "--devices", "0,1"], None), (["transpose", "--exclusive"], None),
    (["transpose", "--lock-clocks", "1500"], None), (["transpose", "--device", "x"], None),
    (["transpose", "--device", "\u00b2"], None), (["transpose", "--device=\u0663"], None), ([], None), (["--version"], None),
])
def test_which_command_lines_start_a_worker_before_parsing(argv, plan):
    from cudalab.execute.local import process as P

    assert P.early_plan(argv) == plan


def test_a_prestarted_worker_is_the_one_the_run_uses_and_an_unused_one_is_killed(monkeypatch):
    from cudalab.execute.local import process as P

    made = []

    class Fake:
        def __init__(self, device, energy=False):
            self.device, self.energy, self.killed = device, energy, False
            self.proc = type("P", (), {"poll": staticmethod(lambda: None)})()
            made.append(self)

        def kill(self):
            self.killed = True

    monkeypatch.setattr(P, "WorkerProcess", Fake)
    monkeypatch.setattr(P, "_EARLY", {})
    P.prestart(["transpose", "--device", "1"])
    assert [(w.device, w.energy) for w in made] == [(1, False)]
    assert P.spawn(1, False) is made[0] and len(made) == 1  # taken, not started again
    assert P.spawn(1, False) is not made[0] and len(made) == 2  # a fresh one after that
    P.prestart(["reduce"])
    P._kill_unused()
    assert made[2].killed and not made[0].killed


def test_a_gpu_whose_worker_cannot_open_leaves_its_points_to_the_others(fake_workers, tmp_path, monkeypatch):
    """GPU 1's worker says it cannot open its GPU only after GPU 0 has run the other points (held back until
    their rows are saved): the order a loaded machine gave, where GPU 0 had quit and the point was lost."""
    from cudalab.execute.local import process as P

    fake_workers({})
    real = P.spawn
    out = tmp_path / "run.json"

    class Late:
        """GPU 1's worker: its events wait until two rows are saved (GPU 0 ran the other points), then 0.3 s
        more, in which a GPU 0 that thought the run over would have closed its worker."""

        def __init__(self, worker):
            self.worker, self.since = worker, None

        def next(self, timeout):
            if self.since is None and out.is_file() and out.read_text().count('"status"') >= 2:
                self.since = time.monotonic()
            if self.since is None or time.monotonic() - self.since < 0.3:
                time.sleep(0.05)
                return None
            return self.worker.next(timeout)

        def __getattr__(self, name):
            return getattr(self.worker, name)

    def spawn(device, energy=False):
        if device == 1:
            monkeypatch.setenv("FAKE_WORKER", json.dumps({"_open": "error"}))
            try:
                return Late(real(device, energy))
            finally:
                monkeypatch.setenv("FAKE_WORKER", "{}")
        return real(device, energy)

    monkeypatch.setattr(P, "spawn", spawn)
    res = CliRunner().invoke(cli, ["transpose", "--n", "256,512,1k", "--variant", "naive", "--devices", "0,1",
                                   "--json", str(out)])
    rec = load_record(out)
    assert [p.device for p in rec.points] == [0, 0, 0], res.output  # GPU 1's point went to GPU 0
    assert all(r.status.value == "passed" for _, r in rec.rows())
    assert res.exit_code == 0 and not rec.incomplete
    assert "warning: no CUDA GPU found (fake)" in res.stderr


@pytest.mark.parametrize("env,count", [("0,1", 2), ("1", 1), ("0,1,-1,2", 2), ("", None), ("GPU-abc,GPU-def", 2)])
def test_visible_gpus_reads_cuda_visible_devices(monkeypatch, env, count):
    from cudalab.execute.local import process as P

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", env)
    assert P.visible_gpus() == count


def test_devices_all_starts_every_worker_at_once_and_drops_a_wrong_guess(fake_workers, tmp_path, monkeypatch):
    from cudalab.execute.local import process as P

    use = fake_workers({"_count": 2})
    monkeypatch.setattr(P, "visible_gpus", lambda: 3)  # NVML sees 3, CUDA (the worker) 2
    out = tmp_path / "run.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "256,512,1k,2k", "--variant", "naive", "--devices", "all",
                                   "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert sorted(w.device for w in use.started) == [0, 1, 2]  # all started before the first said 2
    assert {p.device for p in load_record(out).points} <= {0, 1} and use.started[2].proc.poll() is not None


def test_host_work_beats_from_a_helper_thread_and_stops_after(monkeypatch):
    """A point's inputs and reference at the largest sizes take longer than the watchdog's first 10 s
    (matmul 46340^3 was killed as hung on an H100): host work beats on its own, and only inside."""
    import time

    from cudalab.worker import heartbeat

    monkeypatch.setattr(heartbeat, "EVERY_S", 0.1)  # the same behaviour, 2.25 s of waiting cut to 0.9 s
    beats = []
    heartbeat.install(lambda: beats.append(time.monotonic()))
    try:
        with heartbeat.host_work():
            time.sleep(6 * heartbeat.EVERY_S)
        inside = len(beats)
        time.sleep(3 * heartbeat.EVERY_S)
        assert inside >= 3 and len(beats) == inside, beats
    finally:
        heartbeat.install(None)


def test_close_returns_at_the_bye_and_the_next_worker_of_that_gpu_waits_for_the_last(monkeypatch):
    """The table does not wait for a context's tear-down; a new worker on the same GPU does (its memory)."""
    import time

    from cudalab.execute.local import process as P

    monkeypatch.setenv("FAKE_WORKER", '{"_exit": "linger"}')
    monkeypatch.setattr(P, "_ENDING", [])
    from fake_workers import FAKE_MAIN

    argv = lambda fd: [sys.executable, FAKE_MAIN, "--fd", str(fd)]  # noqa: E731
    w = P.WorkerProcess(0, argv=argv, echo=None)
    assert w.next(10)["ev"] == "ready"
    t0 = time.monotonic()
    assert w.close()["ev"] == "bye"
    assert time.monotonic() - t0 < 1.0 and w.proc.poll() is None and P._ENDING == [w]
    P.reap(1)  # another GPU's: not waited for
    assert w.proc.poll() is None
    P.reap(0)
    assert w.proc.poll() is not None and P._ENDING == []
