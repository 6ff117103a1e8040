"""CUDALAB_TIMELINE (cudalab/execute/timeline.py): a campaign on this host's engine writes when each build ahead and
each task began and ended, which scripts/campaign_timeline.py reads back."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

optuna = pytest.importorskip("optuna")

from test_tune import fake, tune  # noqa: F401,E402  (the fake-worker fixture tune's tests use)


def _campaign(tmp_path, monkeypatch):
    from cudalab import build
    from cudalab.instruments import driverquery

    monkeypatch.setattr(build, "build", lambda *a, **k: None)  # the fake workers need no cubin
    monkeypatch.setattr(driverquery, "arch_here", lambda: "sm_90")
    return tune(tmp_path / "c.db", strategy="grid", race=0, build_ahead=2, defines={"UNROLL": "1..4"}, block="256")


def test_a_campaign_writes_each_trial_s_build_and_task_in_order(fake, tmp_path, monkeypatch):
    fake()
    path = tmp_path / "timeline.jsonl"
    monkeypatch.setenv("CUDALAB_TIMELINE", str(path))
    res = _campaign(tmp_path, monkeypatch)
    assert len([m for m in res.trials if m.status == "passed"]) == 4
    events = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["ev"] for e in events].count("loop") == 1
    by = defaultdict(dict)
    for e in events:
        by[e["what"]].setdefault(e["ev"], e["t"])
    trials = [w for w in by if w]
    assert len(trials) == 4 and all(w.startswith("vec4 256 UNROLL=") for w in trials), trials
    loop = next(e["t"] for e in events if e["ev"] == "loop")
    for w in trials:
        t = by[w]
        assert {"build-start", "build-end", "send", "task-wait", "task-run", "task-end"} <= set(t), (w, t)
        assert ("build-urgent" in t) != ("build-queued" in t)
        assert t.get("build-urgent", t.get("build-queued")) <= t["build-start"] <= t["build-end"] <= t["task-run"]
        assert loop <= t["send"] <= t["task-wait"] <= t["task-run"] <= t["task-end"]
    assert sum("build-urgent" in by[w] for w in trials) == 1  # the first build the GPU waits for

