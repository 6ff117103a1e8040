"""Where a campaign's GPU waited, and for which build: a ``CUDALAB_TIMELINE`` file read back.

A tuning campaign on this host's engine run with ``CUDALAB_TIMELINE=FILE`` writes one JSON line per event
(:mod:`cudalab.execute.timeline`): builds ahead queued, started and ended, tasks sent, and the GPU worker's share of
each (waiting for its builds, running, ended). This prints, in seconds from the loop's start (the time account's):

* every wait of the GPU worker for a build: how long, for which trial, when that build was queued, started and
  ended, and how many other trials were built and not yet sent meanwhile (a wait the loop's order could have
  avoided);
* the GPU worker's idle time between tasks that no build explains (the parent's turn between tasks);
* the builds: how many, how long each took (shortest, median, longest), when the first and the last ended.

    python3 scripts/campaign_timeline.py FILE        (scripts/bench_campaign_cold.py --timeline writes one)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def read(path: Path) -> list[dict]:
    """The file's events, in time order (lines that are not whole JSON, a write cut short, are left out)."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return sorted(events, key=lambda e: e["t"])


def summary(events: list[dict]) -> str:
    """The text described in the module's docstring."""
    if not events:
        return "no events: was CUDALAB_TIMELINE set, and did the campaign build ahead on this host?"
    t0 = next((e["t"] for e in events if e["ev"] == "loop"), events[0]["t"])
    builds: dict[str, dict[str, float]] = {}
    for e in events:
        if e["ev"].startswith("build-"):
            stage = {"build-urgent": "queued", "build-queued": "queued"}.get(e["ev"], e["ev"][6:])
            builds.setdefault(e["what"], {}).setdefault(stage, e["t"] - t0)
    sent = {e["what"]: e["t"] - t0 for e in events if e["ev"] == "send"}
    lines, waited, gaps, last_end = [], 0.0, 0.0, 0.0
    tasks = [e for e in events if e["ev"].startswith("task-")]
    for i, e in enumerate(tasks):
        t = e["t"] - t0
        if e["ev"] == "task-wait":
            gaps += max(0.0, t - last_end)
        if e["ev"] == "task-end":
            last_end = t
        if e["ev"] != "task-wait":
            continue
        run = next((x for x in tasks[i + 1:] if x["ev"] == "task-run" and x["what"] == e["what"]), None)
        if run is None:
            continue
        wait = run["t"] - e["t"]
        waited += wait
        if wait < 0.01:
            continue
        b = builds.get(e["what"], {})
        ready = sum(1 for k, v in builds.items() if k != e["what"] and v.get("end", 1e9) <= t
                    and sent.get(k, 1e9) > t)
        lines.append(f"  at {t:6.2f} s the GPU waited {wait:5.2f} s for {e['what']}: its build queued "
                     f"{b.get('queued', float('nan')):.2f}, started {b.get('start', float('nan')):.2f}, ended "
                     f"{b.get('end', float('nan')):.2f} ({b.get('end', 0) - b.get('start', 0):.2f} s); "
                     f"{ready} other trials built and not sent then")
    took = sorted(v["end"] - v["start"] for v in builds.values() if "end" in v and "start" in v)
    ends = sorted(v["end"] for v in builds.values() if "end" in v)
    head = [f"timeline: {len(tasks) // 3} tasks, {len(builds)} builds; seconds from the loop's start (the time account's)",
            f"the GPU worker waited for builds {waited:.2f} s in all, in {len(lines)} waits of 10 ms or more:"]
    tail = [f"the GPU worker's idle between tasks, not waiting for a build: {gaps:.2f} s (the parent's turns)"]
    if took:
        tail.append(f"builds: {len(took)} took {took[0]:.2f} / {statistics.median(took):.2f} / {took[-1]:.2f} s "
                    f"(shortest / median / longest); the first ended at {ends[0]:.2f} s, the last at {ends[-1]:.2f} s")
    return "\n".join(head + (lines or ["  none"]) + tail)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print(summary(read(Path(args[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
