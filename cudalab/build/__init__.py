"""The one build path: a ``.cu`` file and its defines -> a cubin, ptxas's resource report and the
kernels' parameter sizes, cached on disk.

Runs load the cubin this module builds (``gpu.Device.compile``) and ``cudalab compile`` prints the
report of the same build, so what the table shows is what the GPU runs.

Defines never reach a command line: nvcc hands ``-D`` values to the host compiler through ``sh``,
so they are written as a ``#define`` prelude in front of the source instead, followed by a ``#line``
directive so that nvcc's messages and the cubin's line info still name the original file and line.
No GPU is needed here; only nvcc.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Mapping

from cudalab.build import cachefiles, priority
from cudalab.build.defines import validate_define  # noqa: F401  (also the name other modules use)
from cudalab.errors import CompileError, CudalabError, UsageError
from cudalab.files import load_json, read_bytes
from cudalab.build.ptxas import KernelInfo, parse_ptx_params, parse_ptxas  # noqa: F401  (re-exported)
from cudalab.build.restated import drop_restated, find_local
from cudalab.build.toolkit import find_cuda_tool

# Every flag but -arch and -I (both in the cache key on their own). Part of the cache key.
FLAGS = ("-cubin", "-lineinfo", "-Xptxas", "-v")
# Bump when the cache entry's layout or the prelude changes: old entries then simply miss.
CACHE_FORMAT = 1
# A build's lock file is named by the key's first LOCK_DIGITS hex digits (at most 16**4 files, one per build made
# in practice, beside its cubin and JSON). With two (256 files), two of 15 builds at once (a campaign's builds ahead
# on 16 cores) shared a lock 34% of the time, and one waited for the other's nvcc; with four, 0.16%.
LOCK_DIGITS = 4

_ARCH = re.compile(r"sm_\d+[af]?")  # sm_90, sm_90a, sm_100f

_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\r\n]+)"', re.M)


@dataclass(frozen=True)
class Build:
    """One compiled source: the cubin to load and the report of that very cubin.

    Attributes:
        defines: the ``(NAME, VALUE)`` pairs, sorted, that the build was asked for (the prelude left
            out those restating the source's own defaults: :mod:`cudalab.build.restated`).
        kernels: one record per ``.entry`` of the cubin, in source order.
        log: nvcc's output (ptxas's ``-v`` report) from the run that made the cubin.
        cached: True when it came from the disk cache and nvcc did not run.
        key: the cache key (sha256 hex).
    """

    source: Path
    arch: str
    defines: tuple[tuple[str, str], ...]
    cubin: bytes = field(repr=False)
    kernels: tuple[KernelInfo, ...]
    log: str = field(repr=False)
    cached: bool
    nvcc_version: str
    key: str

    def kernel(self, name: str) -> KernelInfo | None:
        """The record of kernel ``name``, or None when the cubin has no such entry."""
        return next((k for k in self.kernels if k.name == name), None)


# --- validation ---------------------------------------------------------------------------------------

def _check_path(source: Path) -> None:
    # The path goes into a #line string and from there, unescaped, into the PTX's .file directive,
    # where ptxas fails on a quote ("Parsing error"): refuse it here, in words.
    if any(c in str(source.absolute()) for c in '"\n\r'):
        raise UsageError(f"cannot build {str(source)!r}: its path holds a double quote or a line break; "
                         "move or rename it")


def _check_arch(arch: str) -> None:
    if not _ARCH.fullmatch(arch):
        raise UsageError(f"--arch {arch!r} is not a GPU architecture such as sm_90 (a cubin needs sm_XX)")


# --- nvcc ----------------------------------------------------------------------------------------------

def find_nvcc() -> str:
    """Path of nvcc (see :func:`cudalab.build.toolkit.find_cuda_tool`)."""
    return find_cuda_tool("nvcc", "nvcc", "install the CUDA toolkit")


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    """Run one nvcc command (an argv list, no shell). Tests replace this to prove nvcc did not run.

    nvcc runs in a process group of its own, killed whole (cicc, ptxas) if this process is interrupted
    (Ctrl-C, or SIGTERM/SIGHUP under :func:`terminations`). With ``--keep-dir``, nvcc's own temporary
    files (cicc's ``.lgenfe.bc``, which the keep folder does not cover) go there too (``TMPDIR``): they
    are removed with the build's folder, even when the build fails.
    """
    env = None
    if "--keep-dir" in argv:
        env = dict(os.environ, TMPDIR=argv[argv.index("--keep-dir") + 1])
    def start() -> subprocess.Popen:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=hasattr(os, "killpg"))

    # a build ahead of its turn: nvcc below the campaign (cudalab.build.priority), this thread as it is
    with (priority.start_lowered(start) if priority.lowered() else start()) as proc:
        try:
            out, err = proc.communicate()
        except BaseException:
            _kill_group(proc)
            raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    """End nvcc and what it started, and wait for nvcc."""
    try:
        os.killpg(proc.pid, signal.SIGKILL) if hasattr(os, "killpg") else proc.kill()
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


@contextlib.contextmanager
def terminations() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into ``SystemExit(128 + signal)`` within the block, so a build being killed
    ends nvcc and removes its temporary folder (the default action would leave both behind). Outside the
    main thread nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    wanted = [signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    previous = {s: signal.signal(s, handler) for s in wanted}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@functools.lru_cache(maxsize=None)
def _version_of(nvcc: str) -> str:
    proc = _run([nvcc, "--version"])
    if proc.returncode != 0:
        raise CompileError(f"{nvcc} --version failed (exit {proc.returncode})", proc.stderr)
    return proc.stdout.strip()


def nvcc_version() -> str:
    """``nvcc --version``'s output (read once per process): part of every cache key."""
    return _version_of(find_nvcc())


# --- the source as nvcc sees it ------------------------------------------------------------------------

def includes(source: Path) -> list[Path]:
    """Every local file ``source`` pulls in with ``#include "..."``, recursively, as nvcc finds them:
    beside the including file first, then in the source's folder (the ``-I``). Quoted names that
    are not found there (toolkit headers) are left to the nvcc version in the cache key."""
    seen: dict[Path, None] = {}
    todo = [source.resolve()]
    while todo:
        current = todo.pop()
        try:
            text = current.read_bytes()
        except OSError:
            continue  # nvcc will say so, with the including line
        for m in _INCLUDE.finditer(text):
            found = find_local(m.group(1).decode(errors="replace"), current, source.resolve().parent)
            if found is not None and found not in seen and found != source.resolve():
                seen[found] = None
                todo.append(found)
    return sorted(seen)


def prelude(source: Path, defines: Mapping[str, str]) -> bytes:
    """The lines put in front of the source: one ``#define`` each, then ``#line 1 "<source>"`` so
    errors and line info name the original file and line."""
    # Absolute, so that the cubin's line info (ncu, compute-sanitizer) finds the file from anywhere.
    path = str(source.absolute()).replace("\\", "\\\\")  # a string literal (quotes: _check_path)
    lines = [f"#define {k} {v}" for k, v in sorted(defines.items())] + [f'#line 1 "{path}"', ""]
    return "\n".join(lines).encode()


def cache_key(source: Path, text: bytes, defines: Mapping[str, str], arch: str, version: str) -> str:
    """sha256 of everything the cubin depends on: the source and its local includes (text and path),
    the defines, the arch, the flags, the nvcc version and the cache format."""
    h = hashlib.sha256()
    parts: dict[str, Any] = {
        # The path too: the prelude's #line writes it into the cubin's line info.
        "format": CACHE_FORMAT, "source": str(source.absolute()), "defines": sorted(defines.items()),
        "arch": arch, "flags": FLAGS, "nvcc": version,
        "text": hashlib.sha256(text).hexdigest(),
        "files": [(str(p), hashlib.sha256(p.read_bytes()).hexdigest()) for p in includes(source)],
    }
    h.update(json.dumps(parts, sort_keys=True).encode())
    return h.hexdigest()


# --- the disk cache ---------------------------------------------------------------------------------------

def cache_dir() -> Path:
    """``$CUDALAB_CACHE``, else ``$XDG_CACHE_HOME/cudalab``, else ``~/.cache/cudalab``; builds live in
    its ``build/`` folder as ``<key>.cubin`` and ``<key>.json``."""
    return cachefiles.cache_root() / "build"


def check_cache() -> None:
    """Refuse a ``CUDALAB_CACHE`` the user set that cannot hold builds (a file, a read-only folder), in
    one line: silently building without a cache would make every run pay nvcc again, unexplained.

    The default folder is not refused: a read-only home still runs, just without a cache.

    Raises:
        UsageError: naming the variable, its value and why.
    """
    folder = cachefiles.own_folder(cache_dir(), make=False)  # a link planted in the cache: never written through
    raw = os.environ.get("CUDALAB_CACHE")
    if not raw:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"CUDALAB_CACHE={raw} cannot hold the build cache ({exc.strerror or exc}); point it at "
                         "a writable folder or unset it") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"CUDALAB_CACHE={raw}: cannot write in {folder}; point it at a writable folder or unset it")


