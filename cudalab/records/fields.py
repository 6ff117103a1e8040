"""The fields of a saved run record, each checked as it is read: a file another program (or a person) wrote
gives one line naming the field, never a traceback or a figure that is not one (:mod:`cudalab.records.results`)."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from cudalab.bench import LAUNCH_METHODS, Protocol, Stats
from cudalab.errors import UsageError

__all__ = ["MAX_STARTED", "saved_device", "saved_float", "saved_problem", "saved_protocol", "saved_rate", "saved_started",
           "saved_samples", "saved_stats", "saved_tables", "saved_time", "shown"]


def saved_time(x: Any, what: str) -> float:
    """A saved time in milliseconds: a finite number, not negative (a negative or NaN median is not judged)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)) or x < 0:
        raise UsageError(f"not a cudalab run record ('{what}' must be a time in ms, at least 0; got {shown(x)})")
    return float(x)


def saved_rate(x: Any, what: str) -> float | None:
    """A saved rate (GB/s, GFLOP/s, % of the roofline; None: none): a finite number, not negative. Unlike an
    error (``max_error`` may be inf or nan), a rate of inf, nan or below 0 is no measurement: charts and tables
    divide by it."""
    if x is None:
        return None
    try:
        v = float(x) if not isinstance(x, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        v = math.nan
    if not (math.isfinite(v) and v >= 0):
        raise UsageError(f"not a cudalab run record ('{what}' must be a rate, a finite number at least 0; got "
                         f"{shown(x)})")
    return v


def shown(x: Any) -> str:
    """A saved value as an error line shows it: short, whatever its size."""
    text = repr(x) if not isinstance(x, int) or abs(x) < 10**20 else f"an integer of {len(str(abs(x)))} digits"
    return text if len(text) <= 40 else text[:39] + "…"


def saved_stats(s: Any) -> Stats:
    """A row's saved timing statistics, every figure checked (finite, not negative)."""
    if not isinstance(s, dict):
        raise UsageError(f"not a cudalab run record ('stats' must be an object, got {type(s).__name__})")
    n = s.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 2**40:
        raise UsageError(f"not a cudalab run record ('stats.n' must be a count of samples; got {shown(n)})")
    samples = s.get("samples", ())
    if not isinstance(samples, (list, tuple)):
        raise UsageError(f"not a cudalab run record ('stats.samples' must be a list, got {type(samples).__name__})")
    return Stats(**{k: saved_time(s.get(k), f"stats.{k}") for k in ("median", "iqr", "min", "max", "mean")}, n=n,
                 samples=saved_samples(samples))


def saved_samples(samples: list[Any] | tuple[Any, ...]) -> tuple[float, ...]:
    """A row's raw samples, each a time (:func:`saved_time`). A record of 100,000 points holds millions: the
    checks run over the whole list at once (floats, as JSON's reader gives them), and one by one only for
    whole numbers or to name the bad sample."""
    if set(map(type, samples)) <= {float} and all(map(math.isfinite, samples)) and min(samples, default=0) >= 0:
        return tuple(map(float, samples))
    return tuple(saved_time(x, "stats.samples") for x in samples)


#: Saved start times beyond this (the year 5138) are not a time this machine can show.
MAX_STARTED = 1e11


def saved_started(x: Any) -> float:
    x = 0.0 if x is None else x
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= MAX_STARTED:  # NaN fails too
        raise UsageError(f"not a cudalab run record ('started' must be seconds since 1970; got {shown(x)})")
    return float(x)


#: Read once: :func:`dataclasses.fields` is a call per point otherwise.
_PROTOCOL_FIELDS = fields(Protocol)


def saved_protocol(saved: Any) -> dict[str, Any]:
    """A point's saved timing protocol, each field this version knows of its type (others kept, unread)."""
    if not isinstance(saved, dict):
        raise UsageError(f"not a cudalab run record ('protocol' must be an object, got {type(saved).__name__})")
    for f in _PROTOCOL_FIELDS:
        if f.name not in saved:
            continue
        v, want = saved[f.name], type(f.default)
        if want is str:  # --launch: one of the methods
            if v not in LAUNCH_METHODS:
                raise UsageError(f"not a cudalab run record ('protocol.{f.name}' must be one of "
                                 f"{', '.join(LAUNCH_METHODS)}; got {shown(v)})")
            continue
        ok = (isinstance(v, bool) if want is bool else not isinstance(v, bool) and (
            isinstance(v, int) if want is int else isinstance(v, (int, float)) and math.isfinite(v)))
        if not ok or (want is not bool and v < 0):
            raise UsageError(f"not a cudalab run record ('protocol.{f.name}' must be a "
                             f"{'true/false' if want is bool else 'number, at least 0'}; got {shown(v)})")
    return dict(saved)


def saved_problem(saved: Any) -> dict[str, Any]:
    """A point's saved problem: ``dims`` a list of whole numbers, ``options`` an object."""
    if not isinstance(saved, dict):
        raise UsageError(f"not a cudalab run record ('problem' must be an object, got {type(saved).__name__})")
    dims, options = saved.get("dims", []), saved.get("options") or {}
    if not isinstance(dims, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in dims):
        raise UsageError(f"not a cudalab run record ('problem.dims' must be a list of whole numbers; got {shown(dims)})")
    if not isinstance(options, dict):
        raise UsageError(f"not a cudalab run record ('problem.options' must be an object; got {shown(options)})")
    return dict(saved)


def saved_tables(value: Any, key: str) -> list[dict[str, Any]]:
    """``value`` as a list of JSON objects, or one line saying what ``key`` should have held."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, dict) for x in value):
        raise UsageError(f"not a cudalab run record ('{key}' must be a list of objects, "
                         f"got {type(value).__name__})")
    return list(value)


def saved_device(x: Any) -> int | None:
    """A point's GPU index as saved (None when absent or not a whole number)."""
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def saved_float(x: Any) -> float | None:
    """A row's error or tolerance as saved (None when absent)."""
    if x is None:
        return None
    return float(x)
