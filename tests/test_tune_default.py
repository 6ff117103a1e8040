"""The family's own configuration is every campaign's first trial (cudalab.tuning.propose, drive, replay).

On an H200 a random campaign of the matmul warptile never sampled its default and named a "winner" 1.8%
slower than it. Here, on fake workers (a row's time is ``_ms`` over the point's defines), copy/vec4's default
(``UNROLL=4``, block 256: family.toml) is measured first by every strategy, once, and wins when it is the
fastest; a default outside the space is raced beside the best as before, never winning.
"""

from __future__ import annotations

import importlib.util
import sqlite3

import pytest

import cudalab
from cudalab.tuning import strategy as S
from cudalab.tuning.propose import Proposer
from cudalab.tuning.result import point_key
from cudalab.tuning.space import Dim, Space

optuna = pytest.importorskip("optuna")

from test_tune import SPACE, fake  # noqa: F401,E402  (the space and the fake-worker fixture tune's tests use)

DEFAULT = {"UNROLL": "4", "block": "256"}  # copy/vec4's own configuration
KEY = point_key(DEFAULT)
FASTEST = "1 + abs(UNROLL - 4) / 10 + abs(threads - 256) / 1000"  # the default is the fastest point


def tune(storage, **kw):
    args = {**SPACE, "seed": 1, "build_ahead": 0, "storage": f"sqlite:///{storage}", **kw}
    return cudalab.tune("copy", "vec4", **args)


def first(res):
    return min(res.trials, key=lambda m: m.number)


def asked(db, point):
    """Every trial of the study at ``point``, repeats included (each one an ask of the strategy)."""
    study = optuna.load_study(study_name="copy-vec4", storage=f"sqlite:///{db}")
    return [t for t in study.trials if (t.user_attrs.get("cudalab") or {}).get("point") == point]


# ---- the proposer ------------------------------------------------------------------------------------

GRID = Space(dims=(Dim("A", "define", ("0", "1", "2", "3"), False), Dim("B", "define", ("0", "1", "2", "3"), False)),
             require=("A + B <= 3",))


@pytest.mark.parametrize("strategy", ["grid", "random"])
def test_a_walk_starts_with_the_default_and_does_not_come_to_it_again(strategy):
    valid = GRID.valid_points()
    dflt = {"B": "1", "A": "2"}  # in another order than the space's: the walk's point is in the space's
    walk = Proposer(GRID, strategy, 3, valid, first=dflt).walk
    assert walk[0] == {"A": "2", "B": "1"} and list(walk[0]) == ["A", "B"]
    assert sorted(map(point_key, walk)) == sorted(map(point_key, valid))  # each valid point once
    plain = Proposer(GRID, strategy, 3, valid).walk  # the rest in the walk's own (seeded) order
    assert walk[1:] == [p for p in plain if p != walk[0]]


@pytest.mark.parametrize("dflt", [{"A": "3", "B": "3"}, {"A": "9", "B": "0"}, {"A": "", "B": "0"}])
def test_a_default_that_is_no_valid_point_is_not_first(dflt):
    for valid in (GRID.valid_points(), None):  # listed, or checked against the constraints
        prop = Proposer(GRID, "random" if valid else "tpe", 3, valid, first=dflt)
        assert prop.first is None and prop.opening(()) is None
        if valid:
            assert prop.walk == Proposer(GRID, "random", 3, valid).walk


def test_a_model_based_strategy_opens_with_the_default_unless_it_was_measured():
    prop = Proposer(GRID, "tpe", 3, GRID.valid_points(), first={"A": "2", "B": "1"})
    assert prop.opening(()) == {"A": "2", "B": "1"} and prop.opening(["A=2 B=1"]) is None
    assert Proposer(GRID, "grid", 3, GRID.valid_points(), first={"A": "2", "B": "1"}).opening(()) is None  # walks: no


# ---- campaigns ---------------------------------------------------------------------------------------

