"""Run the transpose at the largest ``--n`` this GPU's memory plan allows (what ``cudalab info`` prints),
roofline included, and say whether it ran with its roofline or was refused before any GPU work.

    python3 scripts/largest_transpose.py [--json OUT.json] [--variant naive]

Exit 0 when the run either measured its roofline or was refused in one line before GPU work; 1 when a
measured row was lost or the roofline is missing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from cudalab import catalog, memplan
from cudalab.families import load
from cudalab.execute.local.drive import Session


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default="largest.json")
    parser.add_argument("--variant", default="naive")
    args = parser.parse_args()
    session = Session([0])
    try:
        free = int(session.ask(0, op="info", bandwidth=False)["free"])
    finally:
        session.close()
    spec = catalog.family("transpose")
    fam = load(spec.module)
    n = memplan.largest_n(fam, spec.default_dtype, {o.name: o.default for o in fam.OPTIONS}, free,
                          memplan.host_available())
    print(f"largest --n on this GPU: {n} ({free / 2**30:.1f} GiB free)", flush=True)
    cmd = [sys.executable, "-m", "cudalab", "transpose", "--n", str(n), "--variant", args.variant, "--budget", "0.2",
           "--json", args.json]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(proc.stdout[-3000:], proc.stderr[-2000:], sep="\n")
    if proc.returncode == 2 and proc.stderr.count("\n") <= 1:
        print(f"RESULT refused before GPU work: {proc.stderr.strip()}")
        return 0
    try:
        data = json.load(open(args.json))
    except (OSError, ValueError):
        print(f"RESULT no JSON (exit {proc.returncode})")
        return 1
    point = data["points"][0]
    rows = [(r["variant"], r["status"], r.get("pct_roofline")) for r in point["results"]]
    roof = point.get("roofline")
    print(f"RESULT n={n} exit={proc.returncode} rows={rows} roofline="
          f"{roof['gbs'] if roof else None} note={point.get('roofline_note')!r}")
    return 0 if roof and all(s == "passed" for _, s, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
