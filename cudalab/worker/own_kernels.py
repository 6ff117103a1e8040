"""cudalab's own small kernels, run around every sample (CUDA C source; compiled by :mod:`cudalab.worker.gpu`).

Strings, so a probe script or a test can build the very same kernels with another CUDA stack; and the
file each is built from (:func:`source_file`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from cudalab import build

#: A kernel that holds the stream for a given number of nanoseconds (globaltimer): enqueued before
#: a batch, it lets the host queue all the batch's launches before the first one starts, so the
#: batch runs back to back instead of at the host's launch rate.
SPIN_SRC = r"""
extern "C" __global__ void cudalab_spin(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
"""


#: The reference launch of graph timing (:mod:`cudalab.worker.graphs`): one thread that returns. Its window
#: between two event nodes is what an event and a launch cost the front end besides a kernel's own span.
EMPTY_SRC = r"""
extern "C" __global__ void cudalab_empty() {}
"""


#: The L2 flush reads a buffer twice the L2's size that was filled once: the next sample starts with
#: an L2 full of clean lines. Overwriting the buffer before each sample (a memset) would leave up to
#: an L2 of dirty lines that drain to DRAM during the timed kernel: events read 1-5% above ncu's
#: durations on an H100 that way. The XOR keeps the loads alive; the fill makes it 0, never the sentinel.
FLUSH_SRC = r"""
extern "C" __global__ void cudalab_flush_read(const uint4 *buf, unsigned long long n, unsigned int *sink)
{
    unsigned int acc = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        uint4 v = buf[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u) sink[0] = acc;
}
"""


def source_file(text: str, name: str) -> Path:
    """A file holding ``text`` in the build cache's folder, named by its hash, so :func:`cudalab.build.build`
    caches it as any source: a worker's first flush or spin costs a cache read, not pycuda's compiler.

    Raises:
        OSError: neither the cache folder nor the temp folder can be written.
    """
    data = text.encode()
    file = f"{name}-{hashlib.sha256(data).hexdigest()[:16]}.cu"
    # a home that cannot be written still runs (without a cache): the file then lives in the temp folder
    for folder in (build.cache_dir() / "own", Path(tempfile.gettempdir()) / f"cudalab-own-{os.getuid()}"):
        path = folder / file
        try:
            if not (path.is_file() and path.read_bytes() == data):
                folder.mkdir(parents=True, exist_ok=True)
                build._write_atomic(path, data)
            return path
        except OSError as exc:
            error = exc
    raise error


#: The FMA ceiling: 8 independent FMA chains a thread (enough to hide the FMA latency at full occupancy),
#: 16 steps unrolled per loop trip; the result is written only when it hits a value it never reaches, so
#: the compiler keeps every FMA. FLOP per thread = iters x 16 x 8 x 2.
FMA_PEAK_SRC = r"""
extern "C" __global__ void cudalab_fma_peak(float *out, int iters, float seed)
{
    float a0 = seed + threadIdx.x, a1 = a0 + 1.f, a2 = a0 + 2.f, a3 = a0 + 3.f;
    float a4 = a0 + 4.f, a5 = a0 + 5.f, a6 = a0 + 6.f, a7 = a0 + 7.f;
    const float b = 0.9999f, c = 1e-4f;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            a0 = fmaf(a0, b, c); a1 = fmaf(a1, b, c); a2 = fmaf(a2, b, c); a3 = fmaf(a3, b, c);
            a4 = fmaf(a4, b, c); a5 = fmaf(a5, b, c); a6 = fmaf(a6, b, c); a7 = fmaf(a7, b, c);
        }
    }
    float s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    if (s == -1.2345e30f) out[0] = s;
}
"""
FMA_PEAK_FLOP_PER_THREAD_ITER = 16 * 8 * 2

#: The tensor ceiling: fp16 mma.sync m16n8k16 with fp32 accumulators, 4 independent accumulators a warp
#: (sm_80 and later). FLOP per warp = iters x 4 x (2 x 16 x 8 x 16). Hopper's wgmma goes past what
#: mma.sync reaches: the chart labels this ceiling as the mma.sync one.
MMA_PEAK_SRC = r"""
extern "C" __global__ void cudalab_mma_peak(float *out, int iters)
{
    unsigned a0 = 0x3c003c00u ^ threadIdx.x, a1 = a0 + 1u, a2 = a0 + 2u, a3 = a0 + 3u;
    unsigned b0 = 0x3c003c00u, b1 = b0 + 1u;
    float c[4][4] = {};
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    if (s == -1.2345e30f) out[0] = s;
}
"""
MMA_PEAK_FLOP_PER_WARP_ITER = 4 * 2 * 16 * 8 * 16
