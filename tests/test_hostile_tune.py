"""Hostile input to ``cudalab tune``, by class (CPU only, fake GPU workers): what a campaign may write, what an
interrupt may conclude, which values and options it takes. Each class's rule lives in one place; these tests
aim at the rule with inputs of their own."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import cudalab
from cudalab.errors import UsageError

optuna = pytest.importorskip("optuna")

from test_tune import MS, SPACE  # noqa: E402

ARGS = ["tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8", "--block", "64..1024:pow2",
        "--require", "threads * UNROLL <= 4096", "--seed", "1", "--build-ahead", "0", "--strategy", "grid"]


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder``: its kind and bytes (a link: where it points)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_file():
            out[rel] = ("file", p.read_bytes())
        else:
            out[rel] = ("other", p.stat().st_mode)
    return out


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """A workspace: the current folder, holding a finished campaign and another program's database."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def finished_campaign(fake_workers, db: Path) -> None:
    fake_workers({"_ms": MS})
    cudalab.tune("copy", "vec4", **SPACE, seed=1, build_ahead=0, strategy="grid", race=0, trials=3,
                 storage=f"sqlite:///{db}")


def other_programs_db(path: Path) -> Path:
    with sqlite3.connect(path) as con:
        con.execute("create table accounts (id integer primary key, owner text)")
        con.execute("insert into accounts (owner) values ('someone')")
    return path


# --- class: a campaign's storage is written only when it is a campaign (or new), and only by a run -------------

def test_a_tune_that_cannot_open_a_gpu_changes_nothing_on_disk(fake_workers, ws, invoke):
    finished_campaign(fake_workers, ws / "kept.tune.db")
    before = snapshot(ws)
    fake_workers({"_open": "error"})
    for extra in ([], ["--storage", f"sqlite:///{ws / 'kept.tune.db'}", "--name", "another"],
                  ["--storage", f"sqlite:///{ws / 'kept.tune.db'}", "--trials", "8"]):
        res = invoke([*ARGS, *extra])
        assert res.exit_code != 0, res.output
        assert snapshot(ws) == before, extra  # no NAME.tune.db left, no study added, no trial left RUNNING


@pytest.mark.parametrize("make", ["other_db", "link", "dangling", "folder", "fifo", "text"])
def test_the_storage_is_never_a_file_that_is_not_a_campaign(fake_workers, ws, invoke, one_line_exit_2, make):
    finished_campaign(fake_workers, ws / "kept.tune.db")
    other_programs_db(ws / "app.db")
    target = {"other_db": ws / "app.db", "link": ws / "link.db", "dangling": ws / "dangling.db",
              "folder": ws / "folder.db", "fifo": ws / "fifo.db", "text": ws / "notes.db"}[make]
    if make == "link":
        target.symlink_to(ws / "kept.tune.db")
    elif make == "dangling":
        target.symlink_to(ws / "nowhere" / "made.db")
        (ws / "nowhere").mkdir()
    elif make == "folder":
        target.mkdir()
    elif make == "fifo":
        os.mkfifo(target)
    elif make == "text":
        target.write_text("my notes\n")
    before = snapshot(ws)
    fake_workers({"_ms": MS})
    one_line_exit_2(invoke([*ARGS, "--storage", f"sqlite:///{target}"]), str(target))
    assert snapshot(ws) == before
    one_line_exit_2(invoke(["tune", "--replay", str(target)]))
    assert snapshot(ws) == before


def test_a_replay_only_reads_its_campaign(fake_workers, ws, invoke):
    db = ws / "kept.tune.db"
    finished_campaign(fake_workers, db)
    os.chmod(db, 0o444)  # a file its owner keeps read-only: a replay needs no more
    before, mtime = snapshot(ws), db.stat().st_mtime_ns
    res = invoke(["tune", "--replay", str(db), "--strategy", "random", "--seeds", "2", "--trials", "2"])
    assert res.exit_code == 0, res.output
    assert snapshot(ws) == before and db.stat().st_mtime_ns == mtime


