"""Match ncu's launches to variants by kernel name and launch shape, and combine a variant's launches (pure).

Every child row carries its launch log (``extra["launches"]``: kernel, grid, block, in order). For each
(kernel, grid, block) key, the k-th ncu launch with that key belongs to the variant whose log holds the
k-th occurrence of that key in run order. Two variants that share a kernel and a shape (transpose
``block`` and ``bankopt``: ``transpose_block`` 128x128 / 32x32) are told apart by their order within
that key only. When ncu saw more or fewer launches of a key than the logs hold, the variants with that
key are marked, never shifted onto their neighbours' launches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Sequence

from cudalab.ncu.metrics import DURATION
from cudalab.ncu.parse import KernelLaunch, Metric

Key = tuple[str, str, str]


@dataclass(frozen=True)
class Match:
    """A variant's ncu launches in its own order, or why they could not be told apart (``problem``)."""

    launches: tuple[KernelLaunch, ...] = ()
    problem: str = ""


def _fmt(key: Key) -> str:
    return f"{key[0]} (grid {key[1]}, block {key[2]})"


def match_launches(logs: Sequence[tuple[str, Sequence[Key]]], launches: Sequence[KernelLaunch],
                   kernels: Collection[str] | None = None, doubled_ok: bool = False) -> tuple[dict[str, Match], list[str]]:
    """Assign ncu launches to variants.

    Args:
        logs: (variant, its launch log) in run order.
        launches: ncu's launches in ID (= launch) order.
        kernels: the kernels ncu was told to profile (None: every kernel in the logs); launches of other
            kernels in a log are not expected in ncu's output.
        doubled_ok: accept exactly two ncu launches per logged one and keep the second (files written by
            older cudalab versions, whose profile mode launched each variant twice: warm-up, verified).

    Returns:
        (variant → Match, notes on launches that matched nothing or on how they were matched).
    """
    expected: dict[Key, list[tuple[str, int]]] = {}
    for variant, log in logs:
        for pos, key in enumerate(k for k in log if kernels is None or k[0] in kernels):
            expected.setdefault(tuple(key), []).append((variant, pos))  # type: ignore[arg-type]
    seen: dict[Key, list[KernelLaunch]] = {}
    for ln in launches:
        seen.setdefault(ln.key, []).append(ln)
    got: dict[str, list[tuple[int, KernelLaunch]]] = {v: [] for v, _ in logs}
    problems: dict[str, str] = {}
    notes: list[str] = []
    doubled = False
    for key, owners in expected.items():
        found = seen.get(key, [])
        if len(found) == 2 * len(owners) and doubled_ok:
            found, doubled = found[1::2], True
        if len(found) != len(owners):
            why = (f"ncu saw no launch of {_fmt(key)}" if not found else
                   f"ncu saw {len(found)} launch(es) of {_fmt(key)}, the run logged {len(owners)}: "
                   "cannot tell which is whose")
            for variant, _ in owners:
                problems.setdefault(variant, why)
            continue
        for (variant, pos), ln in zip(owners, found):
            got[variant].append((pos, ln))
    stray = {k: len(v) for k, v in seen.items() if k not in expected}
    if stray:
        notes.append("launches that match no selected variant: "
                     + ", ".join(f"{n}× {_fmt(k)}" for k, n in stray.items()))
    if doubled:
        notes.append("the file holds each launch twice (warm-up and verified, as older cudalab profiled): "
                     "the second of each pair is shown")
    out = {}
    for variant, _ in logs:
        if variant in problems:
            out[variant] = Match(problem=problems[variant])
        else:
            out[variant] = Match(tuple(ln for _, ln in sorted(got[variant], key=lambda p: p[0])))
    return out, notes


def combine(launches: Sequence[KernelLaunch]) -> KernelLaunch:
    """One launch standing for several of one variant: ``.sum`` counters and durations added, every other
    metric (``pct``, averages, rates) the mean weighted by each launch's duration."""
    if len(launches) == 1:
        return launches[0]
    weights = [ln.duration_ns or 0.0 for ln in launches]
    if not any(weights):
        weights = [1.0] * len(launches)
    names = list(dict.fromkeys(m.name for ln in launches for m in ln.metrics))
    metrics = []
    for name in names:
        pairs = [(ln.metric(name), w) for ln, w in zip(launches, weights)]
        vals = [(m.value, w) for m, w in pairs if m is not None and m.value is not None]
        unit = next(m.unit for m, _ in pairs if m is not None)
        if not vals:
            metrics.append(Metric(name, unit, "", None))
            continue
        if name.endswith(".sum") or name == DURATION:
            value = sum(v for v, _ in vals)
        else:
            total = sum(w for _, w in vals) or 1.0
            value = sum(v * w for v, w in vals) / total
        metrics.append(Metric(name, unit, f"{value:g}", value))
    first = launches[0]
    kernels = "+".join(dict.fromkeys(ln.kernel for ln in launches))
    return KernelLaunch(first.launch_id, kernels, first.block, first.grid, first.device, first.cc, tuple(metrics),
                        tuple(sorted({m for ln in launches for m in ln.missing})))


COMBINED_NOTE = ("{n} launches combined: .sum counters and durations added, other metrics (pct) weighted by "
                 "each launch's duration")
