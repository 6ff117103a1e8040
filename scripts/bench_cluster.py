"""Throughput of a tune campaign on a local Dask cluster of fake GPUs: 1 GPU against N GPUs (CPU only).

Each fake trial takes ``--delay`` seconds on its GPU worker (tests/fake_worker_main.py's ``_delay``), so the
figures measure cudalab's and Dask's overhead per trial, not a GPU. Writes a JSON file of the figures::

    python scripts/bench_cluster.py --trials 200 --gpus 4 --delay 0.1 --out docs/benchmarks/cluster-cpu.json

Ratio = (trials/s on N GPUs) / (N x trials/s on 1 GPU); the target is >= 0.85.
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


def campaign(gpus: int, trials: int, folder: Path) -> float:
    """Trials per second of a random-strategy campaign of ``trials`` on ``gpus`` fake GPUs."""
    import cudalab

    t0 = time.monotonic()
    res = cudalab.tune("copy", "vec4", n="1k", defines={"UNROLL": "1..64"}, block="32..1024:pow2", strategy="random",
                       trials=trials, seed=1, race=0, build_ahead=0, cluster="local",
                       devices=",".join(str(d) for d in range(gpus)), storage=f"sqlite:///{folder / f'g{gpus}.db'}")
    wall = time.monotonic() - t0
    ran = [m for m in res.trials if m.status == "passed"]
    assert len(ran) == trials, (len(ran), trials)
    return trials / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--delay", type=float, default=0.1, help="seconds a fake trial takes on its GPU")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(TESTS))  # the Nannies (in this process) import the preload too
    os.environ["PYTHONPATH"] = str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", "")
    os.environ["FAKE_WORKER"] = json.dumps({"_delay": args.delay, "_ms": "1 + abs(UNROLL - 5) / 100"})
    import dask

    dask.config.set({"distributed.worker.preload": ["fake_dask_preload"]})
    with tempfile.TemporaryDirectory() as tmp:
        one = campaign(1, args.trials, Path(tmp))
        many = campaign(args.gpus, args.trials, Path(tmp))
    fig = {"trials": args.trials, "gpus": args.gpus, "delay_s": args.delay, "one_gpu_trials_per_s": round(one, 3),
           "n_gpu_trials_per_s": round(many, 3), "ideal_trials_per_s": round(args.gpus * one, 3),
           "ratio": round(many / (args.gpus * one), 3), "cpu_cores": os.cpu_count(),
           "note": "fake GPU workers (CPU only): cudalab + Dask overhead per trial, no kernel timed"}
    text = json.dumps(fig, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
