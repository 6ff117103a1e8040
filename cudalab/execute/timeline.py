"""A campaign's timeline, for a developer's question: when did each build and each task begin and end?

With ``CUDALAB_TIMELINE=FILE`` in the environment, a tuning campaign on this host's engine appends one JSON line to
FILE per event: its loop's start (the time account's), each build ahead queued, started and ended on its thread,
each task sent, and the GPU worker's share of it (waiting for its builds, running, ended). Each line is
``{"t": wall-clock seconds, "ev": event, "what": the trial's kernel and defines}``. Unset, a mark costs one look at
the environment and writes nothing. ``scripts/bench_campaign_cold.py --timeline`` reads the file back: where a cold
campaign's GPU waited, and for which build (the time account says how long; this says which and why).
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

__all__ = ["ENV", "label", "mark"]

#: The environment variable naming the file (unset: no timeline).
ENV = "CUDALAB_TIMELINE"

_lock = threading.Lock()  # build threads, the task runner and the loop mark at once: whole lines


def mark(ev: str, *requests: Any) -> None:
    """Append one event to the timeline (nothing when ``CUDALAB_TIMELINE`` is unset: the requests are named only
    when it is set, so an unset timeline costs a campaign no formatting per trial).

    Args:
        ev: what happened (``build-start``, ``task-run``...).
        requests: the run requests it happened to (:func:`label`, joined by ``; ``; None ones left out), none for
            the campaign's own events.
    """
    path = os.environ.get(ENV)
    if not path:
        return
    what = "; ".join(label(r) for r in requests if r is not None)
    line = json.dumps({"t": round(time.time(), 4), "ev": ev, "what": what})
    with _lock, open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def label(req: Any) -> str:
    """A run request as the timeline names it: its variants, block and defines (``warptile 256 WT_BM=128,...``)."""
    defines = ",".join(f"{k}={v}" for k, v in (req.defines or ()))
    return " ".join(x for x in (str(req.variants or ""), str(req.block or ""), defines) if x)
