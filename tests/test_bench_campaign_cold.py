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

    def campaign(folder, trials, extra, cache, timeout):
        caches.append(cache)
        name = "cluster" if extra else ("warm" if folder.name == "warm" else "local")
        return _run(walls[name] + 3, {"trials": 15.0, "builds": 1.0, "search": 0.5, "race": 0.0, "wall": walls[name],
                                  "in_workers": 15.0 if name == "warm" else 18.0})

    monkeypatch.setattr(B, "campaign", campaign)
    monkeypatch.setattr(B, "builds_cpu", lambda points, arch, cache, cores: (16.0 * 10, 12.0))
    monkeypatch.setattr(B.os, "cpu_count", lambda: 16)
    assert B.main(["--out", str(tmp_path)]) == 1  # 20 s and 30 s are over max(10, 15) x 1.2 = 18 s (the campaigns' own walls)
    rec = json.loads((tmp_path / "nvidia-h200-campaign.json").read_text())
    assert (rec["builds_term_s"], rec["gpu_work_s"], rec["bound_s"]) == (10.0, 15.0, 18.0)
    assert rec["runs"]["local"]["pass"] is False and rec["runs"]["cluster"]["pass"] is False
    walls.update(local=17.5, cluster=18.0)
    assert B.main(["--out", str(tmp_path)]) == 0
    assert "PASS" in (tmp_path / "nvidia-h200-campaign.md").read_text()
    # the two cold campaigns never share a cache; the warm one is the local one's, as it says
    cold = [c for i, c in enumerate(caches) if i % 3 != 2]
    assert len(set(cold)) == len(cold) and all(caches[i].name == "cache-local" for i in range(2, len(caches), 3))
