"""One nvcc build per device code: define sets that preprocess to the same code share a build.

A family's launch often passes a source's own defaults: every matmul variant's defines (``TILE=32``,
``AS_BK=16``, the warp tile's ten) are what its source's ``#ifndef`` lines define anyway. Each define set
is another key of the build cache, but nvcc sees the same device code, and makes the same cubin with
the same resource report: builds of one file, a second of nvcc or more each, that prove one thing.

:func:`build` takes a build already in the cache as it is (``cudalab.build`` itself gives define sets that
only restate a source's defaults one key: :mod:`cudalab.build.restated`); otherwise it asks nvcc's preprocessor
(``nvcc -E`` for the arch, about 0.15 s): the first define
set of a device code builds as ever (``cudalab.build.build``, into the session's cache); later ones, in
any xdist worker, get that build, whose kernels are the ones they would have compiled. The tests that
check every variant's build use it (test_compile_all, test_matmul, test_add's signatures, the sort
mutants); everything else builds its own key. An ``--add`` prelude of a family's file (test_add checks the
families' kernels as users' ones) is built as that file: the same device code, one build. The registry lives in the session's cache folder
(``device-code/<digest>.json`` names the define set that built it), with a lock per digest so two
workers never build one device code at once.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from cudalab import build as B

# gcc's line markers (``# 12 "file" 2``): they name the file nvcc was handed and move with the prelude's
# length; the code is the rest.
_MARKER = re.compile(rb'^#\s*\d+\s+"[^\n]*\n|^\s*\n', re.M)


def device_digest(source: Path, defines: Mapping[str, str], arch: str) -> str | None:
    """sha256 of the device code nvcc compiles for ``source`` behind ``defines`` (the build's own prelude)
    for ``arch``, with the nvcc version and build flags; None when it does not preprocess (the build
    itself will say why)."""
    try:
        text = source.read_bytes()
    except OSError:
        return None
    return _digest(source, tuple(sorted(defines.items())), arch, text)


@functools.lru_cache(maxsize=None)
def _digest(source: Path, defines: tuple[tuple[str, str], ...], arch: str, text: bytes) -> str | None:
    with tempfile.TemporaryDirectory(prefix="cudalab-pp-") as tmp:
        work = Path(tmp) / (source.name if source.suffix == ".cu" else source.name + ".cu")
        work.write_bytes(B.prelude(source, dict(defines)) + text)
        # -gencode, not -arch: only then does -E define sm_90a's feature macros (__CUDA_ARCH_FEAT_SM90_ALL),
        # without which every wgmma define set preprocesses to the same empty kernel.
        gencode = f"-gencode=arch=compute_{arch[3:]},code={arch}"
        proc = subprocess.run([B.find_nvcc(), "-E", gencode, "-I", str(source.resolve().parent), str(work)],
                              capture_output=True)
    if proc.returncode != 0:
        return None
    h = hashlib.sha256(json.dumps([B.nvcc_version(), B.FLAGS, B.CACHE_FORMAT, arch]).encode())
    h.update(_MARKER.sub(b"", proc.stdout))
    return h.hexdigest()


# user.compile_source's file: a comment and one #include of the user's (here: a family's) source.
_ADD_PRELUDE = re.compile(r'// cudalab --add prelude; source sha256 [0-9a-f]{64}\n#include "([^"\n]+)"\n')


def _add_prelude_target(source: Path) -> Path:
    """The file an ``--add`` prelude includes (the same device code), else ``source`` itself."""
    try:
        m = _ADD_PRELUDE.fullmatch(source.read_text())
    except (OSError, UnicodeDecodeError):
        return source
    return Path(m.group(1)) if m and Path(m.group(1)).is_file() else source


def build(source: Any, defines: Mapping[str, Any], arch: str = "sm_90", *,
          real: Callable[..., B.Build] | None = None) -> B.Build:
    """``cudalab.build.build(source, defines, arch)``, or the session's build of the same device code.

    Args:
        real: the build function (default ``cudalab.build.build`` as it is now: the prefetch's, if any).
            A test that routes ``build.build`` itself through here passes the original.

    Returns:
        The build of the first define set that made this device code: its ``defines`` (and key) may be
        that set's, its kernels and their report are this one's.
    """
    real = real or B.build
    source = _add_prelude_target(Path(source))
    defines = {str(k): str(v) for k, v in dict(defines).items()}
    cache = os.environ.get("CUDALAB_CACHE")
    if cache and B.cached(source, defines, arch) is not None:  # built (or a restated default): no nvcc -E
        return real(source, defines, arch)
    digest = device_digest(source, defines, arch) if cache else None
    if digest is None:
        return real(source, defines, arch)
    folder = Path(cache) / "device-code"
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / f"{digest}.json"
    with open(folder / f"{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker building this code: wait, then take its build
        try:
            first, first_defines, first_arch = json.loads(entry.read_text())
            if not Path(first).is_file():  # CUDALAB_TEST_CACHE kept across checkouts: its maker's since removed
                raise ValueError(first)
        except (OSError, ValueError):
            made = real(source, defines, arch)
            entry.write_text(json.dumps([str(source), sorted(defines.items()), arch]))
            return made
    return real(Path(first), dict(first_defines), first_arch)  # in the session's cache now
