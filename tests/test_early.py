"""A worker's first point planned while its GPU opens (cudalab.worker.early): the inputs it draws then are
the ones the point would have drawn, nothing is said before ``ready``, and a point that cannot be
planned early is planned again with the GPU open."""

from __future__ import annotations

import os
import time

import numpy as np

from cudalab import plan as planning
from cudalab.worker import executor as runner
from cudalab.records.device import DeviceInfo
from cudalab.worker import early
from cudalab.worker import serve as S
from cudalab.worker.protocol import decode, encode
from test_runcore import FAST, FakeDevice, good_copy

REQ = planning.RunRequest(family="copy", variants="naive", n="64", protocol=FAST, seed=3, roofline=False)
PLAN = planning.precheck(REQ)


def pipe_with(*lines: bytes):
    r, w = os.pipe()
    for line in lines:
        os.write(w, line)
    return os.fdopen(r, "r", encoding="utf-8"), w


def test_the_first_point_is_planned_with_the_inputs_it_would_have_drawn():
    inp, w = pipe_with(encode({"op": "point", "id": 0, "plan": PLAN.to_dict()}))
    line, run = early.first_point(inp, lambda: True)
    assert decode(line)["op"] == "point"
    plain = runner.FamilyRun(PLAN, None)
    plain.prepare()
    assert np.array_equal(run.inputs["a"], plain.inputs["a"]) and run.device is None
    os.close(w)


def test_no_operation_while_the_gpu_opens_waits_no_longer_than_the_opening():
    inp, w = pipe_with()
    t0 = time.monotonic()
    until = t0 + 0.1
    assert early.first_point(inp, lambda: time.monotonic() < until) is None
    assert time.monotonic() - t0 < 1.0
    os.close(w)


def test_other_operations_and_unplannable_points_are_left_for_later(monkeypatch):
    inp, w = pipe_with(encode({"op": "info"}))
    line, run = early.first_point(inp, lambda: True)
    assert decode(line)["op"] == "info" and run is None
    bad = dict(PLAN.to_dict(), request=planning.RunRequest(family="no-such-family").to_dict())
    inp, w2 = pipe_with(encode({"op": "point", "id": 0, "plan": bad}))
    assert early.first_point(inp, lambda: True)[1] is None  # planned again with the GPU open: its error then
    from cudalab import memplan

    monkeypatch.setattr(memplan, "host_available", lambda: 1)  # the host cannot hold it: nothing is drawn
    inp, w3 = pipe_with(encode({"op": "point", "id": 0, "plan": PLAN.to_dict()}))
    assert early.first_point(inp, lambda: True)[1] is None
    for fd in (w, w2, w3):
        os.close(fd)


class Device(FakeDevice):
    info = DeviceInfo(index=0, name="Fake GPU", compute_capability=(9, 0), sm_count=132, total_memory=80 << 30,
                      l2_bytes=50 << 20, sm_clock_mhz=1980, mem_clock_mhz=2619, bus_width_bits=5120,
                      driver_version="13.0", cuda_version="13.0")


class Events:
    def __init__(self):
        self.got = []

    def write(self, data):
        self.got.extend(decode(x + b"\n") for x in data.split(b"\n") if x)

    def flush(self):
        pass


def test_serve_answers_the_early_point_after_ready_with_what_it_drew(monkeypatch):
    drawn = []
    real = runner.FamilyRun.prepare

    def prepare(self):
        drawn.append(bool(self.inputs))
        real(self)

    monkeypatch.setattr(runner.FamilyRun, "prepare", prepare)
    inp, w = pipe_with(encode({"op": "point", "id": 0, "plan": PLAN.to_dict()}), encode({"op": "exit"}))
    out = Events()
    S.serve(inp, out, 0, open_device=lambda i, e: (Device({"copy_naive": good_copy}), None, ""), opening=lambda: True)
    kinds = [e["ev"] for e in out.got if e["ev"] != "beat"]
    assert kinds[0] == "ready" and kinds[-1] == "bye" and "done" in kinds
    row = next(e["row"] for e in out.got if e["ev"] == "row")
    assert row["variant"] == "naive" and row["status"] == "passed"
    assert drawn[0] is False and all(drawn[1:])  # drawn once, before the GPU was open; never again
    bye = next(e for e in out.got if e["ev"] == "bye")  # the worker's own peak memory, for the run's record
    assert bye["telemetry"]["worker_peak_rss_mib"] > 10
    os.close(w)


def test_each_point_op_runs_its_own_plan_even_under_an_id_seen_before():
    # A long-lived session (tune's) numbers each call's points from 0 again: a worker that took the run it kept
    # for point 0's roofline ran the trial before's configuration (every trial of an H100 campaign timed the same).
    plans = [planning.precheck(planning.RunRequest(family="copy", variants="naive", n="64", protocol=FAST, seed=3,
                                                   roofline=False, block=b)) for b in ("32x8", "16x16")]
    inp, w = pipe_with(*[encode({"op": "point", "id": 0, "plan": p.to_dict()}) for p in plans], encode({"op": "exit"}))
    out = Events()
    S.serve(inp, out, 0, open_device=lambda i, e: (Device({"copy_naive": good_copy}), None, ""), opening=lambda: True)
    rows = [e["row"] for e in out.got if e["ev"] == "row"]
    assert [r["block"] for r in rows] == ["32x8", "16x16"] and all(r["status"] == "passed" for r in rows), rows
    os.close(w)
