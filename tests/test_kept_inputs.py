"""A worker's next point of the same family, problem and seed takes the last point's inputs and reference
(cudalab.worker.kept, issue 43): drawn once, read-only, the generator going on as after the draw, the host
memory credited, and let go before a point that differs draws its own."""

from __future__ import annotations

import gc
import os
import weakref

import numpy as np
import pytest

from cudalab import memplan
from cudalab import plan as planning
from cudalab.errors import OutOfMemoryError
from cudalab.records.results import Status
from cudalab.worker import executor as runner
from cudalab.worker import serve as S
from cudalab.worker.protocol import encode
from test_early import Device, Events, pipe_with
from test_runcore import FAST, good_copy, good_transpose

KERNELS = {"copy_naive": good_copy, "transpose_naive": good_transpose}


def plan(family="copy", n="64", seed=3, block=None):
    return planning.precheck(planning.RunRequest(family=family, variants="naive", n=n, protocol=FAST, seed=seed,
                                                 roofline=False, block=block))


def count_draws(monkeypatch, *plans, check=None):
    """Count make_inputs calls of the plans' families; ``check`` runs before each draw."""
    calls = []
    for cls in {type(p.family) for p in plans}:
        real = cls.make_inputs

        def counted(self, problem, rng, _real=real):
            if check is not None:
                check(len(calls))
            calls.append(problem)
            return _real(self, problem, rng)

        monkeypatch.setattr(cls, "make_inputs", counted)
    return calls


def serve(*plans):
    """One worker session through serve's loop: each plan a point op; the events it sent."""
    inp, w = pipe_with(*[encode({"op": "point", "id": 0, "plan": p.to_dict()}) for p in plans], encode({"op": "exit"}))
    out = Events()
    S.serve(inp, out, 0, open_device=lambda i, e: (Device(KERNELS), None, ""))
    os.close(w)
    return out.got


def test_a_point_of_the_same_problem_and_seed_takes_the_last_points_inputs(monkeypatch):
    # a tune campaign: one problem, one seed, a configuration each trial
    plans = [plan(block="32x8"), plan(block="16x16"), plan(block="8x32")]
    calls = count_draws(monkeypatch, *plans)
    got = serve(*plans)
    rows = [e["row"] for e in got if e["ev"] == "row"]
    assert [r["block"] for r in rows] == ["32x8", "16x16", "8x32"] and all(r["status"] == "passed" for r in rows), rows
    assert len(calls) == 1
    stages = [e["stage"] for e in got if e["ev"] == "stage" and e["variant"] == "inputs"]
    assert stages == ["preparing", "reused", "reused"]


@pytest.mark.parametrize("other", [plan(n="96"), plan(seed=4), plan(family="transpose")],
                         ids=["size", "seed", "family"])
def test_a_point_that_would_draw_other_inputs_draws_its_own(monkeypatch, other):
    # transpose draws the very matrix copy does, but its reference is another: the family is in the key
    calls = count_draws(monkeypatch, plan(), other)
    rows = [e["row"] for e in serve(plan(), other) if e["ev"] == "row"]
    assert len(calls) == 2 and [r["status"] for r in rows] == ["passed", "passed"], rows


def test_the_kept_arrays_are_read_only_and_a_family_writing_into_them_fails_loudly(monkeypatch):
    first = runner.FamilyRun(plan(), None)
    first.prepare()
    a = first.inputs["a"]
    assert not a.flags.writeable and not first.reference.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a[0, 0] = 1.0
    taken = runner.FamilyRun(plan(block="16x16"), None, kept=first.drawn)
    assert taken.reused and taken.inputs["a"] is a and taken.reference is first.reference

    fam = type(plan().family)
    real = fam.setup

    def writes(self, ctx):  # a family that scribbles on its host input: its row says so, no later point sees it
        ctx.inputs["a"][0, 0] = -1.0
        return real(self, ctx)

    monkeypatch.setattr(fam, "setup", writes)
    taken.device = Device(KERNELS)
    (row,) = taken.run()
    assert row.status == Status.FAILED and "read-only" in row.reason
    assert a[0, 0] != -1.0


def test_a_point_that_takes_them_draws_on_as_after_the_draw():
    # reduce's setup draws its exactly summable inputs from the same generator, after make_inputs
    fresh = runner.FamilyRun(plan(), None)
    fresh.prepare()
    taken = runner.FamilyRun(plan(block="16x16"), None, kept=fresh.drawn)
    assert taken.rng.random() == fresh.rng.random()


def test_a_point_that_takes_them_counts_them_once_in_its_host_memory(monkeypatch):
    first = runner.FamilyRun(plan(), None)
    first.prepare()
    assert first.drawn.nbytes == first.inputs["a"].nbytes  # copy's reference is its input: held once
    p = plan(block="16x16")
    need = memplan.plan(p.family, p.problem, None, None).host_need
    # short by less than the kept bytes: a fresh point is refused, one that holds its inputs already fits
    monkeypatch.setattr(memplan, "host_available", lambda: int(need / (1 - memplan.HEADROOM)) - first.drawn.nbytes // 2)
    with pytest.raises(OutOfMemoryError):
        runner.FamilyRun(p, Device(KERNELS)).check_memory()
    runner.FamilyRun(p, Device(KERNELS), kept=first.drawn).check_memory()


def test_a_point_that_differs_lets_the_kept_set_go_before_it_draws(monkeypatch):
    # one set at most: a worker holding the last point's gigabyte while the next draws its own needs two
    first, other = plan(), plan(n="96")
    seen: list[weakref.ref] = []
    real = runner.draw

    def draw(p, rng):
        got = real(p, rng)
        seen.append(weakref.ref(got.inputs["a"]))
        return got

    def check(i):
        if i == 1:
            assert seen[0]() is None, "the first point's inputs are still held while the second draws"

    monkeypatch.setattr(runner, "draw", draw)
    calls = count_draws(monkeypatch, first, other, check=check)
    gc.disable()  # freed because nothing refers to them, not because a collection happened to run
    try:
        rows = [e["row"] for e in serve(first, other) if e["ev"] == "row"]
    finally:
        gc.enable()
    assert len(calls) == 2 and [r["status"] for r in rows] == ["passed", "passed"], rows
