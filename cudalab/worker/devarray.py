"""Device arrays: a GPU allocation of a shape and dtype (rows optionally pitched) with uploads, downloads
(whole, in pinned row chunks, or only the row padding) and poison fills.

Kept apart from :mod:`cudalab.worker.gpu` for size; it imports no pycuda itself: every driver call goes
through the :class:`~cudalab.worker.gpu.Device` that made the array (``dev.drv``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cudalab.worker import heartbeat
from cudalab.errors import OutOfMemoryError

if TYPE_CHECKING:  # for annotations only
    from cudalab.worker.gpu import Device


#: Uploads of at least this many bytes go through pinned memory in chunks: a pageable 1 GiB upload ran
#: at 6.6 GB/s on an H100 host (the driver stages it through its own small pinned buffers).
STAGED_MIN = 32 << 20


class DeviceArray:
    """A device allocation holding an array of ``shape`` and ``dtype``, rows optionally pitched."""

    def __init__(self, dev: "Device", shape: tuple[int, ...], dtype: np.dtype, pitched: bool = False):
        self._dev = dev
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        drv = dev.drv
        rows = int(np.prod(self.shape[:-1])) if len(self.shape) > 1 else 1
        row_bytes = self.shape[-1] * self.dtype.itemsize if self.shape else self.dtype.itemsize
        try:
            if pitched and len(self.shape) == 2:
                self._alloc, self.pitch_bytes = drv.mem_alloc_pitch(row_bytes, rows, min(self.dtype.itemsize, 16))
            else:
                self._alloc = drv.mem_alloc(max(1, rows * row_bytes))
                self.pitch_bytes = row_bytes
        except drv.MemoryError:
            free, _ = drv.mem_get_info()
            raise OutOfMemoryError(rows * row_bytes, free, f"array {self.shape} {self.dtype}") from None
        self.rows = rows
        self.row_bytes = row_bytes
        self.nbytes = self.pitch_bytes * rows

    @property
    def ptr(self) -> int:
        """Device address."""
        return int(self._alloc)

    @property
    def pitch_elems(self) -> int:
        """Row pitch in elements (what the seed transposes take as ``pitch_in_elem``)."""
        return self.pitch_bytes // self.dtype.itemsize

    @property
    def pitched(self) -> bool:
        """Whether rows are padded."""
        return self.pitch_bytes != self.row_bytes

    def upload(self, host: np.ndarray) -> None:
        """Copy a host array of the same shape into this allocation (a large one in pinned chunks)."""
        host = np.ascontiguousarray(host, dtype=self.dtype)
        if host.nbytes >= STAGED_MIN and self.shape:
            self._upload_staged(host)
        elif self.pitched:
            self._copy2d(0, self.rows, host, to_device=True)
        else:
            self._dev.drv.memcpy_htod(self._alloc, host)

    def _upload_staged(self, host: np.ndarray, chunk_bytes: int = 64 << 20) -> None:
        """Upload row blocks through the two halves of the pinned staging buffer: block k+1 is copied
        into one half (by the host threads) while block k's copy to the GPU runs from the other."""
        from cudalab.hostwork import copy_rows  # noqa: PLC0415

        drv = self._dev.drv
        rows = self.shape[0]
        flat = host.reshape(rows, -1)
        row_bytes = flat.shape[1] * self.dtype.itemsize
        per = max(1, chunk_bytes // max(1, row_bytes))
        half = min(per, rows) * row_bytes
        staging = self._dev.staging(2 * half)
        stream = drv.Stream()
        copied: list[Any] = [None, None]  # the event after each half's last copy to the GPU
        for k, r0 in enumerate(range(0, rows, per)):
            r1, h = min(rows, r0 + per), k % 2
            if copied[h] is not None:
                copied[h].synchronize()  # that half's previous block has left for the GPU
            buf = staging[h * half: h * half + (r1 - r0) * row_bytes].view(self.dtype).reshape(r1 - r0, -1)
            copy_rows(buf, flat[r0:r1])
            if self.pitched:
                self._copy2d(r0, r1, buf, to_device=True, stream=stream)
            else:
                drv.memcpy_htod_async(self.ptr + r0 * row_bytes, buf, stream)
            copied[h] = drv.Event()
            copied[h].record(stream)
            heartbeat.beat()
        stream.synchronize()

    def download(self) -> np.ndarray:
        """Copy this allocation back into a new host array (synchronous)."""
        out = np.empty(self.shape, self.dtype)
        if self.pitched:
            self._copy2d(0, self.rows, out, to_device=False)
        else:
            self._dev.drv.memcpy_dtoh(out, self._alloc)
        return out

    def chunks(self, chunk_bytes: int = 64 << 20) -> Any:
        """The array as row blocks downloaded one at a time into a reused pinned buffer: verified as
        it arrives, so the host never holds a second full copy (see :class:`cudalab.hostwork.RowChunks`)."""
        from cudalab.hostwork import RowChunks  # noqa: PLC0415

        rows = self.shape[0] if self.shape else 1
        row_elems = int(np.prod(self.shape[1:])) if len(self.shape) > 1 else 1
        per = max(1, chunk_bytes // max(1, row_elems * self.dtype.itemsize))
        half = min(per, rows) * row_elems * self.dtype.itemsize
        staging = self._dev.staging(2 * half)
        turn = [0]

        def read(r0: int, r1: int) -> np.ndarray:
            # two halves, taken in turn: a chunk is compared while the next one downloads
            base = (turn[0] % 2) * half
            turn[0] += 1
            n = (r1 - r0) * row_elems
            out = staging[base: base + n * self.dtype.itemsize].view(self.dtype).reshape((r1 - r0,) + self.shape[1:])
            self.download_rows(r0, r1, out)
            heartbeat.beat()  # a long check downloads for seconds: the worker is alive
            return out

        return RowChunks(shape=self.shape, dtype=self.dtype, rows_per_chunk=per, read=read, whole=self.download)

    def download_rows(self, r0: int, r1: int, out: np.ndarray) -> None:
        """Copy rows ``r0:r1`` into ``out`` (contiguous, ``(r1 - r0, ...)``), synchronously."""
        if self.pitched:
            self._copy2d(r0, r1, out, to_device=False)
        else:  # the stride of the first axis: one element of a 1-D array, a whole row of a matrix
            stride = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
            self._dev.drv.memcpy_dtoh(out, self.ptr + r0 * stride)

    def download_padding(self) -> np.ndarray:
        """The row padding of a pitched allocation (bytes past each row's data), as uint8 of shape
        (rows, pitch_bytes - row_bytes): a 2-D copy of only those bytes, whatever the array's size."""
        pad = self.pitch_bytes - self.row_bytes
        out = np.empty((self.rows, pad), np.uint8)
        if pad == 0 or self.rows == 0:
            return out
        c = self._dev.drv.Memcpy2D()
        c.set_src_device(self.ptr + self.row_bytes)
        c.src_pitch = self.pitch_bytes
        c.set_dst_host(out)
        c.dst_pitch = pad
        c.width_in_bytes = pad
        c.height = self.rows
        c(aligned=False)
        return out

    def _copy2d(self, r0: int, r1: int, host: np.ndarray, to_device: bool, stream: Any = None) -> None:
        """Rows ``r0:r1`` of a pitched allocation from (``to_device``) or into contiguous ``host`` rows;
        enqueued on ``stream`` (``host`` pinned), else synchronous."""
        c = self._dev.drv.Memcpy2D()
        rows = self.ptr + r0 * self.pitch_bytes
        if to_device:
            c.set_src_host(host)
            c.src_pitch = self.row_bytes
            c.set_dst_device(rows)
            c.dst_pitch = self.pitch_bytes
        else:
            c.set_src_device(rows)
            c.src_pitch = self.pitch_bytes
            c.set_dst_host(host)
            c.dst_pitch = self.row_bytes
        c.width_in_bytes = self.row_bytes
        c.height = r1 - r0
        if stream is not None:
            c(stream)
        else:
            c(aligned=True)

    def poison(self, byte: int = 0xFF) -> None:
        """Fill every byte (padding too) so unwritten elements show: 0xFF is NaN for floats, -1 for ints."""
        self._dev.drv.memset_d8(self._alloc, byte, self.nbytes)

    def copy_from(self, other: "DeviceArray") -> None:
        """Device-to-device copy of a same-sized allocation (enqueued on the default stream, or on the stream
        being captured: a graph replays an in-place row's reset before each launch)."""
        self._dev.drv.memcpy_dtod_async(self._alloc, other._alloc, min(self.nbytes, other.nbytes),
                                       getattr(self._dev, "stream", None))

    def cupy(self) -> Any | None:
        """A CuPy array over the same device memory (no copy; a library row's operand), or None when CuPy
        is not installed (the row is then skipped, saying so)."""
        try:
            import cupy  # noqa: PLC0415  (optional: the ref extra; imported by the rows that use it)
        except ImportError:
            return None
        mem = cupy.cuda.UnownedMemory(self.ptr, self.nbytes, self)
        strides = (self.pitch_bytes, self.dtype.itemsize) if self.pitched else None
        return cupy.ndarray(self.shape, self.dtype, cupy.cuda.MemoryPointer(mem, 0), strides=strides)

    def free(self) -> None:
        """Release the allocation now rather than at garbage collection."""
        if self._alloc is not None:
            self._alloc.free()
            self._alloc = None
