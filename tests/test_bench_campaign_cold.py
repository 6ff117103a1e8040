"""scripts/bench_campaign_cold.py on the CPU: its bound, verdicts and record from given figures (the campaigns
themselves need a GPU), and each campaign in its own empty build cache."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_campaign_cold", ROOT / "scripts" / "bench_campaign_cold.py")
B = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(B)


def _run(wall: float, account: dict) -> dict:
    return {"wall_s": wall, "account": account, "gpu_busy_pct": 40.0, "trials": [{"block": "256"}] * 30, "passed": 30,
            "gpu": "NVIDIA H200", "cc": "9.0"}


def test_the_bound_is_the_larger_term_plus_20_percent_and_each_campaign_is_judged_on_its_wall(monkeypatch, tmp_path):
    caches = []
    walls = {"local": 20.0, "cluster": 30.0, "warm": 16.0}

    def campaign(folder, trials, extra, cache, timeout, profile=None, timeline=None):
        caches.append(cache)
        name = "cluster" if extra else ("warm" if folder.name == "warm" else "local")
        return _run(walls[name] + 3, {"trials": 15.0, "builds": 1.0, "search": 0.5, "race": 0.0, "wall": walls[name],
                                  "in_workers": 15.0 if name == "warm" else 18.0})

    monkeypatch.setattr(B, "campaign", campaign)
    monkeypatch.setattr(B, "builds_cpu", lambda points, arch, cache, cores: (16.0 * 10, 12.0))
    monkeypatch.setattr(B, "first_build_s", lambda point, arch, cache: 1.25)
    monkeypatch.setattr(B.os, "cpu_count", lambda: 16)
    assert B.main(["--out", str(tmp_path)]) == 1  # 20 s and 30 s are over max(10, 15) x 1.2 = 18 s (the campaigns' own walls)
    rec = json.loads((tmp_path / "nvidia-h200-campaign.json").read_text())
    assert (rec["builds_term_s"], rec["gpu_work_s"], rec["bound_s"]) == (10.0, 15.0, 18.0)
    assert rec["first_build_s"] == 1.25 and rec["warm_account"]["wall"] == 16.0
    assert rec["runs"]["local"]["pass"] is False and rec["runs"]["cluster"]["pass"] is False
    walls.update(local=17.5, cluster=18.0)
    assert B.main(["--out", str(tmp_path)]) == 0
    assert "PASS" in (tmp_path / "nvidia-h200-campaign.md").read_text()
    # the two cold campaigns never share a cache; the warm one is the local one's, as it says
    cold = [c for i, c in enumerate(caches) if i % 3 != 2]
    assert len(set(cold)) == len(cold) and all(caches[i].name == "cache-local" for i in range(2, len(caches), 3))


def test_builds_only_builds_the_campaigns_own_first_trials_default_first(monkeypatch, capsys):
    """--builds-only (no GPU): the points are the campaign's random walk's, refused ones left out, all distinct."""
    from cudalab.tuning.drive import plan, proposer
    from cudalab.tuning.options import TuneOptions

    got = {}
    monkeypatch.setattr(B, "builds_cpu", lambda points, arch, cache, cores: got.update(points=points, arch=arch) or (30.0, 9.0))
    monkeypatch.setattr(B, "first_build_s", lambda point, arch, cache: got.update(first=point) or 1.5)
    assert B.main(["--builds-only", "--trials", "12", "--arch", "sm_90"]) == 0
    p = plan(TuneOptions(family="matmul", variant="warptile", strategy="random", seed=7, race=0))
    walk = proposer(p)
    assert len(got["points"]) == 12 and len({json.dumps(pt, sort_keys=True) for pt in got["points"]}) == 12
    assert got["first"] == got["points"][0] == walk.first and got["arch"] == "sm_90"
    assert got["points"] == [pt for pt in walk.walk if not p.space.allows(pt)][:12]
    assert "builds: 30.0 CPU-s for 12 trials, 2.50 each" in capsys.readouterr().out


def test_profile_writes_each_campaign_s_processes_top_functions_cold_and_warm(monkeypatch, tmp_path):
    import cProfile

    from cudalab.textcells import clean

    def campaign(folder, trials, extra, cache, timeout, profile=None, timeline=None):
        name = "cluster" if extra else ("warm" if folder.name == "warm" else "local")
        prof = cProfile.Profile()
        prof.enable()
        clean("a campaign's work")  # a function of cudalab's, which the summary keeps
        prof.disable()
        prof.dump_stats(str(profile / f"worker-{name}.prof"))
        return _run(20.0, {"trials": 15.0, "builds": 1.0, "search": 0.5, "race": 0.0, "wall": 17.0, "in_workers": 15.0})

    monkeypatch.setattr(B, "campaign", campaign)
    monkeypatch.setattr(B, "builds_cpu", lambda points, arch, cache, cores: (160.0, 12.0))
    monkeypatch.setattr(B, "first_build_s", lambda point, arch, cache: 1.25)
    B.main(["--out", str(tmp_path / "rec"), "--profile", str(tmp_path / "prof")])
    text = (tmp_path / "prof" / "profiles.txt").read_text()
    assert [line for line in text.splitlines() if line.startswith("===")] == [
        "=== cluster: worker-cluster.prof", "=== local: worker-local.prof", "=== warm: worker-warm.prof"]
    assert text.count("textcells.py") == 3  # cudalab's profiled function, in each


def test_tune_args_reach_every_campaign_and_the_record_names_them(monkeypatch, tmp_path):
    seen = {}

    def campaign(folder, trials, extra, cache, timeout, profile=None, timeline=None):
        seen[folder.name] = list(extra)
        return _run(20.0, {"trials": 15.0, "builds": 1.0, "search": 0.5, "race": 0.0, "wall": 17.0, "in_workers": 15.0})

    monkeypatch.setattr(B, "campaign", campaign)
    monkeypatch.setattr(B, "builds_cpu", lambda points, arch, cache, cores: (160.0, 12.0))
    monkeypatch.setattr(B, "first_build_s", lambda point, arch, cache: 1.25)
    B.main(["--out", str(tmp_path), "--tune-args", "--build-ahead 8"])
    assert seen == {"local": ["--build-ahead", "8"], "cluster": ["--build-ahead", "8", "--cluster", "local"],
                    "warm": ["--build-ahead", "8"]}
    rec = json.loads((tmp_path / "nvidia-h200-campaign.json").read_text())
    assert rec["campaign"].endswith("--quiet --build-ahead 8 --trials 30") and "--tune-args" in rec["command"]


def _events(path: Path, rows: list[tuple[float, str, str]]) -> Path:
    path.write_text("".join(json.dumps({"t": 1000.0 + t, "ev": ev, "what": what}) + "\n" for t, ev, what in rows))
    return path


def test_the_timeline_names_each_wait_its_build_and_the_trials_built_and_not_sent_meanwhile(tmp_path):
    T = _load_timeline()
    # a slow build 'b' sent second: the GPU waits 1.5 s for it while 'c' is built and not sent
    rows = [(-1.0, "build-urgent", "a"), (-1.0, "build-queued", "b"), (-1.0, "build-queued", "c"),
            (-1.0, "build-start", "a"), (-1.0, "build-start", "b"), (-1.0, "build-start", "c"),
            (0.0, "loop", ""), (0.0, "send", "a"), (0.0, "task-wait", "a"), (0.5, "build-end", "a"),
            (0.5, "task-run", "a"), (0.6, "send", "b"), (0.6, "build-end", "c"), (0.9, "task-end", "a"),
            (0.9, "task-wait", "b"), (2.4, "build-end", "b"), (2.4, "task-run", "b"), (2.8, "task-end", "b"),
            (2.9, "send", "c"), (3.0, "task-wait", "c"), (3.0, "task-run", "c"), (3.4, "task-end", "c")]
    path = _events(tmp_path / "t.jsonl", rows)
    with path.open("a") as f:
        f.write('{"t": 10')  # a line cut short is left out
    text = T.summary(T.read(path))
    assert "3 tasks, 3 builds" in text and "waited for builds 2.00 s in all, in 2 waits" in text
    assert "at   0.90 s the GPU waited  1.50 s for b: its build queued -1.00, started -1.00, ended 2.40 (3.40 s); " \
           "1 other trials built and not sent then" in text
    assert "at   0.00 s the GPU waited  0.50 s for a" in text and "0 other trials" in text.split("for a:")[1].split("\n")[0]
    assert "idle between tasks, not waiting for a build: 0.20 s" in text  # c's began 0.2 s after b's end (sent at 2.9)
    assert "builds: 3 took 1.50 / 1.60 / 3.40 s" in text and "the first ended at 0.50 s, the last at 2.40 s" in text
    assert T.summary([]).startswith("no events")


def _load_timeline():
    spec = importlib.util.spec_from_file_location("campaign_timeline", ROOT / "scripts" / "campaign_timeline.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_timeline_writes_the_local_cold_campaign_s_beside_the_record(monkeypatch, tmp_path):
    seen = {}

    def campaign(folder, trials, extra, cache, timeout, profile=None, timeline=None):
        seen[folder.name] = timeline
        if timeline is not None:
            _events(timeline, [(0.0, "loop", ""), (0.0, "task-wait", "a"), (0.7, "task-run", "a"), (1.0, "task-end", "a"),
                               (-1.0, "build-start", "a"), (0.7, "build-end", "a")])
        return _run(20.0, {"trials": 15.0, "builds": 1.0, "search": 0.5, "race": 0.0, "wall": 17.0, "in_workers": 15.0})

    monkeypatch.setattr(B, "campaign", campaign)
    monkeypatch.setattr(B, "builds_cpu", lambda points, arch, cache, cores: (160.0, 12.0))
    monkeypatch.setattr(B, "first_build_s", lambda point, arch, cache: 1.25)
    B.main(["--out", str(tmp_path), "--timeline"])
    assert seen["local"] is not None and seen["cluster"] is None and seen["warm"] is None  # the local cold one's only
    text = (tmp_path / "nvidia-h200-campaign-timeline.txt").read_text()
    assert "--timeline: the local cold campaign" in text and "the GPU waited  0.70 s for a" in text
    B.main(["--out", str(tmp_path / "plain")])
    assert not (tmp_path / "plain" / "nvidia-h200-campaign-timeline.txt").exists()
