"""Strategies on a constrained space: walks over the valid points, and repair of a proposal that breaks a
constraint (cudalab.tuning.propose). No GPU: the campaigns run on fake workers."""

from __future__ import annotations

import pytest

import cudalab
from cudalab.tuning.propose import Proposer
from cudalab.tuning.result import point_key
from cudalab.tuning.space import Dim, Space

pytest.importorskip("optuna")

# 3 x 4 points of which those with A + B <= 3 are valid (10 of 16 would be; here 4 x 4 and A + B <= 3).
SPACE = Space(dims=(Dim("A", "define", ("0", "1", "2", "3"), False), Dim("B", "define", ("0", "1", "2", "3"), False)),
              require=("A + B <= 3",))


def test_repair_keeps_a_valid_point_and_moves_an_invalid_one_to_its_nearest_valid_point():
    prop = Proposer(SPACE, "tpe", 1, SPACE.valid_points())
    ok = {"A": "1", "B": "1"}
    assert prop.repair(ok) is ok
    assert prop.repair({"A": "3", "B": "3"}) == {"A": "0", "B": "3"}  # distance 1 each way: the first in order
    assert prop.repair({"A": "3", "B": "1"}) == {"A": "2", "B": "1"}
    assert prop.size == 10 and prop.walk is None


@pytest.mark.parametrize("strategy", ["grid", "random"])
def test_a_walk_visits_every_valid_point_once(strategy):
    valid = SPACE.valid_points()
    prop = Proposer(SPACE, strategy, 3, valid)
    seen = []
    while (pt := prop.next_walk(seen)) is not None:
        seen.append(point_key(pt))
    assert sorted(seen) == sorted(point_key(p) for p in valid)
    assert (seen == [point_key(p) for p in valid]) == (strategy == "grid")  # random: another order
    again = Proposer(SPACE, strategy, 3, valid)
    assert [point_key(again.next_walk([])) for _ in range(3)] == seen[:3]  # the seed makes it repeatable


def test_a_model_based_campaign_on_a_sparse_space_runs_valid_points_only(fake_workers, tmp_path):
    # 8 x 5 points, a quarter valid: without repair TPE asks mostly refused points and the campaign never fills
    fake_workers({"_ms": "1 + abs(UNROLL - 5) / 10 + abs(threads - 256) / 1000"})
    res = cudalab.tune("copy", "vec4", n="1k", defines={"UNROLL": "1..8"}, block="64..1024:pow2",
                       require=["threads * UNROLL <= 1024"], strategy="tpe", trials=8, seed=2, race=0,
                       build_ahead=0, storage=f"sqlite:///{tmp_path / 'c.db'}")
    assert len(res.trials) == 8 and all(m.status == "passed" for m in res.trials), [(m.status, m.reason)
                                                                                    for m in res.trials]
    assert all(int(m.point["UNROLL"]) * int(m.point["block"]) <= 1024 for m in res.trials)


def test_the_nearest_unseen_point_skips_what_was_measured():
    prop = Proposer(SPACE, "tpe", 1, SPACE.valid_points())
    seen = {point_key({"A": "1", "B": "1"})}
    assert prop.nearest_unseen({"A": "1", "B": "1"}, seen) == {"A": "0", "B": "1"}  # distance 1/3, first in order
    assert prop.nearest_unseen({"A": "0", "B": "0"}, [point_key(p) for p in SPACE.valid_points()]) is None


def test_a_repeat_is_followed_by_its_nearest_unmeasured_neighbour(fake_workers, tmp_path):
    # TPE on a small space proposes points it has measured; each repeat costs an ask and a tell on the driver.
    # After a repeat the nearest point not yet measured runs next: 30 of 36 points took 39 asks (66 and 81 without).
    optuna = pytest.importorskip("optuna")
    fake_workers({"_ms": "1 + abs(UNROLL - 5) / 10 + abs(threads - 256) / 1000"})
    res = cudalab.tune("copy", "vec4", n="1k", defines={"UNROLL": "1..8"}, block="64..1024:pow2",
                       require=["threads * UNROLL <= 4096"], strategy="tpe", trials=30, seed=2, race=0,
                       build_ahead=0, storage=f"sqlite:///{tmp_path / 'c.db'}")
    asks = len(optuna.load_study(study_name=res.name, storage=f"sqlite:///{tmp_path / 'c.db'}").trials)
    assert len([m for m in res.trials if m.status == "passed"]) == 30 and asks <= 50, asks
