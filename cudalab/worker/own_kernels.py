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
