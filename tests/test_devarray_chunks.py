"""DeviceArray.chunks on a fake driver backed by host memory: every shape downloads in row blocks that
add up to the array (a 1-D array's second chunk once read past its end: 'cuMemcpyDtoH failed: invalid
argument' on the scan example's 2^26 int32 output)."""

from __future__ import annotations

import numpy as np
import pytest

from cudalab.worker.devarray import DeviceArray
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

    def memcpy_htod_async(self, addr, host, stream):
        # runs when the stream gets there, reading the host buffer then (as a GPU copy does): a staging
        # half overwritten before its copy ran uploads the wrong rows
        stream.ops.append(lambda: self.memcpy_htod(addr, host))

    def Stream(self):
        return FakeStream()

    def Event(self):
        return FakeEvent()


class FakeStream:
    """Copies queued in order; they run only when an event after them or the stream is synchronized."""

    def __init__(self):
        self.ops, self.done = [], 0

    def run_through(self, mark):
        while self.done < mark:
            self.ops[self.done]()
            self.done += 1

    def synchronize(self):
        self.run_through(len(self.ops))


class FakeEvent:
    def record(self, stream):
        self.stream, self.mark = stream, len(stream.ops)

    def synchronize(self):
        self.stream.run_through(self.mark)


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


@pytest.mark.parametrize("shape", [(1000,), (37, 11), (5, 7, 9), (1,)])
def test_staged_upload_puts_every_row_where_it_belongs(shape):
    """Many blocks through two pinned halves whose copies run late: a half reused before its copy ran
    (no wait on its event) uploads another block's rows."""
    dev = FakeDev()
    host = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape) * 3 + 1
    arr = DeviceArray(dev, shape, np.int32)
    arr._upload_staged(host, chunk_bytes=4 * 33)
    assert (arr.download() == host).all()


def test_large_uploads_go_through_staging(monkeypatch):
    from cudalab.worker import devarray

    dev = FakeDev()
    host = np.arange(4096, dtype=np.float32)
    arr = DeviceArray(dev, host.shape, np.float32)
    monkeypatch.setattr(devarray, "STAGED_MIN", host.nbytes)
    arr.upload(host)
    assert dev.staging(1).nbytes >= 2 * 4  # the pinned halves were used
    assert (arr.download() == host).all()
