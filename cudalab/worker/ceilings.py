"""Measuring the compute ceilings of a roofline chart on the GPU: an FP32 FMA peak and a tensor-core (fp16
``mma.sync``) peak from cudalab's own short kernels (:mod:`cudalab.worker.own_kernels`). The figures and their
cache are :mod:`cudalab.inspect.ceilings` (what the chart reads, without a GPU).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cudalab import build
from cudalab.errors import CudalabError
from cudalab.inspect.ceilings import Ceilings
from cudalab.worker import own_kernels


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
