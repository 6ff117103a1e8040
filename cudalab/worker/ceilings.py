"""Measuring the ceilings of a roofline chart on the GPU: an FP32 FMA peak and a tensor-core (fp16 ``mma.sync``)
peak from cudalab's own short kernels (:mod:`cudalab.worker.own_kernels`), the best 16-bit GEMM the hgemm
family runs, and the memory roofline with its read and write streams (:func:`measure_all`). The figures and
their cache are :mod:`cudalab.inspect.ceilings` (what the chart reads, without a GPU).

The tensor ceiling is the best of the mma.sync probe and a GEMM, not a wgmma probe: on Hopper mma.sync
reaches about two thirds of what wgmma does, and a wgmma loop needs shared-memory matrix descriptors and
warpgroup fences that only a GPU can prove right; cuBLAS's GemmEx (and the hgemm family's own wgmma kernel,
verified like any row) is the best GEMM on the GPU by the definition the issue asks the ceiling to meet
(within 5% of cuBLAS's best), and where neither runs (no CuPy, not Hopper) the probe's figure stands,
named as the probe's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataclasses import replace

from cudalab.bench import Protocol
from cudalab.inspect.ceilings import Ceilings
from cudalab.records.results import PASSED
from cudalab.worker import own_kernels

#: The GEMM the tensor ceiling is also measured with (square, fp16 in, fp32 out): cuBLAS's plateau on an
#: H100/H200 (4096³ sits a few percent under it); the check is NumPy's fp32 product, a second or two.
GEMM_N = 8192
#: Its rows: cuBLAS GemmEx through CuPy and the family's own wgmma kernel (each skipped, saying so, where it
#: cannot run).
GEMM_VARIANTS = "cublas,wgmma"
#: Bytes the memory roofline and its streams move (past the L2 of any current GPU many times).
MEMORY_BYTES = 1 << 30


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


def best_gemm(device: Any, n: int = GEMM_N) -> tuple[float | None, str]:
    """The best 16-bit GEMM rate (GFLOP/s) of the hgemm family's GEMM_VARIANTS at ``n``³ and what reached it
    (None, why: no row passed)."""
    from cudalab.plan import RunRequest, precheck  # noqa: PLC0415
    from cudalab.worker.executor import FamilyRun  # noqa: PLC0415

    req = RunRequest(family="hgemm", variants=GEMM_VARIANTS, n=str(n), dtype="float16", roofline=False,
                     protocol=Protocol(), force=True)
    rows = [r for r in FamilyRun(precheck(req), device).run() if r.status == PASSED and r.gflops]
    if not rows:
        return None, "no GEMM row passed"
    best = max(rows, key=lambda r: r.gflops or 0.0)
    return best.gflops, f"hgemm {best.variant} {n}³ fp16"


def measure_all(device: Any, gemm_n: int = GEMM_N) -> Ceilings:
    """The probes (:func:`measure`), the best GEMM (:func:`best_gemm`) and the memory roofline with its streams
    (:func:`cudalab.worker.executor.measure_roofline` on MEMORY_BYTES, or a quarter of the free memory)."""
    from cudalab.worker.executor import measure_roofline  # noqa: PLC0415

    c = measure(device)
    c = replace(c, mma_gflops=c.tensor_gflops)
    if c.tensor_gflops is not None:
        try:
            gemm, source = best_gemm(device, gemm_n)
        except Exception:  # noqa: BLE001  (a GEMM that cannot run leaves the probe's ceiling, named as the probe's)
            gemm, source = None, ""
        if gemm and gemm > c.tensor_gflops:
            c = replace(c, tensor_gflops=gemm, tensor_source=source)
    free = int(device.mem_info()[0])
    roof = measure_roofline(device, min(MEMORY_BYTES, free // 4), Protocol())
    return replace(c, copy_gbs=roof.gbs, read_gbs=roof.read_gbs, write_gbs=roof.write_gbs)