def _load(key: str, source: Path) -> Build | None:
    """The cached build for ``key``, or None when it is absent, unreadable or does not match."""
    folder = cache_dir()
    try:
        meta = load_json(folder / f"{key}.json")
        cubin = read_bytes(folder / f"{key}.cubin")
        if meta["format"] != CACHE_FORMAT or meta["key"] != key or hashlib.sha256(cubin).hexdigest() != meta["cubin_sha256"]:
            return None
        return Build(source=source, arch=meta["arch"], defines=tuple((k, v) for k, v in meta["defines"]),
                     cubin=cubin, kernels=tuple(KernelInfo(**{**k, "params": tuple(k["params"])}) for k in meta["kernels"]),
                     log=meta["log"], cached=True, nvcc_version=meta["nvcc_version"], key=key)
    except (CudalabError, OSError, ValueError, KeyError, TypeError):  # missing or corrupt: build again
        return None


@contextlib.contextmanager
def _locked(key: str) -> Iterator[None]:
    """Hold an exclusive lock on ``key``'s build across processes (two test workers, two GPU workers of
    one sweep); none where the cache folder cannot hold the lock file or there is no ``fcntl``."""
    try:
        import fcntl  # noqa: PLC0415  (POSIX)

        locks = cachefiles.own_folder(cache_dir().parent / "locks")  # beside the builds, not among them
        # One lock file per LOCK_DIGITS hex digits of the key: keys that share a file build one after the other.
        f = open(locks / f"{key[:LOCK_DIGITS]}.lock", "a")
    except (ImportError, OSError, UsageError):
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _store(b: Build) -> None:
    """Save a build; a cache folder that cannot be written just means no caching."""
    meta = {
        "format": CACHE_FORMAT, "key": b.key, "source": str(b.source), "arch": b.arch, "defines": b.defines,
        "nvcc_version": b.nvcc_version, "cubin_sha256": hashlib.sha256(b.cubin).hexdigest(),
        "kernels": [asdict(k) for k in b.kernels], "log": b.log,
    }
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # The cubin first: the JSON names its hash, so a half-written pair never loads.
        _write_atomic(folder / f"{b.key}.cubin", b.cubin)
        _write_atomic(folder / f"{b.key}.json", json.dumps(meta, indent=1).encode())
    except OSError:
        pass


