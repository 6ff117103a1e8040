"""The ceilings of a roofline chart as data: an FP32 FMA peak, a tensor-core peak and the memory streams per GPU
and SM clock, kept in a small cache beside the build cache (:func:`cached`, :func:`store`), as the noise floor
is. A GPU worker measures them (:func:`cudalab.worker.ceilings.measure_all`, asked by ``cudalab roofline
--measure``); a missing cache only means the chart draws datasheet lines, named as such.
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


__all__ = ["Ceilings", "cache_file", "cached", "describe", "store"]


@dataclass(frozen=True)
class Ceilings:
    """Measured peaks of one GPU at one SM clock.

    Attributes:
        gpu: the GPU's name.
        sm_clock_mhz: the clock the figures belong to (the device's reported SM clock).
        fma_gflops: FP32 FMA rate (GFLOP/s) of the pure-FFMA probe, or None where it could not be measured.
        tensor_gflops: the tensor ceiling (GFLOP/s, 16-bit inputs, fp32 accumulation): the best of the mma.sync
            probe and the hgemm family's best row (cuBLAS GemmEx, the wgmma kernel); None before sm_80.
        tensor_source: what reached ``tensor_gflops`` (``mma.sync probe``, ``hgemm cublas 8192³``...).
        mma_gflops: the mma.sync probe's own rate (on Hopper well under wgmma's).
        copy_gbs, read_gbs, write_gbs: the memory roofline's copy rate and its read and write streams (GB/s).
    """

    gpu: str
    sm_clock_mhz: int
    fma_gflops: float | None
    tensor_gflops: float | None
    tensor_source: str = "mma.sync probe"
    mma_gflops: float | None = None
    copy_gbs: float | None = None
    read_gbs: float | None = None
    write_gbs: float | None = None

    @property
    def memory_gbs(self) -> float | None:
        """The memory slope of a chart: the fastest stream measured (a roofline bounds from above)."""
        rates = [x for x in (self.copy_gbs, self.read_gbs, self.write_gbs) if x]
        return max(rates) if rates else None

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
                        tensor_gflops=rate(d.get("tensor_gflops")),
                        tensor_source=str(d.get("tensor_source") or "mma.sync probe"),
                        mma_gflops=rate(d.get("mma_gflops")), copy_gbs=rate(d.get("copy_gbs")),
                        read_gbs=rate(d.get("read_gbs")), write_gbs=rate(d.get("write_gbs")))

    return cachefiles.read(cache_file(gpu, sm_clock_mhz), "the measured ceilings", parse)


def store(c: Ceilings) -> None:
    """Keep ``c`` for its GPU and clock; a cache that cannot be written only means measuring again."""
    from cudalab.build import cachefiles  # noqa: PLC0415

    try:
        cachefiles.write(cache_file(c.gpu, c.sm_clock_mhz), json.dumps(c.to_dict(), indent=1) + "\n")
    except (CudalabError, OSError):
        pass


def describe(c: Ceilings) -> str:
    """One line of what was measured: ``NVIDIA H200 at 1980 MHz: FP32 FMA 61.4 TFLOP/s (FFMA probe); ...``."""
    def num(x: float | None, scale: float, unit: str, digits: int = 0) -> str:
        return "not measured" if not x else f"{x / scale:,.{digits}f} {unit}"

    text = f"{c.gpu} at {c.sm_clock_mhz} MHz: FP32 FMA {num(c.fma_gflops, 1e3, 'TFLOP/s', 1)} (FFMA probe)"
    text += f"; fp16 tensor {num(c.tensor_gflops, 1e3, 'TFLOP/s')} ({c.tensor_source}"
    text += f"; mma.sync probe {c.mma_gflops / 1e3:,.0f})" if c.mma_gflops and c.tensor_source != "mma.sync probe" else ")"
    if c.copy_gbs:
        text += (f"; memory: copy {c.copy_gbs:,.0f} GB/s, read stream {num(c.read_gbs, 1, 'GB/s')}, "
                 f"write stream {num(c.write_gbs, 1, 'GB/s')}")
    return text
