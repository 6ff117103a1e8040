"""Ctrl-C during a real tune campaign, as a terminal sends it (SIGINT to the whole process group): once during the
trials and once mid-race, then the same command again to resume it. Issue 57: an interrupted campaign never names
a winner from a race its worker did not finish, and its closing counts add up.

    python scripts/ctrl_c_campaign.py --out DIR [--family matmul --variant warptile --trials 30 --extra "..."]

Prints each run's whole output and a verdict line per run (PASS/FAIL and why); exits 1 when any run fails.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def run(argv: list[str], trigger: str | None, env: dict[str, str]) -> tuple[int, str]:
    """Run ``argv`` in a new process group; when a stderr line matches ``trigger``, Ctrl-C the group."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
    reader.start()
    err: list[str] = []
    sent = None
    for line in proc.stderr:
        err.append(line)
        if trigger and sent is None and re.search(trigger, line):
            time.sleep(0.3)  # inside the trial or the racing round that follows the line
            os.killpg(proc.pid, signal.SIGINT)
            sent = time.monotonic()
            err.append(f"[ctrl_c_campaign: SIGINT sent to the process group after: {line.strip()}]\n")
    rc = proc.wait(timeout=600)
    reader.join(10)
    took = f"[ctrl_c_campaign: exited {rc}" + (f", {time.monotonic() - sent:.1f} s after the SIGINT]" if sent else "]")
    return rc, "".join(err) + "".join(out) + took + "\n"


def verdict(name: str, rc: int, text: str, interrupted: bool) -> bool:
    problems = []
    counts = re.search(r"(\d+) trials: (\d+) passed, (\d+) infeasible.*?, (\d+) refused before any build"
                       r"(?:, (\d+) interrupted)?", text)
    if counts is None:
        problems.append("no closing counts line")
    else:
        total, *parts = (int(x or 0) for x in counts.groups())
        if sum(parts) != total:
            problems.append(f"counts do not add up: {counts.group(0)}")
    if "Traceback" in text:
        problems.append("a traceback")
    if interrupted:
        if rc != 130:
            problems.append(f"exit {rc}, not 130")
        if re.search(r"winner after|^rerun:|the winner is", text, re.M):
            problems.append("an interrupted campaign named a winner")
        if "not raced" not in text and "passed" in text:
            problems.append("the best trials are not said to be not raced")
    elif rc != 0 or "winner after" not in text:
        problems.append(f"the resumed campaign did not finish with a raced winner (exit {rc})")
    print(f"VERDICT {name}: {'PASS' if not problems else 'FAIL: ' + '; '.join(problems)}", flush=True)
    return not problems


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", default="matmul")
    ap.add_argument("--variant", default="warptile")
    ap.add_argument("--trials", default="30")
    ap.add_argument("--extra", default="", help="more tune arguments, one text (-D UNROLL=1..8 --n 1k)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, COLUMNS="160")
    ok = True
    for name, trigger in (("during-trials", r"\[6/"), ("mid-race", r"racing round 1")):
        db = out / f"ctrlc-{name}.tune.db"
        db.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "cudalab", "tune", a.family, "--variant", a.variant, "--trials", a.trials,
                "--seed", "1", "--storage", f"sqlite:///{db}", "--json", str(out / f"ctrlc-{name}.json"),
                *shlex.split(a.extra)]
        for label, trig in ((name, trigger), (f"{name}-resumed", None)):
            rc, text = run(argv, trig, env)
            print(f"===== {label}: {' '.join(argv[2:])}\n{text}", flush=True)
            ok &= verdict(label, rc, text, trig is not None)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
