"""The judge's one JSON object, from a finished point's rows (pure: no GPU, no session).

:func:`verdict` reads the candidate's row, the reference and best rows beside it, the worker's second look
(``extra["judge"]``, :mod:`cudalab.worker.judgeprobe`) and the static scan (:mod:`cudalab.judging.scan`), and
names every door the candidate tried (``flags``). The schema is ``docs/judge-schema.json``; the exit codes
are :data:`EXIT`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

import numpy as np

from cudalab.bench import median_ci
from cudalab.records.compare import FASTER, judge
from cudalab.roofline import pct_of
from cudalab.records.results import INCORRECT, PASSED, TIMEOUT, Result, Roofline

__all__ = ["EXIT", "FLAGS", "SCHEMA_VERSION", "verdict", "memo_from_pairs", "exit_code", "first_passed", "time_of",
           "beside"]

SCHEMA_VERSION = 1
#: The exit codes, by verdict (2: refused input, before any GPU work: the command line's).
EXIT = {"correct": 0, "incorrect": 1, "refused": 2, "failed": 3, "timeout": 4, "suspect": 5}
#: Every flag the judge can raise, and what it means (the schema's enum; docs/judge.md).
FLAGS = {
    "wrong_answer": "the verified launches (two poisons, after a warm-up) did not give the reference's answer",
    "memo": "wrong on a second input set refilled in place, or launches on the input the launch before saw faster "
            "than on new input (paired)",
    "suspect": "faster than the measured roofline (bandwidth) or compute ceiling (FLOP/s) beyond the margin",
    "child_grids": "the code launches kernels from the device (dynamic parallelism)",
    "side_stream": "the code names a device-side stream (fire-and-forget, tail launch, a stream it creates)",
    "busy_after_stop": "the device was still busy after the timed interval's stop event",
}
#: A bandwidth row is suspect above the roofline by more than this (or the noise floor, if larger): a
#: read-mostly kernel can beat a copy by a few percent (DESIGN: a float4 copy kernel beat memcpy by 4%).
SUSPECT_MARGIN = 0.15
#: ``memo``: the paired comparison (:mod:`cudalab.worker.judgeprobe`): every launch after the same refill, reset
#: and L2 flush, a ``fresh`` one on the other input set, a ``repeat`` one on the set the launch before it saw. An
#: honest kernel cannot tell them apart: on an H200 its ratio of medians read 1.00 (each pair within 1%,
#: scripts/probe_memo_pairs.py); a skip on repeated input 1.15 (where sampling its input cost nearly the work) to
#: 8.4. Flagged above this ratio of medians ...
MEMO_RATIO = 1.1
#: ... by at least this many milliseconds (the events' own jitter on a kernel of a few µs) ...
MEMO_MIN_MS = 0.002
#: ... with fresh slower than repeat in at least this share of the pairs (a sign test: 13 of 16 pairs happen by
#: chance about once in a hundred for a kernel that cannot tell them apart, and then the ratio must hold too).
MEMO_AGREE = 0.8
#: ``busy_after_stop``: the median wait for an idle device after a stop event above this (ms) and above
#: half the kernel's median (an honest kernel's wait is the API's own few µs).
BUSY_MIN_MS = 0.1
_FIRST = re.compile(r"first at [^;)]*")


def _num(x: Any) -> float | None:
    """A finite float, else None (JSON has no inf or nan)."""
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def time_of(r: Result | None) -> dict[str, Any] | None:
    """A row's time: median, its 95% interval, IQR, min, n (ms)."""
    if r is None or r.stats is None:
        return None
    s = r.stats
    half = median_ci(s.samples)
    ci = [s.median * (1 - half), s.median * (1 + half)] if math.isfinite(half) else None
    return {"median_ms": s.median, "ci95_ms": ci, "iqr_ms": s.iqr, "min_ms": s.min, "n": s.n,
            "timed_by": str((r.extra or {}).get("timed_by", "events"))}


def beside(cand: Result, other: Result | None, min_effect: float, suspect: bool,
           correct: bool = True) -> dict[str, Any] | None:
    """The candidate against one other row: speedup (other's median / candidate's) and ``compare``'s verdict.

    A suspect candidate is never ``faster``: its verdict reads ``suspect``; a wrong one (``correct`` False: also
    wrong on the second input set) is not compared at all.
    """
    if other is None:
        return None
    out: dict[str, Any] = {"variant": other.variant, "kind": other.kind, "status": other.status.value,
                           "time": time_of(other), "speedup": None, "verdict": "–", "p": None, "note": ""}
    if cand.stats is None or cand.status != PASSED or not correct or other.stats is None or other.status != PASSED:
        # a wrong kernel's speed is no speed: a loop must never read "faster" beside a wrong answer
        out["note"] = "not compared: " + ("the candidate did not pass" if cand.status != PASSED or not correct else
                                          "the candidate was not timed" if cand.stats is None else
                                          f"{other.variant} did not pass" if other.status != PASSED else "no samples")
        return out
    v = judge(other.stats.samples, cand.stats.samples, min_effect)
    out.update(speedup=(1.0 / v.ratio) if v.ratio else None, verdict=v.verdict, p=_num(v.p), note=v.note)
    if suspect and v.verdict == FASTER:
        out.update(verdict="suspect", note="faster than the hardware allows: see flags")
    return out


