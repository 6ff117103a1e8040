"""The compute ceilings of a roofline chart, measured on the GPU: an FP32 FMA peak and a tensor-core
(fp16 ``mma.sync``) peak from cudalab's own short kernels (:mod:`cudalab.own_kernels`), cached per GPU
and SM clock.

:func:`measure` runs in the GPU worker (it takes a :class:`cudalab.gpu.Device`); :func:`cached` and
:func:`store` are plain file reads and writes that the chart uses, where a missing cache only means the
chart draws the datasheet lines alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cudalab import build, own_kernels
from cudalab.errors import CudalabError
from cudalab.files import atomic_write, load_json


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
    """The cached ceilings of this GPU and clock, or None (never measured here, or unreadable)."""
    try:
        d = load_json(cache_file(gpu, sm_clock_mhz))
        return Ceilings(gpu=str(d["gpu"]), sm_clock_mhz=int(d["sm_clock_mhz"]),
                        fma_gflops=None if d.get("fma_gflops") is None else float(d["fma_gflops"]),
                        tensor_gflops=None if d.get("tensor_gflops") is None else float(d["tensor_gflops"]))
    except (CudalabError, OSError, KeyError, TypeError, ValueError):
        return None


def store(c: Ceilings) -> None:
    """Keep ``c`` for its GPU and clock; a cache that cannot be written only means measuring again."""
    path = cache_file(c.gpu, c.sm_clock_mhz)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(c.to_dict(), indent=1) + "\n")
    except (CudalabError, OSError):
        pass


def _best_ms(device: Any, launch: Any, samples: int = 7) -> float:
    launch()  # warm-up: module load and first-launch costs stay out
    device.synchronize()
    return min(device.time_ms(launch).ms for _ in range(samples))


def measure(device: Any, iters: int = 4096) -> Ceilings:
    """Run the FMA and mma.sync kernels on every SM at full occupancy and return their best rates.

    Each launch runs about 10-50 ms on an H100 (long enough for event timing, short enough for a test).
    """
    info = device.info
    out = device.empty((1,), np.float32)
    blocks = info.sm_count * 8  # 8 x 256 threads = 2048 threads an SM: full occupancy
    fma = device.compile(own_kernels.source_file(own_kernels.FMA_PEAK_SRC, "cudalab_fma_peak"), {},
                         ["cudalab_fma_peak"])["cudalab_fma_peak"]
    args = [out, np.int32(iters), np.float32(1.0)]
    ms = _best_ms(device, lambda: fma.launch((blocks, 1, 1), (256, 1, 1), args))
    fma_gflops = blocks * 256 * iters * own_kernels.FMA_PEAK_FLOP_PER_THREAD_ITER / (ms * 1e-3) / 1e9
    tensor = None
    if info.compute_capability >= (8, 0):
        mma = device.compile(own_kernels.source_file(own_kernels.MMA_PEAK_SRC, "cudalab_mma_peak"), {},
                             ["cudalab_mma_peak"])["cudalab_mma_peak"]
        margs = [out, np.int32(iters // 4)]
        ms = _best_ms(device, lambda: mma.launch((blocks, 1, 1), (256, 1, 1), margs))
        tensor = blocks * 8 * (iters // 4) * own_kernels.MMA_PEAK_FLOP_PER_WARP_ITER / (ms * 1e-3) / 1e9
    return Ceilings(gpu=info.name, sm_clock_mhz=int(info.sm_clock_mhz), fma_gflops=fma_gflops, tensor_gflops=tensor)
