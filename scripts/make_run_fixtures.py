"""Write the run-record fixtures under tests/data/runs/ that do not come from a GPU run of their own.

* ``v1-synthetic-*.json``: files in the version-1 shape (what ``cudalab <family> --json`` wrote
  before run records: one payload, or ``{"sweep": [payloads]}`` for ``--block a,b,c``).
  ``v1-synthetic-transpose.json`` wraps the real H200 transpose rows of
  ``docs/benchmarks/nvidia-h200.json`` in that envelope; the reduce block sweep's samples are made
  up (seeded), shaped like the H200's.
* ``v2-h200-converted-*.json``: schema-2 records whose rows, device and rooflines are the real H200
  measurements of ``docs/benchmarks/nvidia-h200.json`` (2026-11-22); only the envelope is written
  here (``machine.note`` says so).

Real H100/H200 records come from ``cudalab <family> --json tests/data/runs/<gpu>-<family>.json``.

Usage: python scripts/make_run_fixtures.py
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "runs"
#: The H200 record these fixtures were made from, as it was before the record was re-measured.
SOURCE = "94c00ad:docs/benchmarks/nvidia-h200.json"
BENCH = json.loads(subprocess.run(["git", "-C", str(ROOT), "show", SOURCE], capture_output=True, text=True,
                                  check=True).stdout)
DEVICE = dict(BENCH["device"], driver_release="")  # the benchmark record did not keep the driver release
PROTOCOL = {"warmup": 2, "min_samples": 10, "max_samples": 1000, "budget_s": 0.5, "target_rel_iqr": 0.01,
            "flush_l2": True}
STARTED = 1795305600.0  # 2026-11-22 00:00 UTC (synthetic envelopes only)


def write(name: str, data: dict) -> None:
    (OUT / name).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(OUT / name)


def v1_transpose() -> dict:
    run = BENCH["runs"]["transpose 16384²"]
    # The old writer: render_run's payload, then run_family added "started" for a single run.
    payload = {"cudalab": "0.1.0", "command": ["/usr/local/bin/cudalab", "transpose", "--n", "16384", "--json",
                                                "transpose.json"],
               "incomplete": False, "family": "transpose", "device": DEVICE, "problem": run["problem"],
               "block": None, "protocol": PROTOCOL, "roofline": run["roofline"], "results": run["rows"]}
    return dict(payload, started=STARTED)


def _row(variant: str, kind: str, block: str, grid: str, median: float, nbytes: int, roof: float,
         rng: np.random.Generator, n: int = 12) -> dict:
    s = np.round(median * (1 + np.abs(rng.normal(0, 0.004, n))), 6)
    q1, med, q3 = np.percentile(s, [25, 50, 75])
    gbs = nbytes / (med * 1e-3) / 1e9
    return {"variant": variant, "kind": kind, "status": "passed", "reason": "", "block": block, "grid": grid,
            "shared": 0, "stats": {"median": med, "iqr": q3 - q1, "min": s.min(), "max": s.max(), "mean": s.mean(),
                                   "n": n, "samples": s.tolist()},
            "gbs": gbs, "gflops": None, "pct_roofline": 100 * gbs / roof, "max_error": 0.0, "tolerance": 1e-9,
            "legacy": "", "extra": {}}


def v1_reduce_sweep() -> dict:
    rng = np.random.default_rng(13)
    nbytes = 2**24 * 8
    roofline = {"gbs": 4016.6, "source": "memcpy_dtod", "dtod_gbs": 4016.6, "kernel_gbs": 3903.5}
    ms = lambda gbs: nbytes / (gbs * 1e9) * 1e3  # noqa: E731
    payloads = []
    # Synthetic GB/s by block (shaped like the H200 run: the naive ladder gains with block size).
    table = {"neighbored": (900, 1100, 1150), "interleaved": (1500, 1750, 1800), "unrolling8": (2900, 3050, 2950),
             "modern": (3150, 3130, 3100)}
    for i, block in enumerate(("128", "256", "512")):
        grid = str(2**24 // int(block))
        rows = [_row("cpu", "host", "", "", 9.5, nbytes, roofline["gbs"], rng, 3)]
        rows += [_row(v, "kernel", block, grid, ms(g[i]), nbytes, roofline["gbs"], rng) for v, g in table.items()]
        rows.append(_row("cub", "library", "", "", ms(2940), nbytes, roofline["gbs"], rng))
        payloads.append({"cudalab": "0.1.0", "command": ["/usr/local/bin/cudalab", "reduce", "--n", "2^24", "--dtype",
                                                         "float64", "--block", "128,256,512", "--json", "sweep.json"],
                         "incomplete": False, "family": "reduce", "device": DEVICE,
                         "problem": {"dims": [2**24], "dtype": "float64", "options": {}}, "block": block,
                         "protocol": PROTOCOL, "roofline": roofline, "results": rows})
    return {"cudalab": "0.1.0", "command": payloads[0]["command"], "started": STARTED, "incomplete": False,
            "family": "reduce", "device": DEVICE, "sweep": payloads}


def v2_converted(runs: list[str], command: str) -> dict:
    points = []
    for key in runs:
        run = BENCH["runs"][key]
        metric = "flops" if run["family"] in ("matmul", "gemm") else "bandwidth"
        points.append({"family": run["family"], "metric": metric, "problem": run["problem"], "block": "",
                       "defines": [], "protocol": PROTOCOL, "roofline": run["roofline"], "results": run["rows"]})
    return {"schema_version": 2, "cudalab": BENCH["cudalab"], "command": command.split(), "started": 0,
            "incomplete": False, "device": DEVICE,
            "machine": {"cupy": BENCH["cupy"], "note": "rows, device and rooflines converted from "
                        "docs/benchmarks/nvidia-h200.json (a real H200 run, 2026-11-22) by "
                        "scripts/make_run_fixtures.py; envelope only"},
            "points": points}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    write("v1-synthetic-transpose.json", v1_transpose())
    write("v1-synthetic-reduce-block-sweep.json", v1_reduce_sweep())
    write("v2-h200-converted-transpose.json", v2_converted(["transpose 16384²"], "cudalab transpose --n 16384"))
    write("v2-h200-converted-reduce-dtypes.json",
          v2_converted(["reduce 2^24 float64", "reduce 2^24 float32", "reduce 2^24 int32"], "scripts/benchmark.py"))
    write("v2-h200-converted-matmul.json", v2_converted(["matmul 4096³"], "cudalab matmul --n 4096"))


if __name__ == "__main__":
    main()