def _speed_check(cand: Result, metric: str, roofline: Roofline | None, ceiling: float | None,
                 floor: float) -> tuple[dict[str, Any], bool]:
    """The impossible-speed figures and whether they trip ``suspect``."""
    margin = max(SUSPECT_MARGIN, floor)
    # A batched row's launches 2..N find what launch 1 left in L2: a small honest kernel can beat the DRAM roofline
    # that way. Its one-launch probes (L2 flushed) are the time judged here; a memo is far faster still.
    extra = cand.extra or {}
    single = _num(extra.get("single_launch_ms"))
    scale = (cand.stats.median / single) if extra.get("batch", 1) > 1 and single and cand.stats else 1.0
    basis_time = "one launch" if scale != 1.0 else "the row's median"
    if metric == "bandwidth" and roofline is not None and cand.gbs:
        pct = (pct_of(cand, roofline) or 0.0) * scale  # the row's own read/write mix, as the table rates it
        limit = 100.0 * (1 + margin)
        return {"basis": "roofline", "pct": pct, "limit_pct": limit, "gbs": cand.gbs * scale, "roofline_gbs": roofline.gbs,
                "time": basis_time}, pct > limit
    if metric == "flops" and ceiling and cand.gflops:
        pct = 100.0 * cand.gflops * scale / ceiling
        limit = 100.0 * (1 + margin)
        return {"basis": "compute ceiling", "pct": pct, "limit_pct": limit, "gflops": cand.gflops * scale,
                "ceiling_gflops": ceiling, "time": basis_time}, pct > limit
    why = ("no roofline measured" if metric == "bandwidth" else
           "no measured compute ceiling for this GPU and clock" if metric == "flops" else f"metric {metric}: no ceiling")
    return {"basis": "none", "note": why}, False


def memo_from_pairs(fresh: Sequence[float], repeat: Sequence[float]) -> dict[str, Any]:
    """The paired fresh-against-repeat figures and whether they say ``memo``.

    Args:
        fresh, repeat: one-launch times (ms), the k-th of each from one pair
            (:func:`cudalab.worker.judgeprobe.pairs`).

    Returns:
        ``fresh_ms``, ``repeat_ms`` (medians, None without samples), ``ratio`` (fresh / repeat), ``pairs``,
        ``fresh_slower`` (pairs whose fresh launch was the slower) and ``memo`` (every threshold passed:
        :data:`MEMO_RATIO`, :data:`MEMO_MIN_MS`, :data:`MEMO_AGREE`).
    """
    k = min(len(fresh), len(repeat))
    if k == 0:
        return {"fresh_ms": None, "repeat_ms": None, "ratio": None, "pairs": 0, "fresh_slower": 0, "memo": False}
    f, r = float(np.median(fresh[:k])), float(np.median(repeat[:k]))
    slower = sum(1 for a, b in zip(fresh[:k], repeat[:k]) if a > b)
    ratio = f / r if r > 0 else None
    memo = ratio is not None and ratio > MEMO_RATIO and f - r > MEMO_MIN_MS and slower >= MEMO_AGREE * k
    return {"fresh_ms": f, "repeat_ms": r, "ratio": ratio, "pairs": k, "fresh_slower": slower, "memo": memo}


def _probe_check(fig: dict[str, Any] | None, median: float | None) -> tuple[dict[str, Any], list[str], dict]:
    """The second look's figures, summarised, and the flags they raise (with their details)."""
    if not fig:
        return {"second_set": "not run: the row did not pass"}, [], {}
    out: dict[str, Any] = {"second_set": fig.get("second_set", ""), "answers_differ": fig.get("answers_differ"),
                           "wrong": fig.get("wrong")}
    flags, details = [], {}
    fresh, repeat, idle = (fig.get(k) or [] for k in ("fresh_ms", "repeat_ms", "idle_after_stop_ms"))
    paired = memo_from_pairs(fresh, repeat)
    i = float(np.median(idle)) if idle else None
    out.update(fresh_ms=paired["fresh_ms"], repeat_ms=paired["repeat_ms"], ratio=paired["ratio"],
               pairs=paired["pairs"], idle_after_stop_ms=i, alternated=bool(fig.get("alternated")))
    if fig.get("wrong"):
        flags.append("memo")
        details["memo"] = dict(fig["wrong"], why="wrong after the input changed in place")
    elif paired["memo"]:
        flags.append("memo")
        details["memo"] = {k: paired[k] for k in ("fresh_ms", "repeat_ms", "ratio", "pairs", "fresh_slower")}
        details["memo"]["why"] = (f"launches on the input the launch before saw {paired['ratio']:.2f}x faster than "
                                  "on new input")
    if i is not None and i > BUSY_MIN_MS and i > 0.5 * (median or 0.0):
        flags.append("busy_after_stop")
        details["busy_after_stop"] = {"idle_after_stop_ms": i, "limit_ms": max(BUSY_MIN_MS, 0.5 * (median or 0.0))}
    return out, flags, details


