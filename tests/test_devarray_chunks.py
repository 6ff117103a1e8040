"""DeviceArray.chunks on a fake driver backed by host memory: every shape downloads in row blocks that
add up to the array (a 1-D array's second chunk once read past its end: 'cuMemcpyDtoH failed: invalid
argument' on the scan example's 2^26 int32 output)."""

from __future__ import annotations

import numpy as np
import pytest

from cudalab.devarray import DeviceArray
from cudalab.hostwork import exact_diff


class FakeDrv:
    """mem_alloc / memcpy_htod / memcpy_dtoh over one bytearray; an address outside an allocation fails."""

    class MemoryError(Exception):
        pass

    def __init__(self):
        self.mem = bytearray()
        self.allocs: list[tuple[int, int]] = []

    def mem_alloc(self, n):
        base = len(self.mem) + 4096
        self.mem.extend(bytes(base + n - len(self.mem)))
        self.allocs.append((base, n))
        return base

    def _check(self, addr, n):
        if not any(b <= addr and addr + n <= b + size for b, size in self.allocs):
            raise ValueError("cuMemcpyDtoH failed: invalid argument")

    def memcpy_htod(self, addr, host):
        data = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
        self._check(addr, data.nbytes)
        self.mem[addr: addr + data.nbytes] = data.tobytes()

    def memcpy_dtoh(self, out, addr):
        self._check(addr, out.nbytes)
        out.reshape(-1).view(np.uint8)[:] = np.frombuffer(bytes(self.mem[addr: addr + out.nbytes]), np.uint8)


class FakeDev:
    def __init__(self):
        self.drv = FakeDrv()
        self._staging = None

    def staging(self, nbytes):
        if self._staging is None or self._staging.nbytes < nbytes:
            self._staging = np.empty(nbytes, np.uint8)
        return self._staging


@pytest.mark.parametrize("shape", [(1000,), (37, 11), (5, 7, 9)])
def test_chunks_read_every_row_block_of_every_shape(shape):
    dev = FakeDev()
    host = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    arr = DeviceArray(dev, shape, np.int32)
    arr.upload(host)
    chunks = arr.chunks(chunk_bytes=4 * 64)  # several blocks whatever the shape
    got = np.concatenate([blk.copy() for _, blk in chunks])
    assert got.shape == host.shape and (got == host).all()
    assert exact_diff(arr.chunks(chunk_bytes=4 * 64), host).wrong == 0