def test_a_random_campaign_measures_the_default_first_and_it_wins(fake, tmp_path, invoke, monkeypatch):
    fake({"_ms": FASTEST})
    raced = []
    res = tune(tmp_path / "c.db", strategy="random", trials=4, race=3,
               on_event=lambda what, d: raced.extend(d["contenders"]) if what == "race" else None)
    assert first(res).point == DEFAULT and first(res).status == "passed"
    assert KEY in raced and res.winner == KEY == res.race.winner  # a contender (not only the extra) and the winner
    assert res.speedup(KEY) == pytest.approx(1.0) and res.to_dict()["tune"]["default"] == KEY
    # the command: the default's row is marked, the verdict says to keep it, the rerun runs it
    monkeypatch.chdir(tmp_path)
    out = invoke("tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8", "--block", "64..1024:pow2",
                 "--require", "threads * UNROLL <= 4096", "--strategy", "random", "--trials", "4", "--seed", "1",
                 "--race", "3", "--build-ahead", "0")
    assert out.exit_code == 0, out.output
    assert f"{KEY} (default)" in out.stdout.replace("\n", " ")
    assert "the winner is the family's default configuration: the fastest configuration found, keep it" in out.stdout
    assert "rerun: cudalab copy --variant vec4 --n 1k -D UNROLL=4 --block 256" in out.stdout


def test_not_raced_the_best_trial_is_said_to_be_the_default(fake, tmp_path, invoke, monkeypatch):
    fake({"_ms": FASTEST})
    monkeypatch.chdir(tmp_path)
    out = invoke("tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8", "--block", "256",
                 "--strategy", "random", "--trials", "3", "--seed", "1", "--race", "0", "--build-ahead", "0")
    assert out.exit_code == 0, out.output
    assert "the best trial (not raced) is the family's default configuration" in out.stdout


def test_a_default_tied_with_the_winner_is_said_to_cost_nothing(fake, tmp_path, invoke, monkeypatch):
    fake({"_ms": "1 + abs(UNROLL - 5) / 250"})  # the default (UNROLL=4) 0.4% slower than UNROLL=5: a tie at 1%
    monkeypatch.chdir(tmp_path)
    out = invoke("tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=3..6", "--block", "256",
                 "--strategy", "grid", "--seed", "1", "--race", "2", "--tolerance", "0.01", "--build-ahead", "0")
    assert out.exit_code == 0, out.output
    assert "winner after" in out.stdout and "UNROLL=5 block=256" in out.stdout.split("winner after")[1]
    assert "the family's default configuration is tied with the winner within the tolerance" in out.stdout


def test_a_grid_campaign_measures_the_default_first_and_once(fake, tmp_path):
    points = fake()
    db = tmp_path / "g.db"
    res = tune(db, strategy="grid", race=0)
    assert first(res).point == DEFAULT
    assert [m.point for m in res.trials].count(DEFAULT) == 1 and len(asked(db, DEFAULT)) == 1
    assert len(res.trials) == 36 and points() == 36  # every valid point once
    assert res.winner == "UNROLL=5 block=256"  # not the fastest here: an ordinary trial, no favour


@pytest.mark.parametrize("strategy", ["tpe", "nsga2", pytest.param("cmaes", marks=pytest.mark.skipif(
    importlib.util.find_spec("cmaes") is None, reason="needs cmaes"))])
def test_a_model_based_campaign_is_told_the_default_first(fake, tmp_path, strategy):
    fake()
    db = tmp_path / "m.db"
    res = tune(db, strategy=strategy, trials=5, race=0)
    assert first(res).point == DEFAULT and first(res).status == "passed"
    study = optuna.load_study(study_name="copy-vec4", storage=f"sqlite:///{db}")
    t0 = study.trials[0]  # the sampler's first trial: the default's parameters, complete, so the model learns it
    assert t0.state == optuna.trial.TrialState.COMPLETE and S.decode(res_space(db), t0.params) == DEFAULT
    assert t0.values == [pytest.approx(1.1, rel=0.01)]
    assert len(asked(db, DEFAULT)) == 1


def res_space(db):
    from cudalab.tuning import replay as RP

    return RP.load_campaign(f"sqlite:///{db}")[0]


@pytest.mark.parametrize("strategy", ["tpe", "random"])
def test_a_resumed_campaign_does_not_measure_the_default_again(fake, tmp_path, strategy):
    points = fake()
    db = tmp_path / "r.db"
    tune(db, strategy=strategy, trials=3, race=0)
    res = tune(db, strategy=strategy, trials=7, race=0)
    assert first(res).point == DEFAULT and [m.point for m in res.trials].count(DEFAULT) == 1
    assert len(asked(db, DEFAULT)) == 1  # not even asked again (a repeat would be an ask and a tell)
    assert points() == 7


