"""cudalab tune on the CPU: the space, the strategies, campaigns that resume, racing and replay, driven end
to end by fake GPU workers (tests/fake_worker_main.py: a row's time is ``_ms`` over the point's defines)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cudalab
from cudalab.errors import UsageError
from cudalab.tuning import race as R
from cudalab.tuning import strategy as S
from cudalab.tuning.space import Dim, Space, parse_values

optuna = pytest.importorskip("optuna")

MS = "1 + abs(UNROLL - 5) / 10 + abs(threads - 256) / 1000"  # best: UNROLL=5, block 256
SPACE = dict(n="1k", defines={"UNROLL": "1..8"}, block="64..1024:pow2", require=["threads * UNROLL <= 4096"])


def test_values_lists_ranges_and_powers_of_two():
    assert parse_values("8,16,32", "-D X") == (("8", "16", "32"), False)
    assert parse_values("2..5", "-D X") == (("2", "3", "4", "5"), False)
    assert parse_values("8..64:pow2", "-D X") == (("8", "16", "32", "64"), True)
    assert parse_values("0..10:5", "-D X") == (("0", "5", "10"), False)
    for bad, why in (("9..8", "no values"), ("5..7:pow2", "no values"), ("1,,2", "empty entry"), ("1,1", "twice")):
        with pytest.raises(UsageError, match=why):
            parse_values(bad, "-D X")


def test_constraints_refuse_points_and_unknown_names():
    s = Space((Dim("A", "define", ("1", "2", "4")), Dim("block", "block", ("32x8", "64x8"))),
              require=("A * threads <= 512",))
    assert [p for p in s.valid_points()] == [{"A": "1", "block": "32x8"}, {"A": "1", "block": "64x8"},
                                              {"A": "2", "block": "32x8"}]
    assert s.allows({"A": "4", "block": "32x8"}) == "A * threads <= 512"
    with pytest.raises(UsageError, match="unknown name 'B'"):
        Space(s.dims, require=("B > 1",)).check()
    assert s.fingerprint({"n": "1k"}) != s.fingerprint({"n": "2k"})


@pytest.mark.parametrize("values,pow2", [(("1", "2", "3"), False), (("8", "16", "32"), True), (("3", "7", "9"), False),
                                         (("float", "half"), False)])
def test_encode_decode_round_trip(values, pow2):
    s = Space((Dim("X", "define", values, pow2),))
    for v in values:
        assert S.decode(s, S.encode(s, {"X": v})) == {"X": v}
    dist = S.distributions(s)["X"]
    assert type(dist).__name__ == ("CategoricalDistribution" if values[0] == "float" else "IntDistribution")


def tune(storage, **kw):
    args = {**SPACE, "seed": 1, "build_ahead": 0, "storage": f"sqlite:///{storage}", **kw}
    return cudalab.tune("copy", "vec4", **args)


@pytest.fixture
def fake(fake_workers, tmp_path, monkeypatch):
    log = tmp_path / "ops.log"
    monkeypatch.setenv("FAKE_WORKER_LOG", str(log))

    def use(how=None):
        fake_workers({"_ms": MS, **(how or {})})
        return lambda: log.read_text().split().count("point") if log.exists() else 0

    return use


def test_grid_measures_every_valid_point_once_and_names_the_best(fake, tmp_path):
    points = fake()
    res = tune(tmp_path / "c.db", strategy="grid", race=0)
    passed = [m for m in res.trials if m.status == "passed"]
    assert len(passed) == 36 and len({json.dumps(m.point) for m in passed}) == 36
    assert points() == 36  # refused points (threads * UNROLL > 4096) never reached a worker
    assert res.winner == "UNROLL=5 block=256"
    assert all(int(m.point["UNROLL"]) * int(m.point["block"]) <= 4096 for m in passed)
    assert [m for m in res.trials if m.status != "passed"] == []  # a grid walks the valid points only


def test_crash_hang_and_incorrect_are_infeasible_and_never_win(fake, tmp_path):
    # the best point hangs, the runner-up crashes, the third is incorrect: the fourth wins
    fake({"vec4#UNROLL=5": "hang", "vec4#UNROLL=4": "die", "vec4#UNROLL=6": "incorrect"})
    res = tune(tmp_path / "c.db", strategy="grid", race=2, timeout=1.0, defines={"UNROLL": "3..7"}, block="256")
    status = {m.point["UNROLL"]: (m.status, m.reason) for m in res.trials}
    assert status["5"][0] == "timeout" and "did not finish" in status["5"][1]
    assert status["4"][0] == "failed" and "died" in status["4"][1]
    assert status["6"][0] == "incorrect"
    assert status["3"][0] == status["7"][0] == "passed"
    assert res.winner in ("UNROLL=3 block=256", "UNROLL=7 block=256")
    assert res.race.ties == [k for k in ("UNROLL=3 block=256", "UNROLL=7 block=256") if k != res.winner]
    assert res.exit_code == 0


def test_a_campaign_resumes_and_refuses_another_space(fake, tmp_path):
    fake()
    db = tmp_path / "c.db"
    first = tune(db, trials=5, race=0)
    again = tune(db, trials=9, race=0)
    ran = [m for m in again.trials if m.status == "passed"]
    assert len(ran) == 9 and len({json.dumps(m.point) for m in ran}) == 9
    assert [m.number for m in first.trials] == [m.number for m in again.trials][:len(first.trials)]
    before = db.read_bytes()
    with pytest.raises(UsageError, match="another space"):
        tune(db, trials=9, defines={"UNROLL": "1..4"})
    assert db.read_bytes() == before


def test_racing_decides_or_calls_a_tie():
    class Row:
        def __init__(self, ms):
            from cudalab.bench import summarize
            from cudalab.records.results import PASSED

            self.variant, self.status, self.reason, self.stats = "v", PASSED, "", summarize(ms)

    class Run:
        def __init__(self, ms):
            self.results = [Row(ms)]

    times = {"a": 1.0, "b": 1.003, "c": 1.2}

    def run(reqs):
        return [Run([times[r] * (1 + 0.001 * (i % 3)) for i in range(10)]) for r in reqs], False

    res = R.race(run, [R.Contender(k, {}, k) for k in times], "v", tolerance=0.01)
    assert res.winner == "a" and res.ties == ["b"] and res.verdicts["c"].verdict == "slower" and res.decided
    res = R.race(run, [R.Contender(k, {}, k) for k in times], "v", tolerance=0.001, max_rounds=3)
    assert res.verdicts["b"].verdict != "same"  # 0.3% apart is not a tie at 0.1%


def test_replay_of_a_grid_campaign(fake, tmp_path, invoke):
    fake()
    db = tmp_path / "c.db"
    tune(db, strategy="grid", race=0)
    from cudalab.tuning import replay as RP

    space, table, _ = RP.load_campaign(f"sqlite:///{db}")
    r = RP.replay(space, table, "random", seeds=3, trials=36)
    assert r.curves.shape == (3, 36) and (r.curves[:, -1] == 1.0).all()  # every point seen: the best found
    res = invoke("tune", "--replay", str(db), "--strategy", "tpe,random", "--seeds", "2", "--trials", "5")
    assert res.exit_code == 0, res.output
    assert "tpe" in res.stdout and "N=5" in res.stdout
    # the default goes first in a replay as in a live campaign, and the line says what it reaches on its own
    assert re.search(r"first trial is the family's default configuration.*\(\d+\.\d% of the best\)", res.stdout)


def test_two_objectives_give_a_pareto_front(fake, tmp_path):
    fake({"_mj": "10 - UNROLL"})  # energy falls as UNROLL rises, time is best at 5: the front is 5..8
    res = tune(tmp_path / "c.db", strategy="grid", objectives=("time", "energy"), block="256")
    assert sorted(m.point["UNROLL"] for m in res.pareto) == ["5", "6", "7", "8"]


def test_the_command_prints_the_table_the_winner_and_saves_a_record(fake, tmp_path, invoke, monkeypatch):
    fake()
    monkeypatch.chdir(tmp_path)
    res = invoke("tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8", "--block", "256",
                 "--trials", "8", "--seed", "2", "--build-ahead", "0", "--json", "t.json")
    assert res.exit_code == 0, res.output
    assert "campaign copy-vec4:" in res.stderr and str(tmp_path / "copy-vec4.tune.db") in res.stderr
    assert "rerun: cudalab copy --variant vec4 --n 1k -D UNROLL=5 --block 256" in res.stdout
    from cudalab.records.results import load_record

    rec = load_record(tmp_path / "t.json")
    assert rec.points and all(p.results[0].stats.n >= 20 for p in rec.points)  # every racing round's samples
    assert json.loads((tmp_path / "t.json").read_text())["tune"]["winner"] == "UNROLL=5 block=256"
    assert invoke("compare", "t.json", "t.json").exit_code == 0


def test_list_shows_the_tune_spaces(invoke):
    res = invoke("list", "matmul")
    assert res.exit_code == 0
    assert "tune warptile:" in res.stdout and "8,748 points, 282 meet the constraints" in res.stdout


def test_a_killed_campaign_loses_only_its_trial_in_flight(tmp_path):
    db = tmp_path / "k.db"
    script = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from cudalab.execute.local import process as W\n"
        "import fake_workers as F\n"
        "W.spawn = lambda d, e=False: W.WorkerProcess(d, argv=lambda fd: [sys.executable, F.FAKE_MAIN, '--fd', str(fd)])\n"
        "from cudalab.cli import main\n"
        f"sys.argv = ['cudalab', 'tune', 'copy', '--variant', 'vec4', '--n', '1k', '-D', 'UNROLL=1..8', '--block', "
        f"'64..1024:pow2', '--require', 'threads * UNROLL <= 4096', '--trials', '12', '--seed', '1', '--build-ahead', "
        f"'0', '--race', '0', '--storage', 'sqlite:///{db}']\n"
        "main()\n")
    env = dict(os.environ, FAKE_WORKER=json.dumps({"_ms": MS, "_delay": 0.3}))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def passed() -> int:
        try:
            with sqlite3.connect(db) as con:
                return con.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0]
        except sqlite3.Error:
            return 0

    deadline = time.monotonic() + 60
    while passed() < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    killed_at = passed()
    assert 3 <= killed_at < 12
    os.environ["FAKE_WORKER"] = json.dumps({"_ms": MS})
    try:
        from cudalab.execute.local import process as W
        import fake_workers as F

        old = W.spawn
        W.spawn = lambda d, e=False: W.WorkerProcess(d, argv=lambda fd: [sys.executable, F.FAKE_MAIN, "--fd", str(fd)])
        res = tune(db, trials=12, race=0)
    finally:
        W.spawn = old
        del os.environ["FAKE_WORKER"]
    ran = [m for m in res.trials if m.status == "passed"]
    assert len(ran) == 12 and len({json.dumps(m.point) for m in ran}) == 12  # each configuration once
    # at most those in flight: the one on the GPU and the one asked while it ran (the next trial is ready)
    assert len([m for m in res.trials if m.status == "interrupted"]) <= 2


def test_the_plot_has_its_two_panels_apart_and_a_log_axis_for_slow_outliers(fake, tmp_path, monkeypatch):
    """The convergence curve (with its legend) and the importances (with their names) do not overlap, and a
    campaign whose slowest trial is many times its best is drawn on a log axis, so the best-so-far stays
    readable (the H200's matmul warptile demo: 2.8 to 23 ms)."""
    pytest.importorskip("matplotlib")
    from cudalab.report import plot as P
    from cudalab.tuning.plot import plot_campaign

    fake({"_ms": "1 + abs(UNROLL - 5) * 3"})  # 1 ms at 5, 13 ms at 1: a spread of 13
    res = tune(tmp_path / "c.db", strategy="grid", race=0, defines={"UNROLL": "1..8", "VERY_LONG_PARAMETER_NAME": "1,2"})
    figs = []
    monkeypatch.setattr(P, "_save", lambda fig, path: figs.append(fig))
    plot_campaign(res, tmp_path / "t.png")
    fig = figs[0]
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    curve, imps = fig.axes[:2]
    assert curve.get_tightbbox(r).x1 <= imps.get_tightbbox(r).x0, "the panels overlap"
    assert curve.get_yscale() == "log" and any("VERY_LONG" in t.get_text() for t in imps.get_yticklabels())


def test_the_importances_come_without_optunas_warning_on_the_users_terminal(fake, tmp_path, monkeypatch):
    """Optuna warns, on every --plot, that a target is minimised: true of a time, and noise under the table."""
    import warnings

    from cudalab.tuning.plot import _importances

    fake()
    res = tune(tmp_path / "c.db", strategy="grid", race=0)
    real = optuna.importance.get_param_importances

    def as_on_python_312(*a, **k):
        # Python 3.12's warnings skip Optuna's own frames, so the warning is the caller's and the module="optuna"
        # filter of quiet_optuna misses it (seen on the GPU machine); Python 3.11 names optuna and filters it
        warnings.warn_explicit("PedAnovaImportanceEvaluator computes the importances of params to achieve low "
                               "`target` values.", UserWarning, "plot.py", 1, module="cudalab.tuning.plot")
        return real(*a, **k)

    monkeypatch.setattr(optuna.importance, "get_param_importances", as_on_python_312)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        imp = _importances(res)
    assert set(imp) == {"UNROLL", "block"} and [str(w.message) for w in seen] == []


def test_a_walk_is_asked_ahead_four_times_its_build_threads_and_its_first_trials_built_before_any_is_sent(
        fake, tmp_path, monkeypatch):
    # a long build queued behind the short ones starts while the GPU is well behind it (cudalab.tuning.loops)
    from cudalab import build
    from cudalab.execute.local.engine import LocalPool
    from cudalab.instruments import driverquery
    from cudalab.tuning.loops import WALK_AHEAD

    fake()
    monkeypatch.setattr(build, "build", lambda *a, **k: None)  # the fake workers need no cubin
    monkeypatch.setattr(driverquery, "arch_here", lambda: "sm_90")
    prebuilt, sent, outstanding = [], [], []
    prebuild, send = LocalPool.prebuild, LocalPool.send

    def spy_prebuild(self, plan):
        if plan.request not in prebuilt:
            prebuilt.append(plan.request)
        outstanding.append(len(prebuilt) - len(sent))
        return prebuild(self, plan)

    def spy_send(self, plans):
        if not sent:
            outstanding.append(("first send", len(prebuilt)))
        sent.extend(p.request for p in plans)
        return send(self, plans)

    monkeypatch.setattr(LocalPool, "prebuild", spy_prebuild)
    monkeypatch.setattr(LocalPool, "send", spy_send)
    res = tune(tmp_path / "c.db", strategy="grid", race=0, build_ahead=2)
    assert len([m for m in res.trials if m.status == "passed"]) == 36
    # 8 built while the worker opened (the head start), 2 more for the two tasks in flight, before the first is sent
    assert WALK_AHEAD == 4 and ("first send", 10) in outstanding
    assert max(n for n in outstanding if isinstance(n, int)) == 10  # never further ahead
    assert sorted(map(str, sent)) == sorted(map(str, prebuilt)) and len(sent) == 36  # each built ahead, sent once


def test_a_trial_whose_build_is_slow_is_passed_by_while_later_ones_are_ready(fake, tmp_path, monkeypatch):
    # nvcc takes 5-8 s over a few of a campaign's kernels and 2 s over the rest: the GPU runs what is built
    import threading

    from cudalab import build
    from cudalab.execute.local.engine import LocalPool
    from cudalab.instruments import driverquery

    fake()
    slow = threading.Event()

    def fake_build(source, defines, arch):  # the grid's third point (UNROLL=1, block 128) builds until 5 are sent
        if (defines["UNROLL"], defines["BLOCK_X"]) == ("1", "128"):
            slow.wait(20)

    sent = []
    send = LocalPool.send

    def spy_send(self, plans):
        sent.extend((p.request.defines, p.request.block) for p in plans)
        if len(sent) == 5:
            slow.set()
        time.sleep(0.1)  # the instant builds behind the slow one are done when the loop next takes (a loaded CI host)
        return send(self, plans)

    monkeypatch.setattr(build, "build", fake_build)
    monkeypatch.setattr(driverquery, "arch_here", lambda: "sm_90")
    monkeypatch.setattr(LocalPool, "send", spy_send)
    res = tune(tmp_path / "c.db", strategy="grid", race=0, build_ahead=2)
    assert len([m for m in res.trials if m.status == "passed"]) == 36 and len(sent) == 36
    # the default first, then the grid in its order, less the slow one, which goes once its build is done
    third = ((("UNROLL", "1"),), "128")
    assert sent[:2] == [((("UNROLL", "4"),), "256"), ((("UNROLL", "1"),), "64")] and third not in sent[:5]
    assert sent[2:5] == [((("UNROLL", "1"),), "256"), ((("UNROLL", "1"),), "512"), ((("UNROLL", "1"),), "1024")]
    assert third in sent[5:8]


def test_a_trial_still_building_is_never_queued_behind_the_running_one_the_first_built_goes_next(
        fake, tmp_path, monkeypatch):
    # queued behind the task on the GPU, a trial whose nvcc still works holds the GPU at its turn while builds that
    # ended later are ready (the runner takes its tasks in order): the loop sends a trial only once it is built
    import threading

    from cudalab import build
    from cudalab.execute.local.engine import LocalPool
    from cudalab.instruments import driverquery

    fake()
    first_sent, third_sent = threading.Event(), threading.Event()

    def fake_build(source, defines, arch):
        key = (defines["UNROLL"], defines["BLOCK_X"])
        if key == ("4", "256"):  # the default, the first trial: built at once
            return
        first_sent.wait(10)  # nothing else is built when the first trial is sent, and its slot-mate is chosen
        if key == ("1", "64"):  # the second trial of the walk: its build ends once the third was sent
            third_sent.wait(10)

    sent = []
    send = LocalPool.send

    def spy_send(self, plans):
        sent.extend((p.request.defines, p.request.block) for p in plans)
        got = send(self, plans)
        first_sent.set()
        if ((("UNROLL", "1"),), "128") in sent:
            third_sent.set()
        return got

    monkeypatch.setattr(build, "build", fake_build)
    monkeypatch.setattr(driverquery, "arch_here", lambda: "sm_90")
    monkeypatch.setattr(LocalPool, "send", spy_send)
    t0 = time.monotonic()
    res = tune(tmp_path / "c.db", strategy="grid", race=0, build_ahead=2)
    assert len([m for m in res.trials if m.status == "passed"]) == 36 and len(sent) == 36
    assert sent[:2] == [((("UNROLL", "4"),), "256"), ((("UNROLL", "1"),), "128")]  # the third before the second
    assert ((("UNROLL", "1"),), "64") in sent[2:4] and time.monotonic() - t0 < 10  # nothing waited its 10 s out