def verdict(cand: Result, reference: Result | None, best: Result | None, *, metric: str,
            roofline: Roofline | None, ceiling: float | None, floor: float, scan: dict[str, Any]) -> dict[str, Any]:
    """The judged part of the object: verdict, exit code, correctness, flags, time, speedups, checks.

    Args:
        cand: the candidate's row.
        reference, best: the family's reference (library/driver) row and best variant's row, if run.
        metric: the family's (``bandwidth``, ``flops``...).
        roofline: the point's measured roofline.
        ceiling: the GPU's measured compute peak (GFLOP/s), for FLOP families.
        floor: the noise floor (``compare``'s minimum effect) on this GPU.
        scan: :class:`cudalab.judging.scan.Scan` as a dict (``child_grids``, ``side_streams``, ``ptx``, ``note``).
    """
    flags: list[str] = []
    details: dict[str, Any] = {}
    if cand.status == INCORRECT:
        flags.append("wrong_answer")
        details["wrong_answer"] = {"reason": cand.reason}
    speed, too_fast = _speed_check(cand, metric, roofline, ceiling, floor)
    if too_fast:
        flags.append("suspect")
        details["suspect"] = speed
    probe, more, more_details = _probe_check((cand.extra or {}).get("judge"), cand.stats.median if cand.stats else None)
    flags += more
    details.update(more_details)
    for key, flag in (("child_grids", "child_grids"), ("side_streams", "side_stream")):
        if scan.get(key):
            flags.append(flag)
            details[flag] = {"found": list(scan[key])}
    correct = cand.status == PASSED and not probe.get("wrong")
    if cand.status == TIMEOUT:
        word = "timeout"
    elif cand.status not in (PASSED, INCORRECT):  # failed, skipped (a rule it cannot meet), a tool's status
        word = "failed"
    elif not correct:
        word = "incorrect"
    elif flags:
        word = "suspect"
    else:
        word = "correct"
    first = _FIRST.search(cand.reason or "")
    wrong = probe.get("wrong")
    first_wrong = first.group(0) if first else (wrong.get("what") if isinstance(wrong, dict) else None)
    suspect = "suspect" in flags or "memo" in flags
    return {
        "verdict": word, "exit_code": EXIT[word],
        "correct": correct if cand.status in (PASSED, INCORRECT) else None,
        "status": cand.status.value, "reason": cand.reason or "", "first_wrong": first_wrong,
        "flags": flags, "flag_details": details,
        "time": time_of(cand), "gbs": _num(cand.gbs), "gflops": _num(cand.gflops),
        "pct_roofline": _pct_of_ceiling(cand, reference, metric, roofline),
        "max_error": _num(cand.max_error), "tolerance": _num(cand.tolerance),
        "reference": beside(cand, reference, floor, suspect, correct),
        "best": beside(cand, best, floor, suspect, correct),
        "noise_floor": floor,
        "checks": {"speed": speed, "second_look": probe, "scan": dict(scan), "reference_on_device": False},
    }


def _pct_of_ceiling(cand: Result, reference: Result | None, metric: str, roofline: Roofline | None) -> float | None:
    """The run table's % column: GB/s over the roofline measured in the same run; for FLOP/s and item-rate rows,
    the rate over the library reference row's (cuBLAS, CuPy), as ``cudalab.report.pct_column`` has it."""
    if metric == "bandwidth":
        return pct_of(cand, roofline) if roofline is not None and cand.gbs else None
    key = "gflops" if metric == "flops" else None
    if key and reference is not None and reference.kind == "library" and reference.status == PASSED:
        mine, theirs = _num(getattr(cand, key)), _num(getattr(reference, key))
        return 100.0 * mine / theirs if mine and theirs else None
    return _num(cand.pct_roofline)


def exit_code(obj: dict[str, Any]) -> int:
    """The process's exit code for a judged object (:data:`EXIT`)."""
    return int(obj.get("exit_code", EXIT["failed"]))


def first_passed(rows: Sequence[Result], names: Sequence[str]) -> Result | None:
    """The first of ``rows`` named in ``names`` (None when none ran)."""
    by = {r.variant: r for r in rows}
    return next((by[n] for n in names if n in by), None)
