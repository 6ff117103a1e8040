"""Throughput of a tune campaign on a local Dask cluster of fake GPUs: 1 GPU against 2 and 4 (CPU only).

Each fake trial takes ``--delay`` seconds on its GPU worker (tests/fake_worker_main.py's ``_delay``), so the
figures measure cudalab's and Dask's overhead per trial, not a GPU. Writes a JSON file of the figures::

    python scripts/bench_cluster.py --trials 200 --gpus 4 --delay 0.3 --delay 0.1 --out docs/benchmarks/cluster-cpu.json

Throughput is counted over the trials (from the first recorded trial to the last), not the cluster's start
(seconds, once per campaign) nor its close. Ratio = (trials/s on G GPUs) / (G x trials/s on 1 GPU); the
target is >= 0.85. The default delay, 0.3 s, is the short end of a real trial (a matmul warptile trial:
a build from a warm cache, upload, verification and 0.1 s of timing take 0.3-1 s); 0.1 s is a stress test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"


def campaign(gpus: int, trials: int, folder: Path, strategy: str = "random") -> dict[str, float]:
    """Trials per second of a campaign of ``trials`` on ``gpus`` fake GPUs: over the trials, and over the
    whole call (the cluster's start and close included)."""
    import cudalab

    seen: list[float] = []

    def on_event(what: str, data: dict) -> None:
        if what == "trial":
            seen.append(time.monotonic())

    t0 = time.monotonic()
    res = cudalab.tune("copy", "vec4", n="1k", defines={"UNROLL": "1..64"}, block="32..1024:pow2", strategy=strategy,
                       trials=trials, seed=1, race=0, build_ahead=0, cluster="local", on_event=on_event,
                       devices=",".join(str(d) for d in range(gpus)), storage=f"sqlite:///{folder / f'g{gpus}.db'}")
    wall = time.monotonic() - t0
    ran = [m for m in res.trials if m.status == "passed"]
    assert len(ran) == trials, (len(ran), trials)
    # Over the trials: the first G come back together (every GPU started at once); count from the first.
    return {"trials_per_s": round((len(seen) - 1) / (seen[-1] - seen[0]), 3), "wall_trials_per_s": round(trials / wall, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=4, help="the most GPUs: 1, 2, 4... up to this are measured")
    ap.add_argument("--delay", type=float, action="append", help="seconds a fake trial takes on its GPU "
                    "(repeat for several; default 0.3)")
    ap.add_argument("--strategy", default="random")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(TESTS))  # the Nannies (in this process) import the preload too
    os.environ["PYTHONPATH"] = str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", "")
    import dask

    dask.config.set({"distributed.worker.preload": ["fake_dask_preload"]})
    counts = [g for g in (1, 2, 4, 8, 16) if g <= args.gpus] + ([args.gpus] if args.gpus not in (1, 2, 4, 8, 16) else [])
    runs = []
    for delay in args.delay or [0.3]:
        os.environ["FAKE_WORKER"] = json.dumps({"_delay": delay, "_ms": "1 + abs(UNROLL - 5) / 100"})
        with tempfile.TemporaryDirectory() as tmp:
            got = {g: campaign(g, args.trials, Path(tmp), args.strategy) for g in counts}
        one = got[1]["trials_per_s"]
        for g, fig in got.items():
            runs.append({"delay_s": delay, "gpus": g, **fig, "ideal_trials_per_s": round(g * one, 3),
                         "ratio": round(fig["trials_per_s"] / (g * one), 3)})
            print(json.dumps(runs[-1]), flush=True)
    fig = {"trials": args.trials, "strategy": args.strategy, "cpu_cores": os.cpu_count(), "runs": runs,
           "note": "fake GPU workers (CPU only): cudalab + Dask overhead per trial, no kernel timed; trials/s counted "
                   "from the first recorded trial to the last (wall_trials_per_s: the whole call, the cluster's "
                   "start and close included)"}
    text = json.dumps(fig, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
