"""The read and write streams measured beside a point's roofline copy (:func:`cudalab.worker.executor.measure_roofline`).

A copy moves half reads and half writes; a kernel that mostly reads (a reduction, a GEMV, a row norm) can beat
it, so a row is rated against the time its own reads and writes take at these two rates
(:func:`cudalab.roofline.min_seconds`). Both kernels walk the buffer as the copy family's roofline
kernel (``copy_block``) does: each block one contiguous span of 1024 threads x 4 adjacent-lane 16-byte
accesses per pass, so the three figures differ in direction only. They are timed as any row is
(:func:`cudalab.worker.sampling.time_case`: warm-up, L2 flushed before each sample, the run's protocol).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cudalab.bench import Protocol
from cudalab.families.model import Case
from cudalab.worker import own_kernels
from cudalab.worker.sampling import time_case

#: Both kernels: 16-byte accesses, UNROLL in flight a thread, block-contiguous spans (copy_block's walk).
#: The read folds what it loaded into one word written only if it hits a value it never reaches, so the
#: compiler keeps every load; the write stores a constant (the data is irrelevant to the rate).
STREAMS_SRC = r"""
#define UNROLL 4
extern "C" __global__ void cudalab_read_stream(const float4 *in, unsigned long long n, unsigned int *sink)
{
    const unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x * UNROLL + threadIdx.x;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x * UNROLL;
    unsigned int acc = 0;
    for (unsigned long long base = first; base < n; base += step) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const unsigned long long i = base + (unsigned long long)u * blockDim.x;
            v[u] = i < n ? __ldg(in + i) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            acc ^= __float_as_uint(v[u].x) ^ __float_as_uint(v[u].y) ^ __float_as_uint(v[u].z) ^ __float_as_uint(v[u].w);
    }
    if (acc == 0x9E3779B9u) sink[0] = acc;
}

extern "C" __global__ void cudalab_write_stream(float4 *out, unsigned long long n, float value)
{
    const unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x * UNROLL + threadIdx.x;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x * UNROLL;
    const float4 v = make_float4(value, value, value, value);
    for (unsigned long long base = first; base < n; base += step) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const unsigned long long i = base + (unsigned long long)u * blockDim.x;
            if (i < n)
                out[i] = v;
        }
    }
}
"""
THREADS = 1024
UNROLL = 4
NAMES = ("cudalab_read_stream", "cudalab_write_stream")


def grid_for(nbytes: int) -> int:
    """Blocks covering ``nbytes`` once: each moves THREADS x UNROLL 16-byte vectors."""
    return max(1, -(-(nbytes // 16) // (THREADS * UNROLL)))


def measure(device: Any, source: Any, nbytes: int, protocol: Protocol) -> tuple[float, float]:
    """GB/s of reading ``nbytes`` of the device buffer ``source`` and of writing as many into a fresh buffer.

    Args:
        device: the GPU.
        source: a device buffer of at least ``nbytes`` (the roofline copy's own source).
        nbytes: the bytes each stream moves (a multiple of 16 is read; the tail under 16 bytes is left).
        protocol: the run's timing protocol.

    Raises:
        CudalabError: a build or launch failed (the caller keeps the copy's roofline without streams).
    """
    n = nbytes // 16
    if n == 0:
        raise ValueError(f"{nbytes} bytes: too few for a 16-byte stream")
    src = own_kernels.source_file(STREAMS_SRC, "cudalab_streams")
    k = device.compile(src, {}, list(NAMES))
    sink = device.empty((1,), np.uint32)
    out = device.empty((n * 4,), np.float32)
    grid, block = (grid_for(n * 16), 1, 1), (THREADS, 1, 1)
    rargs = (source, np.uint64(n), sink)
    wargs = (out, np.uint64(n), np.float32(1.0))
    try:
        rates = []
        for name, args in zip(NAMES, (rargs, wargs)):
            kern = k[name]
            case = Case(run=lambda _k=kern, _a=args: _k.launch(grid, block, _a), result=lambda: np.empty(0),
                        repeatable=True)
            ms = time_case(device, case, protocol).stats.median
            rates.append(n * 16 / (ms * 1e-3) / 1e9)
        return rates[0], rates[1]
    finally:
        out.free()
        sink.free()