# --- build -------------------------------------------------------------------------------------------------

def build(source: Path, defines: Mapping[str, str], arch: str = "sm_90") -> Build:
    """Compile ``source`` with ``defines`` for ``arch`` into a cubin, or take it from the disk cache.

    nvcc runs as ``nvcc -cubin -arch=ARCH -lineinfo -Xptxas -v -I <source folder>`` on a temporary
    copy of the source behind a ``#define`` prelude; its PTX is kept to read the parameter sizes.

    Args:
        source: the ``.cu`` file.
        defines: macro name -> value; each must pass :func:`validate_define`.
        arch: ``sm_XX`` of the GPU that will load the cubin.

    Raises:
        UsageError: a define or the arch is refused (before nvcc runs).
        CompileError: the source cannot be read or nvcc rejected it; the log names the original file.
        ToolMissingError: nvcc is not installed.
    """
    source, text, asked, defines, version, key = _prepare(source, defines, arch)
    hit = _load(key, source)
    if hit is None:
        with _locked(key):  # another process building this key: wait for it, then read its build
            hit = _load(key, source) or _compile(source, text, defines, arch, version, key)
    return replace(hit, defines=asked)


def cached(source: Path, defines: Mapping[str, str], arch: str = "sm_90") -> Build | None:
    """What :func:`build` would return from the disk cache alone, or None: nvcc never runs (but
    ``nvcc --version`` may, once, for the key). Raises as :func:`build` does on refused input."""
    source, _, asked, _, _, key = _prepare(source, defines, arch)
    hit = _load(key, source)
    return None if hit is None else replace(hit, defines=asked)


