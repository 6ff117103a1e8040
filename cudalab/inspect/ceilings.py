"""The compute ceilings of a roofline chart as data: an FP32 FMA peak and a tensor-core peak per GPU and SM
clock, kept in a small cache beside the build cache (:func:`cached`, :func:`store`). A GPU worker measures
them (:func:`cudalab.worker.ceilings.measure`); a missing cache only means the chart draws the datasheet
lines alone.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cudalab import build
from cudalab.errors import CudalabError


__all__ = ["Ceilings", "cache_file", "cached", "store"]


@dataclass(frozen=True)
class Ceilings:
    """Measured peaks of one GPU at one SM clock.

    Attributes:
        gpu: the GPU's name.
        sm_clock_mhz: the clock the figures belong to (the device's reported SM clock).
        fma_gflops: FP32 FMA rate (GFLOP/s), or None where it could not be measured.
        tensor_gflops: fp16 mma.sync rate with fp32 accumulation (GFLOP/s), or None (before sm_80).
    """

    gpu: str
    sm_clock_mhz: int
    fma_gflops: float | None
    tensor_gflops: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def cache_file(gpu: str, sm_clock_mhz: int) -> Path:
    """Where the ceilings of ``gpu`` at ``sm_clock_mhz`` are kept (beside the build cache)."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"
    return build.cache_dir().parent / "ceilings" / f"{slug}-{int(sm_clock_mhz)}.json"


def cached(gpu: str, sm_clock_mhz: int) -> Ceilings | None:
    """The cached ceilings of this GPU and clock, or None (never measured here; unreadable or not ceilings:
    then one warning line says it is ignored, :mod:`cudalab.build.cachefiles`)."""
    from cudalab.build import cachefiles  # noqa: PLC0415

    def rate(x: Any) -> float | None:  # a peak is a positive, finite rate (inf or nan drew a traceback)
        if x is None:
            return None
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not (math.isfinite(x) and x > 0):
            raise ValueError(f"not a rate: {x!r}")
        return float(x)

    def parse(d: Any) -> Ceilings | None:
        if not isinstance(d, dict) or d.get("gpu") != gpu or d.get("sm_clock_mhz") != int(sm_clock_mhz):
            return None
        return Ceilings(gpu=gpu, sm_clock_mhz=int(sm_clock_mhz), fma_gflops=rate(d.get("fma_gflops")),
                        tensor_gflops=rate(d.get("tensor_gflops")))

    return cachefiles.read(cache_file(gpu, sm_clock_mhz), "the measured ceilings", parse)


def store(c: Ceilings) -> None:
    """Keep ``c`` for its GPU and clock; a cache that cannot be written only means measuring again."""
    from cudalab.build import cachefiles  # noqa: PLC0415

    try:
        cachefiles.write(cache_file(c.gpu, c.sm_clock_mhz), json.dumps(c.to_dict(), indent=1) + "\n")
    except (CudalabError, OSError):
        pass