def test_two_tunes_started_at_once_on_a_new_file_both_run(fake_workers, ws):
    """The second tune finds the first's study before its attributes are written (Optuna creates a study, then
    its attributes): it waits for them rather than refusing "another space (fingerprint none)"."""
    fake_workers({"_ms": MS})
    db = ws / "new.tune.db"
    url = f"sqlite:///{db}"
    optuna.create_study(storage=url, study_name="copy-vec4")  # the first tune, between its two writes

    def first_tune_finishes_creating():
        from cudalab.tuning.drive import plan
        from cudalab.tuning.options import TuneOptions

        p = plan(TuneOptions(family="copy", variant="vec4", defines=(("UNROLL", "1..8"),), n="1k",
                             block="64..1024:pow2", require=tuple(SPACE["require"]), seed=1, strategy="grid",
                             storage=url))
        from cudalab.tuning import campaign as C

        for k, v in p.meta.items():  # one attribute at a time, as the first tune writes them, slowly
            if k != "fingerprint":
                optuna.load_study(study_name="copy-vec4", storage=url).set_user_attr(k, v)
                time.sleep(0.2)
        C.write_meta(optuna.load_study(study_name="copy-vec4", storage=url), p.meta)

    later = threading.Timer(0.5, first_tune_finishes_creating)
    later.start()
    try:
        res = cudalab.tune("copy", "vec4", **SPACE, seed=1, build_ahead=0, strategy="grid", race=0, trials=2,
                           storage=url)
    finally:
        later.join()
    assert [m.status for m in res.trials] == ["passed", "passed"]
    with pytest.raises(UsageError, match="not written by cudalab"):  # a study no cudalab tune is creating
        optuna.create_study(storage=url, study_name="someone-elses")
        cudalab.tune("copy", "vec4", **SPACE, seed=1, build_ahead=0, strategy="grid", race=0, trials=2,
                     storage=url)


# --- class: an interrupt ends the measuring; nothing is concluded from a round its worker did not finish -------

def _counts_add_up(output: str) -> None:
    import re

    line = next(x for x in output.splitlines() if " trials: " in x)
    total = int(line.split(" trials:")[0].split()[-1])
    parts = [int(n) for n in re.findall(r"(\d+) (?:passed|infeasible|refused|interrupted)", line)]
    assert sum(parts) == total, line


def test_an_interrupt_during_the_trials_races_nothing_and_names_no_winner(fake_workers, ws, invoke):
    # the 4th point of the grid sends the parent a Ctrl-C: the trials before it passed; no race may follow
    fake_workers({"_ms": MS, "vec4#UNROLL=6": "sigint"})
    res = invoke(["tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=3..7", "--block", "256", "--seed",
                  "1", "--build-ahead", "0", "--strategy", "grid", "--race", "3", "--json", "out.json"])
    assert res.exit_code == 130, res.output
    assert "racing round" not in res.output and "winner after" not in res.output and "rerun:" not in res.output
    assert "the winner is" not in res.output
    assert "not raced" in res.output and "INCOMPLETE" in res.output
    _counts_add_up(res.output)
    if (ws / "out.json").exists():
        assert json.loads((ws / "out.json").read_text())["tune"]["winner"] == ""


def test_a_worker_killed_mid_race_by_an_interrupt_names_no_winner(fake_workers, ws, tmp_path):
    """The race's GPU worker is killed with a contender in flight and the parent gets Ctrl-C (a terminal's, to
    the group): the contender's cut row is no failure of its own, and the round names nobody."""
    import signal

    from cudalab.tuning.drive import plan, run_campaign
    from cudalab.tuning.options import TuneOptions

    busy = tmp_path / "busy"
    busy.mkdir()
    os.environ["FAKE_WORKER_BUSY"] = str(busy)
    fake_workers({"_ms": MS, "_delay": 0.05})
    p = plan(TuneOptions(family="copy", variant="vec4", defines=(("UNROLL", "3..7"),), n="1k", block="256",
                         seed=1, strategy="grid", race=3, build_ahead=0, storage=f"sqlite:///{ws / 'c.db'}"))
    rounds = []

    def ctrl_c_mid_race():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            pids = [int(f.name) for f in busy.iterdir()]
            if pids:
                os.kill(pids[0], signal.SIGKILL)  # its worker dies under the contender in flight...
                time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGINT)  # ...and the parent gets the Ctrl-C
                return
            time.sleep(0.005)

    def on_event(what, data):
        if what == "race":
            threading.Thread(target=ctrl_c_mid_race, daemon=True).start()
        if what == "round":
            rounds.append(data["result"])

    try:
        res = run_campaign(p, on_event)
    finally:
        del os.environ["FAKE_WORKER_BUSY"]
    assert res.exit_code == 130 and res.incomplete
    assert res.race is not None and res.race.interrupted and res.race.winner == "" and res.race.dropped == {}
    assert res.unraced and res.to_dict()["tune"]["winner"] == ""
    assert all(r.winner == "" for r in rounds if r.interrupted)


