"""Time ``cudalab report`` of a saved run of many points (issue 57: a 100,000-point run took over 60 s).

Writes a record of N points (default 100,000) to a temporary folder, then runs ``cudalab report`` on it in a
child process, its output to a file as a pipe would take it, and prints the child's wall and CPU time, its peak
memory and how many lines it printed. The points are a ``-D TILE=0..N-1`` sweep made of the first point of the
committed H200 transpose sweep (``tests/data/runs/nvidia-h200-transpose-sweep.json``): its GPU, protocol,
roofline and first two rows, ten samples each; written compact (``cudalab --json`` indents, which a record this
large cannot afford under the 256 MiB that cudalab reads).

Usage:
    python scripts/bench_report.py [--points 100000] [--layout points|long] [--markdown] [--keep FILE]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "runs" / "nvidia-h200-transpose-sweep.json"


def make_record(points: int, rows: int = 2) -> dict:
    """A run record of ``points`` points: the source's first point under ``-D TILE=i``, its first ``rows`` rows."""
    data = json.loads(SOURCE.read_text(encoding="utf-8"))
    base = data["points"][0]
    base = dict(base, results=base["results"][:rows])
    data["points"] = [dict(copy.deepcopy(base), defines=[["TILE", str(i)]]) for i in range(points)]
    return data


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--layout", choices=("points", "long"), default=None)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--keep", metavar="FILE", help="also write the record here (it is made in a temp folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.keep) if args.keep else Path(tmp) / "run.json"
        run.write_text(json.dumps(make_record(args.points), separators=(",", ":")), encoding="utf-8")
        cmd = [sys.executable, "-m", "cudalab", "report", str(run)] + (["--layout", args.layout] if args.layout else []) + (
            ["--markdown"] if args.markdown else [])
        out = Path(tmp) / "out.txt"
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        with open(out, "w", encoding="utf-8") as f:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True).returncode
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        with open(out, encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        print(f"cudalab report of {args.points:,} points ({run.stat().st_size / 2**20:.0f} MiB"
              f"{', --layout ' + args.layout if args.layout else ''}{', --markdown' if args.markdown else ''}): "
              f"exit {rc}, {wall:.1f} s wall, {cpu:.1f} s CPU, peak {after.ru_maxrss / 2**10:,.0f} MiB, "
              f"{lines:,} lines printed; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
