"""A walk's trials written several in one transaction (cudalab/tuning/trialwrite.py): the same rows as Optuna's
``add_trial`` writes one by one, refused where it refuses, committed before the campaign reports them."""

from __future__ import annotations

import datetime
import importlib.util
import math
import sqlite3

import pytest

from cudalab.tuning import campaign as C
from cudalab.tuning.trialwrite import add_trials

optuna = pytest.importorskip("optuna")
from optuna.distributions import CategoricalDistribution, IntDistribution  # noqa: E402

from test_cluster import dask_fake, tune as cluster_tune  # noqa: E402,F401  (the fake cluster's fixture)

DISTS = {"UNROLL": CategoricalDistribution([str(i) for i in range(1, 9)]), "block": CategoricalDistribution(["64", "256"])}


def study_in(path, objectives=1):
    return optuna.create_study(storage=C._storage(f"sqlite:///{path}"), study_name="s", directions=["minimize"] * objectives)


def made(i, values=(1.0,), dists=DISTS):
    T = optuna.trial
    start = datetime.datetime(2026, 11, 29, 8, 0, i)
    return T.create_trial(params={"UNROLL": str(i % 8 + 1), "block": "64" if i % 2 else "256"}, distributions=dists,
                          values=None if values is None else [v + i for v in values],
                          user_attrs={C.ATTR: {"point": {"UNROLL": str(i % 8 + 1)}, "status": "passed", "i": i}},
                          system_attrs={"k": i},
                          state=T.TrialState.COMPLETE if values is not None else T.TrialState.FAIL)


def seen(study):
    out = []
    for t in study.get_trials():
        out.append((t.number, t.state, t.params, t.distributions, t.values, t.user_attrs, t.system_attrs,
                    t.datetime_start))
    return out


def test_trials_written_together_read_back_as_add_trial_writes_them(tmp_path):
    trials = [made(0), made(1, values=None), made(2, values=(math.inf,)), made(3), made(4), made(5)]
    one = study_in(tmp_path / "one.db")
    for t in trials:
        one.add_trial(t)
    many = study_in(tmp_path / "many.db")
    many.add_trial(trials[0])  # mixed with Optuna's own writes: the numbers follow on
    add_trials(many, trials[1:3])
    add_trials(many, trials[3:4])
    add_trials(many, trials[4:])
    add_trials(many, [])
    assert seen(many) == seen(one) and [t.number for t in many.get_trials()] == list(range(6))
    # read by a fresh process's storage too (not from the writer's cache), completion times kept
    again = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'many.db'}")
    assert seen(again) == seen(one)
    assert [t.datetime_complete for t in again.get_trials()] == [t.datetime_complete for t in one.get_trials()]


def test_they_are_committed_when_the_call_returns(tmp_path):
    study = study_in(tmp_path / "c.db")
    add_trials(study, [made(0), made(1)])
    with sqlite3.connect(tmp_path / "c.db") as con:  # another connection: what a killed campaign leaves
        assert con.execute("select count(*) from trials where state = 'COMPLETE'").fetchone()[0] == 2


def test_what_add_trial_refuses_is_refused_and_nothing_of_the_batch_is_written(tmp_path):
    study = study_in(tmp_path / "r.db")
    add_trials(study, [made(0)])
    other = {**DISTS, "block": IntDistribution(64, 256)}
    with pytest.raises(ValueError):
        add_trials(study, [made(1), made(2, dists=other)])  # a parameter stored with another distribution
    with pytest.raises(ValueError):
        add_trials(study, [made(3), made(4, values=(1.0, 2.0))])  # two values for one objective
    assert [t.number for t in study.get_trials()] == [0]
    fresh = study_in(tmp_path / "f.db")  # nothing stored yet: checked against the batch's own first
    with pytest.raises(ValueError):
        add_trials(fresh, [made(1), made(2, dists=other)])
    assert fresh.get_trials() == []


def test_an_interrupt_between_two_statements_leaves_no_half_batch_for_the_next_write(tmp_path, monkeypatch):
    """Ctrl-C after a trial's row went in, before its parameters: rolled back, not committed by the next write
    (Optuna's session rolls back only its own errors)."""
    import optuna.storages._rdb.models as M

    study = study_in(tmp_path / "i.db")
    real, calls = M.TrialValueModel.value_to_stored_repr, []

    def interrupted(v):
        calls.append(v)
        if len(calls) == 2:  # the second trial's value: its row is in, the first trial's too
            raise KeyboardInterrupt
        return real(v)

    monkeypatch.setattr(M.TrialValueModel, "value_to_stored_repr", interrupted)
    with pytest.raises(KeyboardInterrupt):
        add_trials(study, [made(0), made(1)])
    monkeypatch.setattr(M.TrialValueModel, "value_to_stored_repr", real)
    add_trials(study, [made(2)])  # the next write, in the same thread's session
    with sqlite3.connect(tmp_path / "i.db") as con:
        assert con.execute("select count(*) from trials").fetchone()[0] == 1
        assert con.execute("select count(*) from trials where trial_id not in (select trial_id from trial_params)"
                           ).fetchone()[0] == 0
    assert [t.values for t in study.get_trials()] == [[3.0]]


def test_a_storage_that_is_not_optunas_rdb_gets_add_trial():
    study = optuna.create_study()  # in memory
    add_trials(study, [made(0), made(1)])
    assert [(t.number, t.values) for t in study.get_trials()] == [(0, [1.0]), (1, [2.0])]


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs the cluster extra")
def test_a_cluster_walk_reports_each_trial_after_its_task_wrote_it(dask_fake, tmp_path):
    """A Dask task's trials are written in one transaction and reported after it: at every trial event the file
    holds at least the trials said done (a campaign killed then keeps every trial it reported)."""
    db = tmp_path / "w.db"
    short: list[tuple[int, int]] = []

    def on_event(what, d):
        if what == "trial":
            with sqlite3.connect(db) as con:
                short.append((con.execute("select count(*) from trials").fetchone()[0], d["done"]))

    dask_fake({"_delay": 0.05})
    res = cluster_tune(db, strategy="grid", race=0, trials=16, devices="0", on_event=on_event)
    assert len([m for m in res.trials if m.status == "passed"]) == 16 and len(short) == 16
    assert all(written >= done for written, done in short), short