def test_an_interrupted_round_drops_no_contender():
    from cudalab.bench import summarize
    from cudalab.records.results import FAILED, PASSED
    from cudalab.tuning import race as R

    class Row:
        def __init__(self, ok, ms=1.0):
            self.variant, self.status = "v", PASSED if ok else FAILED
            self.reason, self.stats = "" if ok else "the GPU worker died (killed by SIGKILL)", summarize([ms] * 10)

    class Run:
        def __init__(self, row):
            self.results = [row]

    calls = []

    def run(reqs):
        calls.append(len(reqs))
        if len(calls) == 1:
            return [Run(Row(True, 1.0 + 0.1 * i)) for i, _ in enumerate(reqs)], False
        return [Run(Row(True, 2.0)), Run(Row(False))], True  # the interrupt cut the 2nd contender's row

    got = R.race(run, [R.Contender(k, {}, k) for k in ("a", "b", "c")], "v", max_rounds=4)
    assert got.interrupted and got.winner == "" and got.dropped == {} and not got.decided


def test_a_cluster_address_that_is_no_dask_scheduler_is_one_line_in_bounded_time(tmp_path):
    """Something that accepts the connection and never speaks Dask (a silent listener, an HTTP server), a
    scheme Dask cannot use here (tls:// without certificates, ucx:// without UCX), garbage: one line each, exit 2,
    within the connect timeout and a little (run in a child: a hung connect's thread is left behind there)."""
    import subprocess
    import sys

    script = r'''
import http.server, json, socket, threading, time
from click.testing import CliRunner
from cudalab.cli import cli
from cudalab.execute.dask import cluster
cluster.CONNECT_S = 1.0
silent = socket.socket(); silent.bind(("127.0.0.1", 0)); silent.listen(5)
held = []
threading.Thread(target=lambda: [held.append(silent.accept()) for _ in range(99)], daemon=True).start()
web = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
threading.Thread(target=web.serve_forever, daemon=True).start()
out = []
for a in [f"tcp://127.0.0.1:{silent.getsockname()[1]}", f"tcp://127.0.0.1:{web.server_address[1]}",
          f"tls://127.0.0.1:{web.server_address[1]}", "ucx://127.0.0.1:9", "inproc://x:1"]:
    t = time.monotonic()
    r = CliRunner().invoke(cli, ["tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..2", "--cluster", a])
    out.append([a, r.exit_code, r.output, time.monotonic() - t])
print(json.dumps(out))
'''
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert time.monotonic() - t0 < 60  # the child ended: nothing it left behind held its exit
    for address, code, output, took in json.loads(proc.stdout.splitlines()[-1]):
        lines = output.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("cudalab: --cluster"), (address, output)
        assert "Traceback" not in output and took < 10, (address, took)
    assert list(tmp_path.iterdir()) == []  # nothing written: no campaign file for a cluster that is not there


# --- class: values; cudalab.tune(...) refuses what the command refuses, as a UsageError -------------------------

