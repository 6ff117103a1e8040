"""A fake GPU for ``cudalab watch`` and the notebook magic on the CPU: kernels are NumPy, and what a
kernel of yours (``--add``) does is read from its text, so editing the file changes the row as an
edit on a GPU would.

- the built-in transpose, copy and memcpy kernels are right and take 1 ms a launch;
- your kernel transposes; it takes 0.4 ms when its text uses ``__shared__`` (a tiled kernel), 1 ms
  otherwise;
- a text with the word ``bug`` writes the input untransposed (the row is ``incorrect``);
- a text with the word ``typo`` does not compile: nvcc's log names the file and line;
- a text with ``asm("trap;")`` crashes (the worker loses its context: a ``failed`` row);
- a text with ``printf`` prints ``PRINTF_LINES N`` lines (default 3) a launch through C stdio, as the
  driver prints a kernel's printf (buffered, on the worker's fd 1), then does what the rest says.

:func:`install` patches cudalab (in this process) so its workers are threads running the real worker
loop on this fake. Run as a script (``python tests/fake_watch.py watch transpose ...``), it is the
``cudalab`` command on that fake: ``scripts/watch_demo.py --cudalab`` drives it in the tests.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from cudalab.worker import gpu  # noqa: E402
from cudalab.instruments import telemetry  # noqa: E402
from cudalab.catalog import user  # noqa: E402
from cudalab.errors import CompileError, GpuError  # noqa: E402
from cudalab.records.device import DeviceInfo  # noqa: E402
from cudalab.worker.gpu import EventTime  # noqa: E402
from cudalab.catalog.user import SignatureError  # noqa: E402
from test_runcore import FakeDevice  # noqa: E402

_INCLUDE = re.compile(r'#include "([^"]+)"')


def user_text(source: Any) -> tuple[Path, str]:
    """The file a compile reads: the user's own behind an ``--add`` prelude."""
    path = Path(source)
    text = path.read_text()
    m = _INCLUDE.search(text) if text.startswith("// cudalab --add prelude") else None
    if m:
        path = Path(m.group(1))
        text = path.read_text()
    return path, text


def _compile_error(path: Path, text: str) -> CompileError:
    line = next((i for i, ln in enumerate(text.splitlines(), 1) if "typo" in ln), 1)
    return CompileError(f"nvcc could not compile {path}",
                        f'{path}({line}): error: expected a ";"\n1 error detected in the compilation of "{path}".')


class FakeKernel:
    def __init__(self, device: "WatchGpu", fn: Any, ms: float):
        self.device, self.fn, self.ms = device, fn, ms
        self.num_regs = 16
        self.timed_once = False

    def launch(self, grid, block, args, shared=0):
        self.device.last_ms = self.ms
        # The checked launch and the first timed one do the NumPy work; the other timed launches only
        # take their fake time (the notebook's 4096^2 transposes cost 40 ms of CPU each, ~40 a row).
        if self.device.timing and self.timed_once:
            return
        self.fn(*args)
        self.timed_once = self.timed_once or self.device.timing


def transpose(out, src, rows, cols, pin, pout):
    # In bands of 256 rows: twice as fast as one strided copy at the notebook's 4096^2 (~40 launches a row)
    for r in range(0, src.data.shape[0], 256):
        out.data[:, r:r + 256] = src.data[r:r + 256].T


def untransposed(out, src, rows, cols, pin, pout):
    out.data[...] = src.data.reshape(out.data.shape)


def copy(out, src, *rest):
    out.data[...] = src.data


def printing(fn: Any, lines: int) -> Any:
    """``fn`` after printing ``lines`` lines through C stdio's stdout (buffered when fd 1 is a file or pipe)."""
    import ctypes

    libc = ctypes.CDLL(None)

    def kernel(*args):
        for i in range(lines - 1):
            libc.printf(b"thread %d says hi\n", ctypes.c_int(i))
        libc.printf(b"last line\n")
        return fn(*args)

    return kernel


def trap(*args):
    raise GpuError("the GPU reported an error: an illegal instruction was encountered (a __trap())")


class WatchGpu(FakeDevice):
    """The fake GPU a worker opens (``gpu.Device``)."""

    def __init__(self, index: int = 0):
        super().__init__({})
        self.info = DeviceInfo(index, "Fake GPU", (9, 0), 132, 80 * 2**30, 50 * 2**20, 1980, 2619, 5120, "13.0", "13.0")
        self.last_ms = 1.0
        self.timing = False

    def close(self) -> None:
        pass

    def compile(self, source, defines, names, **kw):
        path, text = user_text(source)
        mine = path != Path(source)  # behind an --add prelude: the user's kernel
        if mine and "typo" in text:
            raise _compile_error(path, text)
        out = {}
        for name in names:
            if mine:
                fn = trap if 'asm("trap;")' in text else untransposed if "bug" in text else transpose
                if "printf" in text:
                    m = re.search(r"PRINTF_LINES\s+(\d+)", text)
                    fn = printing(fn, int(m.group(1)) if m else 3)
                out[name] = FakeKernel(self, fn, 0.4 if "__shared__" in text else 1.0)
            else:
                out[name] = FakeKernel(self, transpose if name.startswith("transpose") else copy, 1.0)
        return out

    def time_ms(self, enqueue):
        self.timing = True
        try:
            enqueue()
        finally:
            self.timing = False
        self.timed += 1
        return EventTime(self.last_ms, True)


def check_signature(variant, family, signature, defines, itemsize, arch="sm_90"):
    """The signature check without nvcc: the kernel must be in the file, and a ``typo`` does not compile."""
    path, text = user_text(variant.source)
    if "typo" in text:
        raise _compile_error(path, text)
    if not re.search(rf"\b{re.escape(variant.kernel)}\s*\(", text):
        raise SignatureError(f"{variant.name}: {variant.source} has no kernel {variant.kernel}")


def install(setattr_: Any = setattr) -> None:
    """Point cudalab at the fake: workers are threads running the real worker loop on :class:`WatchGpu`
    (``setattr_``: a test's ``monkeypatch.setattr``, so the patch ends with the test)."""
    from cudalab.execute.local import process as W
    from fake_workers import ThreadWorker

    setattr_(gpu, "Device", WatchGpu)
    setattr_(gpu, "pci_bus_id", lambda index: "0000:01:00.0")
    setattr_(telemetry, "import_nvml", lambda: (None, "no NVML"))
    setattr_(user, "check_signature", check_signature)
    setattr_(W, "spawn", lambda device, energy=False: ThreadWorker(device, energy))


if __name__ == "__main__":
    install()
    from cudalab.cli import main

    main()
