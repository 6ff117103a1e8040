"""A campaign's tasks on the executor interface (issue 58): the local engine runs them one after the other on
workers that stay open, hands each back as it finishes, and a cancelled or crashed task costs its worker, not the
next task; the interface has exactly two implementations. On fake GPU workers, no GPU."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def plans(tmp_path, unrolls):
    """Planned points of ``copy vec4`` at these UNROLL values (as a campaign plans its trials)."""
    pytest.importorskip("optuna")
    from cudalab.tuning.prepare import plan, trial_request
    from cudalab.tuning.options import TuneOptions
    from cudalab.tuning.runs import precheck

    p = plan(TuneOptions(family="copy", variant="vec4", defines=(("UNROLL", "1..8"),), n="1k", block="256",
                         seed=1, strategy="grid", storage=f"sqlite:///{tmp_path / 'x.db'}"))
    return [precheck(trial_request(p, {"block": "256", "UNROLL": str(u)})) for u in unrolls]


def pool(**kw):
    from cudalab.execute.local.engine import LocalPool

    ex = LocalPool([0], **kw)
    ex.start()
    ex.ready()
    return ex


def unroll(point) -> str:
    return dict(point.plan.request.defines)["UNROLL"]


def test_local_tasks_come_back_in_turn_on_one_worker_that_stays_open(fake_workers, tmp_path):
    fake_workers({"_delay": 0.05})
    ex = pool()
    try:
        first, second = plans(tmp_path, [1, 2]), plans(tmp_path, [3])
        a, b = ex.send(first), ex.send(second)  # the second waits for the GPU while the first runs
        t0 = time.monotonic()
        assert ex.next_done(0.02) is None and time.monotonic() - t0 < 0.04  # none ended in 20 ms: back to the loop
        got = [ex.next_done(), ex.next_done(5.0)]
        assert [h for h, _ in got] == [a, b]
        assert [[unroll(pt) for pt in pts] for _, pts in got] == [["1", "2"], ["3"]]
        assert all(r.status.value == "passed" for _, pts in got for pt in pts for r in pt.results)
        assert len(fake_workers.started) == 1  # one worker for both tasks: its GPU opened once
        assert ex.slots() == 1 and ex.batch(0.001) == 1 and ex.describe() == ""
        assert ex.in_workers() >= 3 * 0.05 and ex.waited_builds() < 0.05  # no builds ahead to wait for
        done = ex.send(plans(tmp_path, [4]))
        while not done.done():
            time.sleep(0.01)
        ex.cancel_tasks([done])  # it finished already: its worker is not killed for it
        ex.send(plans(tmp_path, [5]))
        ex.next_done()
        assert len(fake_workers.started) == 1
    finally:
        ex.close()


def test_a_crashed_trial_is_its_own_failed_row_and_the_next_task_gets_a_fresh_worker(fake_workers, tmp_path):
    fake_workers({"vec4#UNROLL=2": "die"})
    ex = pool()
    try:
        ex.send(plans(tmp_path, [2]))
        _, pts = ex.next_done()
        assert [r.status.value for r in pts[0].results] == ["failed"] and "died" in pts[0].results[0].reason
        ex.send(plans(tmp_path, [3]))
        _, pts = ex.next_done()
        assert [r.status.value for r in pts[0].results] == ["passed"]
        assert len(fake_workers.started) == 2
    finally:
        ex.close()


def test_a_cancelled_task_kills_its_worker_and_one_not_started_never_comes_back(fake_workers, tmp_path):
    fake_workers({"vec4#UNROLL=4": "hang"})
    ex = pool(timeout=60.0)
    try:
        hung = ex.send(plans(tmp_path, [4]))
        queued = ex.send(plans(tmp_path, [5]))
        time.sleep(0.5)  # the hung one is on the GPU
        t0 = time.monotonic()
        ex.cancel_tasks([hung, queued])
        assert time.monotonic() - t0 < 5 and queued.cancelled()
        later = ex.send(plans(tmp_path, [6]))
        handle, pts = ex.next_done()  # neither cancelled task is handed back
        assert handle is later and [r.status.value for r in pts[0].results] == ["passed"]
        assert len(fake_workers.started) == 2  # the hung worker was killed; a fresh one ran the next task
    finally:
        ex.close()


def test_the_executor_interface_has_exactly_two_implementations():
    """Each engine is one class on the interface; anything else that ran points would be a third engine that a
    campaign or a sweep would have to tell apart."""
    found = []
    for path in (ROOT / "cudalab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    (b.id if isinstance(b, ast.Name) else getattr(b, "attr", "")) == "Executor" for b in node.bases):
                found.append(f"{path.relative_to(ROOT / 'cudalab')}:{node.name}")
    assert sorted(found) == ["execute/dask/engine.py:DaskPool", "execute/local/engine.py:LocalPool"]


def test_a_local_cluster_s_first_trials_are_built_on_this_host_while_it_starts_the_first_urgently(tmp_path, monkeypatch):
    # --cluster local: its GPU workers share this host's build cache, so its first trials need not wait for the
    # cluster to start; a remote cluster's hosts are not known before its workers answer
    pytest.importorskip("distributed")
    from cudalab.execute.dask.engine import DaskPool
    from cudalab.instruments import driverquery
    from cudalab.tuning.buildpool import BuildPool

    gate = threading.Event()
    built, urgents = [], []

    class Pool(BuildPool):
        def submit(self, job, urgent=False, request=None):
            urgents.append(urgent)
            return super().submit(job, urgent, request)

    def build_of(req, arch):
        return lambda: (gate.wait(5), built.append((dict(req.defines)["UNROLL"], arch)))

    monkeypatch.setattr(driverquery, "arch_here", lambda: "sm_90")
    first, second = plans(tmp_path, [1, 2])
    ex = DaskPool("local", [0], builds=lambda: Pool(2), build_of=build_of)
    assert ex.ahead() == 2  # before the cluster opens: this host's build threads
    ex.prebuild(first)
    ex.prebuild(second)
    ex.prebuild(first)  # asked again: built once
    assert not ex.built(first) and ex.builds_queued() == 2
    gate.set()
    deadline = time.monotonic() + 5
    while not (ex.built(first) and ex.built(second)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ex.built(first) and ex.built(second) and ex.builds_queued() == 0
    assert sorted(built) == [("1", "sm_90"), ("2", "sm_90")] and urgents == [True, False]
    ex.close()

    remote = DaskPool("tcp://gpu1:8786", [0], builds=lambda: Pool(2), build_of=build_of)
    assert remote.ahead() == 0
    remote.prebuild(first)
    assert remote.built(first) and remote.builds_queued() == 0 and len(built) == 2
