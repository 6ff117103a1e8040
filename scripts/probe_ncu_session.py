"""Does a kernel run at the same speed inside an ncu process? A probe for the timing-truth section.

Two kernels with the bodies of the naive transpose (strided 4-byte stores) and the padded-tile
transpose (coalesced) at 16384², each with two timestamps added: the first block's start and the last
block's end (``%globaltimer``, atomicMin/atomicMax). Every launch is timed three ways: CUDA events
around it (behind a spin kernel and an L2 flush, as cudalab samples), the in-kernel span, and, when
the script runs under ``ncu --launch-skip K --launch-count C``, ncu's ``gpu__time_duration`` of the
profiled launches. The span needs no profiler, so it tells whether events and ncu disagree because
one of them mis-times the kernel or because the kernel itself runs differently in an ncu process.

    python3 scripts/probe_ncu_session.py            # one JSON line per kernel: events and spans
    ncu --clock-control none --cache-control none --kernel-name regex:^probe_ --launch-skip 8 \\
        --launch-count 4 --metrics gpu__time_duration.sum python3 scripts/probe_ncu_session.py

Needs CuPy and a GPU (the benchmark machines have both); of cudalab it takes only the spin and L2-flush
kernels its samples use (their sources, from :mod:`cudalab.worker.own_kernels`).
"""

from __future__ import annotations

import json
import sys

SOURCE = r"""
__device__ __forceinline__ unsigned long long now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
// span[0]: the earliest block start, span[1]: the latest block end (after the block's stores).
#define SPAN_BEGIN if (threadIdx.x == 0 && threadIdx.y == 0) atomicMin(&span[0], now());
#define SPAN_END __syncthreads(); if (threadIdx.x == 0 && threadIdx.y == 0) { __threadfence(); atomicMax(&span[1], now()); }
extern "C" __global__ void probe_naive(float *out, const float *in, int n, unsigned long long *span)
{
    SPAN_BEGIN
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    out[(size_t)x * n + y] = in[(size_t)y * n + x];
    SPAN_END
}
extern "C" __global__ void probe_tile(float *out, const float *in, int n, unsigned long long *span)
{
    SPAN_BEGIN
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[(size_t)y * n + x];
    __syncthreads();
    out[(size_t)(blockIdx.x * 32 + threadIdx.y) * n + blockIdx.y * 32 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
    SPAN_END
}
"""

N = 16384
LAUNCHES = 12


def main() -> int:
    import cupy as cp
    import numpy as np

    from cudalab.worker.own_kernels import FLUSH_SRC, SPIN_SRC  # the very kernels cudalab's samples run before a launch

    mod = cp.RawModule(code=SOURCE + SPIN_SRC + FLUSH_SRC)
    spin, flush = mod.get_function("cudalab_spin"), mod.get_function("cudalab_flush_read")
    rng = cp.random.default_rng()
    a = rng.random((N, N), dtype=cp.float32)
    out = cp.empty((N, N), cp.float32)
    buf = cp.zeros((2 * cp.cuda.Device().attributes["L2CacheSize"]) // 4, cp.float32)
    sink = cp.zeros(4, cp.uint32)
    span = cp.zeros(2, cp.uint64)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    fresh = np.array([np.iinfo(np.uint64).max, 0], np.uint64)
    names = ("probe_naive", "probe_tile")
    got = {name: {"events_ms": [], "span_ms": []} for name in names}
    for _ in range(LAUNCHES):  # the kernels alternate: launch i of each is global launch 2i, 2i + 1
        for name in names:
            span.set(fresh)
            spin((1,), (1,), (np.uint64(300_000),))   # the GPU is busy while the host enqueues the rest
            flush((528,), (256,), (buf, np.uint64(buf.nbytes // 16), sink))
            start.record()
            mod.get_function(name)((N // 32, N // 32), (32, 32), (out, a, np.int32(N), span))
            stop.record()
            stop.synchronize()
            got[name]["events_ms"].append(cp.cuda.get_elapsed_time(start, stop))
            t = span.get()
            got[name]["span_ms"].append((int(t[1]) - int(t[0])) / 1e6)
    for name in names:
        mod.get_function(name)((N // 32, N // 32), (32, 32), (out, a, np.int32(N), span))
        ok = bool(cp.array_equal(out, a.T))
        print(json.dumps({"kernel": name, **got[name], "correct": ok}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