@pytest.mark.parametrize("call", [
    dict(budget=float("nan")), dict(budget=-1), dict(budget="fast"), dict(timeout=0), dict(timeout=float("inf")),
    dict(race=-5), dict(race=2.5), dict(device=-1), dict(device="0"), dict(build_ahead=-1), dict(seed=-1),
    dict(seed=2**32), dict(seed=1.5), dict(trials=0), dict(trials="9"), dict(time_s=float("nan")),
    dict(tolerance=float("nan")), dict(require=5), dict(objectives=7), dict(defines=["UNROLL=1..8"]),
    dict(defines={"UNROLL": "1..99999999999999999999"}), dict(options=3), dict(strategy=3), dict(n=1024),
    dict(storage=5), dict(trails=3), dict(on_event="print"), dict(family=None),
])
def test_the_python_api_refuses_a_bad_call_with_a_usage_error(no_gpu, ws, call):
    args = {"family": "copy", "variant": "vec4", "defines": {"UNROLL": "1..8"}, "n": "1k", **call}
    with pytest.raises(UsageError):
        cudalab.tune(args.pop("family"), **args)
    assert list(ws.iterdir()) == []


# --- class: spaces of any size; what happens before the first trial does not grow with the space ---------------

def test_the_proposer_and_the_codec_are_linear_in_a_dimensions_length():
    """100,000 values in one dimension: listing its valid points, the repair's grid and a hundred asks' decoding
    take well under a second each (index lookups per point made them quadratic: minutes)."""
    from cudalab.tuning import strategy as S
    from cudalab.tuning.propose import Proposer
    from cudalab.tuning.space import Dim, Space

    space = Space(dims=(Dim("block", "block", tuple(str(i) for i in range(1, 100_001)), False),),
                  require=("block % 2 == 0",))
    valid = space.valid_points()
    t = time.monotonic()
    prop = Proposer(space, "tpe", 1, valid)
    for i in range(100):
        point = S.decode(space, S.encode(space, {"block": str(1 + 997 * i)}))
        prop.repair(point)
    assert time.monotonic() - t < 5  # quadratic: 9 s on an idle 2-core machine; linear: under 1 s


def test_a_space_too_large_to_list_runs_with_every_strategy_in_bounded_memory(tmp_path):
    """10^10 points: grid walks them lazily (the default first, then in the space's order), tpe and random ask
    them; none lists them (its memory is capped at 4 GB here: listing needs far more), none crashes on the budget
    it defaults to, and the start line says the space is too large to list."""
    import subprocess
    import sys

    script = r'''
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4_000_000_000, 4_000_000_000))
sys.path.insert(0, %r)
from cudalab.execute.local import process as W
import fake_workers as F
W.spawn = lambda d, e=False: W.WorkerProcess(d, argv=lambda fd: [sys.executable, F.FAKE_MAIN, "--fd", str(fd)])
import cudalab
from cudalab.tuning.drive import plan
from cudalab.tuning.options import TuneOptions
out = {s: plan(TuneOptions(family="copy", variant="vec4", n="1k", defines=(("A", "1..100000"), ("B", "1..100000")),
                           strategy=s, storage="sqlite:///%s/x.db")).budget for s in ("grid", "tpe", "random")}
for strategy, trials in (("grid", 3), ("random", 4)):
    events = []
    res = cudalab.tune("copy", "vec4", n="1k", defines={"A": "1..100000", "B": "1..100000"}, require=["A < 50000"],
                       strategy=strategy, trials=trials, race=0, build_ahead=0, seed=1,
                       storage="sqlite:///%s/" + strategy + str(trials) + ".db",
                       on_event=lambda what, d: events.append(d) if what == "start" else None)
    out[f"{strategy}{trials}"] = [events[0]["valid"], events[0]["budget"], [m.status for m in res.trials][:5],
                                  [m.point for m in res.trials][:3]]
print(json.dumps(out))
''' % (str(Path(__file__).parent), tmp_path, tmp_path)
    env = dict(os.environ, FAKE_WORKER=json.dumps({"_ms": "1 + A / 10"}))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["grid3"][0] is None and got["grid3"][1] == 3 and got["grid3"][2] == ["passed"] * 3
    assert got["grid3"][3][:2] == [{"A": "1", "B": "1"}, {"A": "1", "B": "2"}]  # the space's order
    assert got["grid"] == got["tpe"] == got["random"] == 100  # the default budget, not None (a TypeError)
    assert got["random4"][1] == 4
