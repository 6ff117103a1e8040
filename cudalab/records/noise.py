"""A GPU's noise floor: how small a change ``compare`` can call on it without crying wolf (``cudalab calibrate``).

``cudalab calibrate`` runs the same kernels in pairs of fresh processes (A/A: nothing changed) and judges each
pair's rows by :func:`cudalab.records.compare.judge` at a ladder of effect thresholds; the floor is the smallest
threshold at which at most :data:`MAX_FALSE` of those verdicts say faster or slower. A kernel slowed on purpose
(a delay loop, about :data:`TARGET_SLOWDOWN`) says how often a real change that size is caught at that threshold.
The floor is kept per GPU name in the cache folder; ``compare``'s default effect, ``--fail-on slower`` and tune's
racing use it when present and say so. Pure: no GPU, no session.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from cudalab.records.compare import decisive, judge

#: The thresholds tried, smallest first (fractions).
LADDER = (0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.0175, 0.02, 0.025, 0.03, 0.04, 0.05)
#: The most A/A verdicts that may say faster or slower at the chosen threshold.
MAX_FALSE = 0.01
#: The slowdown planted in the calibration kernel.
TARGET_SLOWDOWN = 0.02
#: ``compare``'s effect threshold on a GPU never calibrated.
DEFAULT_EFFECT = 0.02
#: Rows whose median is under this (ms) are judged by their own floor: a kernel of a few µs moved by several
#: percent between fresh processes on an H200 (one-block smem rows up to 14%) where a copy of 35-130 µs moved
#: by 0.1-0.5%, so a floor made of copies would call most of them faster or slower when nothing changed.
SHORT_MS = 0.020
#: The thresholds tried for the short rows (the ladder, then wider).
SHORT_LADDER = LADDER + (0.075, 0.1, 0.15, 0.2)


@dataclass(frozen=True)
class NoiseFloor:
    """One GPU's calibration.

    Attributes:
        gpu: the GPU's name (the key it is stored under).
        min_effect: the smallest threshold with at most MAX_FALSE false verdicts (fraction).
        false_rate: faster/slower verdicts among the A/A judgements at ``min_effect``.
        detect_rate: pairs in which the planted slowdown was judged slower at ``min_effect``.
        planted: the planted slowdown as measured (median over the runs of slowed / plain, less 1).
        pairs: A/A pairs run; judgements: A/A rows judged (pairs x rows).
        false_by_threshold: each threshold of the ladder -> its false rate.
        made: when (seconds since the epoch).
        short_min_effect: the threshold of rows under :data:`SHORT_MS` (None: none of :data:`SHORT_LADDER`
            kept their A/A false verdicts to MAX_FALSE, or they were not calibrated).
        short_judgements: A/A short rows judged (0: the short rows were not calibrated; ``min_effect`` for all).
        short_false_by_threshold: each threshold of the short ladder -> its false rate.
    """

    gpu: str
    min_effect: float
    false_rate: float
    detect_rate: float
    planted: float
    pairs: int
    judgements: int
    false_by_threshold: dict[str, float] = field(default_factory=dict)
    detect_by_threshold: dict[str, float] = field(default_factory=dict)
    made: float = 0.0
    short_min_effect: float | None = None
    short_judgements: int = 0
    short_false_by_threshold: dict[str, float] = field(default_factory=dict)

    def effect(self, median_ms: float | None) -> float | None:
        """The threshold for a row of this median: the short rows' own when they were calibrated (None: no
        threshold of :data:`SHORT_LADDER` kept their false verdicts to :data:`MAX_FALSE`), else ``min_effect``."""
        if self.short_judgements and median_ms is not None and median_ms < SHORT_MS:
            return self.short_min_effect
        return self.min_effect

    def line(self) -> str:
        """``effect threshold 1.25% (calibrated on NVIDIA H100: 0.5% false verdicts, 2.0% slowdown caught in 92%)``."""
        text = (f"effect threshold {_pct(self.min_effect)} (calibrated on {self.gpu} over {self.pairs} A/A pairs: "
                f"{self.false_rate:.1%} false verdicts; a {self.planted:.1%} slowdown caught in {self.detect_rate:.0%})")
        if not self.short_judgements:
            return text
        under = f"rows under {SHORT_MS * 1e3:g} µs"
        return text + (f"; {under}: {_pct(self.short_min_effect)}" if self.short_min_effect is not None else
                       f"; {under}: not judged (no threshold up to {_pct(SHORT_LADDER[-1])} kept their false verdicts "
                       f"between processes to {MAX_FALSE:.0%})")


def _pct(x: float) -> str:
    return f"{x * 100:.2f}".rstrip("0").rstrip(".") + "%"


def folder() -> Path:
    """Where floors are kept: ``noise/`` beside the build cache (:func:`cudalab.build.cache_dir`)."""
    from cudalab.build import cache_dir  # noqa: PLC0415

    return cache_dir().parent / "noise"


def path_for(gpu: str) -> Path:
    """The floor file of a GPU name (``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3.json``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"
    return folder() / f"{slug}.json"


def load(gpu: str | None) -> NoiseFloor | None:
    """The stored floor of ``gpu`` (None: none stored, or a file that does not read as one: then one warning
    line says it is ignored, :mod:`cudalab.build.cachefiles`)."""
    if not gpu:
        return None
    from cudalab.build import cachefiles  # noqa: PLC0415

    return cachefiles.read(path_for(gpu), "the noise floor", lambda d: _floor(d, gpu))


def _floor(d: Any, gpu: str) -> NoiseFloor | None:
    """A floor from its JSON, every field of its type and range (a wrong one: None)."""
    def num(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    def rates(x: Any) -> bool:
        return isinstance(x, dict) and all(isinstance(k, str) and num(v) for k, v in x.items())

    if not isinstance(d, dict):
        return None
    floor = NoiseFloor(**{k: d[k] for k in NoiseFloor.__dataclass_fields__ if k in d})
    short = floor.short_min_effect
    ok = (floor.gpu == gpu and num(floor.min_effect) and 0 < floor.min_effect < 1
          and all(num(x) for x in (floor.false_rate, floor.detect_rate, floor.planted, floor.made))
          and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                  for x in (floor.pairs, floor.judgements, floor.short_judgements))
          and all(rates(x) for x in (floor.false_by_threshold, floor.detect_by_threshold,
                                     floor.short_false_by_threshold))
          and (short is None or (num(short) and 0 < short < 1)))
    return floor if ok else None


def save(floor: NoiseFloor) -> Path:
    """Write the floor (atomically: a failed write leaves the old one)."""
    from cudalab.build import cachefiles  # noqa: PLC0415

    p = path_for(floor.gpu)
    cachefiles.write(p, json.dumps(asdict(floor), indent=2) + "\n")  # never through a link planted there
    return p


def effect_for(gpu: str | None) -> tuple[float, NoiseFloor | None]:
    """The effect threshold to use on ``gpu``: its floor's, else :data:`DEFAULT_EFFECT` (and the floor)."""
    floor = load(gpu)
    return (floor.min_effect if floor else DEFAULT_EFFECT), floor


def _key(t: float) -> str:
    return f"{t:g}"


Pairs = Sequence[tuple[Sequence[float], Sequence[float]]]


def _rates(pairs: Pairs, ladder: Sequence[float], slower_only: bool = False) -> dict[str, float]:
    """Each threshold -> the share of pairs :func:`judge`'s rule calls faster or slower there (slower only)."""
    vs = [judge(a, b) for a, b in pairs]    # the figures once; the rule asked at every threshold
    return {_key(t): (sum(decisive(v.ratio, v.p, v.low, v.high, t) and (not slower_only or (v.ratio or 0) > 1)
                          for v in vs) / len(vs) if vs else 0.0) for t in ladder}


def floor_of(gpu: str, aa: Pairs, planted: Pairs, planted_fraction: float, pairs: int,
             ladder: Sequence[float] = LADDER, clock: Any = time.time, short_aa: Pairs = ()) -> NoiseFloor:
    """The floor from the A/A sample pairs and the planted ones (plain A, slowed B); ``short_aa``, A/A pairs of
    rows under :data:`SHORT_MS`, give the short rows' own threshold.

    Raises:
        ValueError: no A/A pair to judge.
    """
    if not aa:
        raise ValueError("no A/A pair to judge")
    false, caught = _rates(aa, ladder), _rates(planted, ladder, slower_only=True)
    chosen = next((t for t in ladder if false[_key(t)] <= MAX_FALSE), ladder[-1])
    short = _rates(short_aa, SHORT_LADDER) if short_aa else {}
    return NoiseFloor(gpu=gpu, min_effect=chosen, false_rate=false[_key(chosen)], detect_rate=caught[_key(chosen)],
                      planted=planted_fraction, pairs=pairs, judgements=len(aa), false_by_threshold=false,
                      detect_by_threshold=caught, made=clock(),
                      short_min_effect=next((t for t in SHORT_LADDER if short.get(_key(t), 1.0) <= MAX_FALSE), None),
                      short_judgements=len(short_aa), short_false_by_threshold=short)