def _prepare(source: Path, defines: Mapping[str, str], arch: str) -> tuple[Path, bytes, tuple, dict, str, str]:
    """Checked input: the source, its text, the defines asked for (sorted pairs), the defines the
    prelude will hold (restated defaults dropped), the nvcc version and the cache key."""
    source = Path(source)
    defines = {str(k): str(v) for k, v in defines.items()}
    for name, value in defines.items():
        validate_define(name, value)
    _check_arch(arch)
    _check_path(source)
    check_cache()
    try:
        text = read_bytes(source, limit=16 * 2**20)  # a source, not /dev/zero
    except UsageError as exc:
        raise CompileError(f"cannot read {source}: {exc}") from None
    version = nvcc_version()
    prelude_defines = drop_restated(source, defines)  # a restated default is the same cubin: the same key
    key = cache_key(source, text, prelude_defines, arch, version)
    return source, text, tuple(sorted(defines.items())), prelude_defines, version, key


def _compile(source: Path, text: bytes, defines: dict[str, str], arch: str, version: str, key: str) -> Build:
    """nvcc on ``text`` behind its prelude, the result stored in the cache (see :func:`build`)."""
    with tempfile.TemporaryDirectory(prefix="cudalab-build-") as tmp:
        work = Path(tmp) / (source.name if source.suffix == ".cu" else source.name + ".cu")
        work.write_bytes(prelude(source, defines) + text)
        keep = Path(tmp) / "keep"
        keep.mkdir()
        out = Path(tmp) / "out.cubin"
        argv = [find_nvcc(), *FLAGS, f"-arch={arch}", "-I", str(source.resolve().parent),
                "--keep", "--keep-dir", str(keep), "-o", str(out), str(work)]
        proc = _run(argv)
        # Only the prelude lines and nvcc's summary name the temporary copy: show the real file.
        log = (proc.stdout + proc.stderr).replace(str(work), str(source))
        if proc.returncode != 0:
            raise CompileError(f"nvcc could not compile {source} (exit {proc.returncode})", log)
        cubin = out.read_bytes()
        ptx = "\n".join(p.read_text(errors="replace") for p in sorted(keep.glob("*.ptx")))
    params = parse_ptx_params(ptx)
    report = {k.name: k for k in parse_ptxas(log)}
    # Source order (the PTX's), with ptxas's numbers and the PTX's parameter sizes.
    names = list(params) + [n for n in report if n not in params]
    kernels = tuple(
        replace(report[n], params=params.get(n, ())) if n in report
        else KernelInfo(n, 0, 0, 0, 0, 0, 0, params[n])
        for n in names
    )
    b = Build(source=source, arch=arch, defines=tuple(sorted(defines.items())), cubin=cubin, kernels=kernels,
              log=log, cached=False, nvcc_version=version, key=key)
    _store(b)
    return b