def test_a_campaign_that_never_measured_the_default_measures_it_when_it_resumes(fake, tmp_path, monkeypatch):
    from cudalab.tuning import drive

    points = fake()
    db = tmp_path / "o.db"
    with monkeypatch.context() as m:  # as a campaign run before the default went first
        m.setattr(drive, "proposer", lambda p: Proposer(p.space, p.strategy, p.opts.seed, p.valid_points))
        before = tune(db, strategy="random", trials=3, race=0)
    assert DEFAULT not in [m.point for m in before.trials]
    res = tune(db, strategy="random", trials=4, race=0)
    assert [m.point for m in res.trials].count(DEFAULT) == 1 and points() == 4


def test_a_default_outside_the_space_is_raced_beside_the_best_and_never_wins(fake, tmp_path):
    fake({"_ms": FASTEST})  # UNROLL=4 is the fastest, but the space is 5..8: the default is not a trial
    res = tune(tmp_path / "x.db", strategy="random", trials=3, race=2, defines={"UNROLL": "5..8"}, block="256",
               require=[])
    assert all(m.point != DEFAULT for m in res.trials) and len(res.trials) == 3
    assert res.race.samples.get(KEY) and res.winner != KEY  # measured every round, for the speedup only
    assert res.speedup(res.winner) < 0.95  # the default is faster than anything the space holds


def test_a_default_that_breaks_a_constraint_is_neither_a_trial_nor_raced(fake, tmp_path):
    fake({"_ms": FASTEST})
    res = tune(tmp_path / "y.db", strategy="tpe", trials=3, race=2, defines={"UNROLL": "1..8"}, block="256",
               require=["UNROLL >= 5"])
    assert all(m.point != DEFAULT for m in res.trials) and KEY not in res.race.samples


# ---- replay ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["random", "grid", "tpe"])
def test_a_replay_starts_each_seed_with_the_default(fake, tmp_path, strategy):
    fake()  # best UNROLL=5 (1.0 ms); the default 1.1 ms
    db = tmp_path / "t.db"
    tune(db, strategy="grid", race=0)
    from cudalab.tuning import replay as RP

    space, table, attrs = RP.load_campaign(f"sqlite:///{db}")
    assert attrs["default"] == DEFAULT and table[KEY] == pytest.approx(1.1, rel=0.01)
    r = RP.replay(space, table, strategy, seeds=4, trials=2, first=attrs["default"])
    assert r.curves[:, 0] == pytest.approx([1 / 1.1] * 4, rel=0.01)
    with sqlite3.connect(db) as con:  # a campaign written before the default was recorded: the catalog's
        con.execute("delete from study_user_attributes where key = 'default'")
    assert RP.load_campaign(f"sqlite:///{db}")[2]["default"] == DEFAULT
    # a default the campaign never measured is not evaluated: the strategy starts as its own
    del table[KEY]
    plain = RP.replay(space, table, strategy, seeds=2, trials=3).curves
    assert (RP.replay(space, table, strategy, seeds=2, trials=3, first=DEFAULT).curves == plain).all()


# ---- a Dask cluster ----------------------------------------------------------------------------------

@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="needs dask[distributed]")
def test_a_cluster_campaign_measures_the_default_first_and_once(dask_fake, tmp_path):  # noqa: F811
    dask_fake({"_ms": FASTEST, "_delay": 0.05})
    res = tune(tmp_path / "d.db", strategy="random", trials=5, race=2, cluster="local", devices="0,1")
    # a walk's trial is written when it comes back: the default went out first, beside the second GPU's first
    assert DEFAULT in [m.point for m in sorted(res.trials, key=lambda m: m.number)[:2]]
    assert [m.point for m in res.trials].count(DEFAULT) == 1
    assert res.winner == KEY


try:
    from test_cluster import dask_fake  # noqa: F401,E402  (its fixture: Dask workers running fake GPU workers)
except ImportError:  # pragma: no cover
    pass


def test_a_campaign_s_build_identity_follows_the_headers_its_kernel_includes(family_tree):
    # an edited header is a fixed kernel: its campaign starts afresh instead of inheriting the old build's failures
    from cudalab import catalog
    from cudalab.tuning.own import build_identity

    root = family_tree("matmul")
    spec = catalog.family("matmul")
    v = next(x for x in spec.variants if x.name == "warptile")
    first = build_identity(spec, v)
    assert build_identity(spec, v) == first
    (root / "matmul" / "notes.txt").write_text("not included by the kernel\n")
    assert build_identity(spec, v) == first
    header = root / "matmul" / "warptile.cuh"
    header.write_text(header.read_text() + "\n// a fix\n")
    assert build_identity(spec, v) != first
