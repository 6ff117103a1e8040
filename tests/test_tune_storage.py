"""What a campaign writes to its storage: one JSON user attribute per trial, and campaigns written before it
(one attribute per fact, the owner a system attribute) that must keep resuming (they are user data)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import cudalab
from cudalab.tuning import campaign as C
from cudalab.tuning import strategy as S

optuna = pytest.importorskip("optuna")

from test_tune import SPACE, fake  # noqa: F401,E402  (the space and the fake-worker fixture tune's tests use)


def tune(storage, **kw):
    args = {**SPACE, "seed": 1, "build_ahead": 0, "storage": f"sqlite:///{storage}", "strategy": "grid", "race": 0, **kw}
    return cudalab.tune("copy", "vec4", **args)


def load(db):
    return optuna.load_study(study_name="copy-vec4", storage=f"sqlite:///{db}")


def test_each_trial_is_one_json_attribute_and_reads_back(fake, tmp_path):
    fake({"vec4#UNROLL=4": "incorrect"})
    db = tmp_path / "c.db"
    res = tune(db)
    trials = [t for t in load(db).get_trials() if t.state.is_finished()]
    assert trials and all(set(t.user_attrs) == {C.ATTR} for t in trials)  # one write, not one per fact
    assert all(C.OWNER not in t.system_attrs for t in trials)
    got = {t.number: t.user_attrs[C.ATTR] for t in trials}
    by_number = {m.number: m for m in res.trials}
    assert set(by_number) <= set(got)
    for n, m in by_number.items():  # what the campaign read back is what it wrote
        a = got[n]
        assert a["point"] == m.point and a["status"] == m.status and a["reason"] == m.reason
        assert a["owner"] == C.owner()
    best = next(m for m in res.trials if m.point == {"UNROLL": "5", "block": "256"})
    assert best.status == "passed" and best.attrs["median_ms"] == pytest.approx(1.0, rel=0.01)
    assert best.attrs["gpu"] and best.attrs["samples"] == 10 and best.values == (best.attrs["median_ms"],)
    wrong = [m for m in res.trials if m.point["UNROLL"] == "4" and m.status != "refused"]
    assert wrong and all(m.status == "incorrect" and m.values is None for m in wrong)


def test_a_campaign_writes_in_wal_mode_and_leaves_its_file_as_sqlite_does_by_default(fake, tmp_path):
    """While the trials run the file is in WAL mode (a commit is an append, not fsyncs: most of a cluster trial's
    parent cost was its ~10 commits); at the end the rollback journal is back and no -wal or -shm is left."""
    import sqlite3

    fake()
    db = tmp_path / "w.db"
    seen = []
    tune(db, trials=3, on_event=lambda what, data: seen.append(Path(f"{db}-wal").exists()) if what == "trial" else None)
    assert seen and all(seen)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ops.log", "w.db"]
    with sqlite3.connect(db) as con:
        assert con.execute("pragma journal_mode").fetchone()[0] == "delete"
    assert len(load(db).get_trials()) >= 3  # and it reads back


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", ""])
    p.wait()
    return p.pid


def _old_campaign(db) -> dict[str, int]:
    """A campaign as cudalab wrote it before one attribute per trial: each fact an attribute of its own, the
    point a JSON text, the owner a system attribute; a repeat, and a trial its killed campaign left running."""
    from cudalab.tuning.drive import plan
    from cudalab.tuning.options import TuneOptions

    p = plan(TuneOptions(family="copy", variant="vec4", defines=(("UNROLL", "1..8"),), n="1k", block="64..1024:pow2",
                         require=tuple(SPACE["require"]), seed=1, strategy="grid", race=0,
                         storage=f"sqlite:///{db}"))
    study = C.open_campaign(p.url, p.name, p.meta, ["minimize"], S.sampler("random", 1, p.space))
    dists, dead = S.distributions(p.space), f"{socket.gethostname()}:{_dead_pid()}"
    numbers = {}

    def trial(unroll: str, owner: str = dead, **attrs):
        point = {"UNROLL": unroll, "block": "256"}
        t = study.enqueue_trial(S.encode(p.space, point)) or study.ask(dists)
        t.storage.set_trial_system_attr(t._trial_id, C.OWNER, owner)
        t.set_user_attr("point", json.dumps(point, sort_keys=True))
        for k, v in attrs.items():
            t.set_user_attr(k, v)
        numbers[unroll + attrs.get("tag", "")] = t.number
        return t

    for u in "123":
        t = trial(u, status="passed", reason="", gpu="Fake GPU 0", median_ms=9.0 + int(u), samples=10)
        study.tell(t, [9.0 + int(u)])
    study.tell(trial("4", status="failed", reason="the worker died (old campaign)", gpu="Fake GPU 0"),
               state=optuna.trial.TrialState.FAIL)
    study.tell(trial("1", repeat_of=numbers["1"], tag="r"), [10.0])
    trial("6")  # left RUNNING by a campaign that was killed: its owner is gone
    trial("7", owner=C.owner())  # RUNNING in a process that is alive (this one): not this campaign's to reap
    return numbers


def test_an_old_campaign_with_separate_attributes_resumes(fake, tmp_path):
    db = tmp_path / "old.db"
    old = _old_campaign(db)
    points = fake()
    res = tune(db)
    measured = {m.number: m for m in res.trials}
    for u in "123":  # the old trials are known: not run again, read with their figures
        m = measured[old[u]]
        assert (m.point, m.status, m.values, m.attrs["median_ms"]) == ({"UNROLL": u, "block": "256"}, "passed",
                                                                         (9.0 + int(u),), 9.0 + int(u))
    assert (measured[old["4"]].status, measured[old["4"]].reason) == ("failed", "the worker died (old campaign)")
    assert old["1r"] not in measured  # a repeat is no measurement
    assert measured[old["6"]].status == "interrupted"  # reaped: its owner is gone, and asked again
    assert load(db).trials[old["7"]].state == optuna.trial.TrialState.RUNNING
    again = [m for m in res.trials if m.point == {"UNROLL": "6", "block": "256"} and m.status == "passed"]
    assert len(again) == 1
    passed = [m for m in res.trials if m.status == "passed"]
    assert len(passed) == 35 and len({json.dumps(m.point, sort_keys=True) for m in passed}) == 35
    assert points() == 36 - 4  # every valid point once, the 3 passed and the 1 failed old ones not again
    assert res.winner == "UNROLL=5 block=256"


def test_a_trial_a_killed_campaign_left_running_says_its_point_and_is_asked_again(fake, tmp_path):
    db = tmp_path / "k.db"
    points = fake()
    tune(db, trials=3)
    study = load(db)
    from cudalab.tuning.drive import plan
    from cudalab.tuning.options import TuneOptions

    space = plan(TuneOptions(family="copy", variant="vec4", defines=(("UNROLL", "1..8"),), n="1k",
                             block="64..1024:pow2", require=tuple(SPACE["require"]), storage=f"sqlite:///{db}")).space
    point = {"UNROLL": "6", "block": "256"}
    study.enqueue_trial(S.encode(space, point))
    t = study.ask(S.distributions(space))  # as the campaign's ask left it: one attribute, its owner now gone
    t.set_user_attr(C.ATTR, {"point": point, "owner": f"{socket.gethostname()}:{_dead_pid()}"})
    res = tune(db, trials=5)
    mine = [m for m in res.trials if m.point == point]
    assert [m.status for m in mine] == ["interrupted", "passed"] and mine[0].number == t.number
    assert points() == 5


def _asked(tmp_path, strategy):
    from collections import deque

    from cudalab.tuning.drive import _Campaign, plan
    from cudalab.tuning.options import TuneOptions
    from cudalab.tuning.runs import runs_for

    p = plan(TuneOptions(family="copy", variant="vec4", defines=(("UNROLL", "1..8"),), n="1k", block="64..1024:pow2",
                         require=tuple(SPACE["require"]), seed=1, strategy=strategy, build_ahead=0,
                         storage=f"sqlite:///{tmp_path / 'a.db'}"))
    study = C.open_campaign(p.url, p.name, p.meta, ["minimize"], S.sampler(p.strategy, 1, p.space))
    camp = _Campaign(p, study, runs_for(p.opts), lambda what, data: None)  # no GPU worker starts: nothing runs here
    pending: deque = deque()
    assert camp.ask(pending)
    camp.runs.executor.stop_builds()
    return study, camp, pending[0]


def test_an_asked_trial_of_a_model_says_its_point_and_owner_before_it_runs(tmp_path):
    study, camp, (trial, point, _) = _asked(tmp_path, "tpe")
    t = study._storage.get_trial(trial._trial_id)  # what a campaign killed now leaves: its point, its owner
    assert t.state == optuna.trial.TrialState.RUNNING
    assert (C.facts(t)["point"], C.facts(t)["owner"]) == (point, C.owner())


def test_a_walk_writes_a_trial_once_when_it_is_measured(tmp_path):
    # grid and random choose their points themselves: no ask, one write a trial (an ask, its parameters and a
    # tell were ~60 ms of SQLite a trial on an H200's host); a campaign killed mid-trial leaves nothing, and the
    # walk comes to that point again
    study, camp, (trial, point, req) = _asked(tmp_path, "grid")
    assert trial is None and study.get_trials(deepcopy=False) == []
    camp._record(None, point, "passed", "", [1.5], {"median_ms": 1.5})
    (t,) = study.get_trials(deepcopy=False)
    assert t.state == optuna.trial.TrialState.COMPLETE and t.values == [1.5]
    assert C.facts(t)["point"] == point and S.decode(camp.p.space, t.params) == point
    assert [m.point for m in C.measured(study)] == [point]
