#!/usr/bin/env python3
"""The multi-GPU record (issue 33): one sweep on one GPU and the same sweep spread over every GPU of the
host (``--devices all``), their wall times, ``cudalab compare`` of the two, and a sweep with a kernel that
faults on every point, so each GPU's worker faults and the other rows stand. Writes
``<out>/<gpu-slug>-x<N>.md`` and ``.json``.

    python3 scripts/bench_devices.py --out docs/benchmarks

Target (issue 33): the sweep on every GPU in ≤ 0.6× the one-GPU wall time, every row that passed in
both judged "same" by compare. Needs at least two GPUs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "cudalab"]
SWEEP = ["transpose", "--n", "4k,8k,16k,32k", "--block", "32x8,64x8", "--min-samples", "100"]
FAULT = ["transpose", "--n", "4k,8k,16k,32k", "--variant", "naive,bankopt",
         "--add", "docs/examples/hostile.cu:hostile_oob@block=32x8"]
TARGET = 0.6


def cudalab(args: list[str], timeout: float = 500) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``cudalab ARGS`` in a fresh process; (wall seconds, the process)."""
    t0 = time.perf_counter()
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    return time.perf_counter() - t0, proc


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/benchmarks")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "runs"
    tmp.mkdir(exist_ok=True)
    # warm the build cache for both blocks (a first build is nvcc's time, not the run's)
    cudalab(["transpose", "--n", "1k", "--block", "32x8,64x8", "--devices", "all", "--no-roofline"])
    one_json, all_json, fault_json = tmp / "one-gpu.json", tmp / "all-gpus.json", tmp / "fault.json"
    one_wall, one = cudalab([*SWEEP, "--devices", "0", "--json", str(one_json)])
    all_wall, every = cudalab([*SWEEP, "--devices", "all", "--json", str(all_json)])
    _, cmp = cudalab(["compare", str(one_json), str(all_json)])
    _, fault = cudalab([*FAULT, "--devices", "all", "--json", str(fault_json)])
    rec_one, rec_all = json.loads(one_json.read_text()), json.loads(all_json.read_text())
    gpus = rec_all["device"].get("devices") or [rec_all["device"]]
    name = gpus[0].get("name", "GPU")
    summary = next((ln for ln in cmp.stdout.splitlines() if " vs " in ln and "same" in ln), "")
    counts = {k: int(v) for v, k in re.findall(r"(\d+) (slower|faster|same|unsure|not compared)", summary)}
    ratio = all_wall / one_wall
    fault_rec = json.loads(fault_json.read_text()) if fault_json.is_file() else {"points": []}
    fault_rows = [(p.get("device"), p["problem"]["dims"][0], r["variant"], r["status"]) for p in fault_rec["points"]
                  for r in p["results"]]
    fault_ok = (bool(fault_rows) and {d for d, *_ in fault_rows} == set(range(len(gpus)))
                and all((s == "failed") == v.startswith("+hostile") for _, _, v, s in fault_rows))
    per_device = {}
    for p in rec_all["points"]:
        per_device.setdefault(p.get("device"), []).append("x".join(map(str, p["problem"]["dims"])) + " " + p["block"])
    result = {
        "gpu": name, "gpus": len(gpus), "date": datetime.date.today().isoformat(),
        "commands": {"one": "cudalab " + " ".join([*SWEEP, "--devices", "0"]),
                     "all": "cudalab " + " ".join([*SWEEP, "--devices", "all"]),
                     "fault": "cudalab " + " ".join([*FAULT, "--devices", "all"])},
        "one_wall_s": one_wall, "all_wall_s": all_wall, "ratio": ratio, "target": TARGET,
        "wall_met": ratio <= TARGET, "rc": {"one": one.returncode, "all": every.returncode, "compare": cmp.returncode,
                                              "fault": fault.returncode},
        "compare": counts, "compare_summary": summary, "compare_met": counts.get("same", 0) > 0 and not (
            counts.get("slower", 0) or counts.get("faster", 0) or counts.get("unsure", 0)),
        "points_per_device": {str(k): v for k, v in per_device.items()},
        "fault_rows": fault_rows, "fault_met": fault_ok,
    }
    base = out / f"{slug(name)}-x{len(gpus)}"
    base.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    md = [f"# cudalab on {len(gpus)}x {name}: --devices (issue 33)", "",
          f"Made by `python3 scripts/bench_devices.py --out docs/benchmarks` on {result['date']}, "
          f"{len(gpus)} GPUs of one host.", "",
          "| target | measured | met |", "|---|---|---|",
          f"| the sweep on every GPU in ≤ {TARGET}x the one-GPU wall time | {all_wall:.1f} s / {one_wall:.1f} s = "
          f"{ratio:.2f}x | {'yes' if result['wall_met'] else 'no'} |",
          f"| `cudalab compare` one GPU vs every GPU: every row compared is 'same' | {summary or 'no summary'} | "
          f"{'yes' if result['compare_met'] else 'no'} |",
          f"| a kernel that faults on each GPU's worker leaves the other rows of every point intact | "
          f"{sum(1 for *_, s in fault_rows if s == 'passed')} passed, "
          f"{sum(1 for *_, s in fault_rows if s == 'failed')} failed over {len({(d, n) for d, n, *_ in fault_rows})} points "
          f"on GPUs {sorted({d for d, *_ in fault_rows})} | {'yes' if fault_ok else 'no'} |", "",
          "## Commands", "", *[f"- {k}: `{v}`" for k, v in result["commands"].items()], "",
          "## Which GPU ran which point (--devices all)", "",
          *[f"- GPU {d}: {', '.join(v)}" for d, v in sorted(per_device.items(), key=lambda kv: str(kv[0]))], "",
          "## compare one GPU vs every GPU", "", "```", cmp.stdout.strip(), "```", "",
          "## The faulting sweep", "", "```", fault.stdout.strip()[-6000:], "```", ""]
    base.with_suffix(".md").write_text("\n".join(md))
    print("\n".join(md[:12]))
    return 0 if result["wall_met"] and result["compare_met"] and fault_ok else 1


if __name__ == "__main__":
    sys.exit(main())
