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

    def campaign(folder, trials, extra, cache, timeout, profile=None):
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

    def campaign(folder, trials, extra, cache, timeout, profile=None):
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

    def campaign(folder, trials, extra, cache, timeout, profile=None):
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
