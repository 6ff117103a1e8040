"""What the candidate's code could launch besides itself: child grids and other streams (no GPU needed).

A kernel may only be timed honestly if its work is done when its stop event is reached. Device code can
leave work behind only through dynamic parallelism: a child grid (``kernel<<<...>>>`` in device code,
which compiles to ``cudaGetParameterBuffer`` + ``cudaLaunchDevice``), a launch into the fire-and-forget
or tail-launch stream, a stream it creates, or a device graph launch. cudalab loads a plain cubin
(no ``-rdc``, no ``cudadevrt``), so such a kernel cannot run under it at all; the judge still names why,
from the code itself: the file is compiled to PTX with relocatable device code (the calls survive as
``call`` targets there, however a macro spelled them) and the source, comments stripped, is read for the
stream names that a macro turns into constants before the PTX.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from cudalab import private

__all__ = ["Scan", "scan", "scan_texts", "CHILD_CALLS", "STREAM_CALLS"]

#: Parts of the names of device-side launch calls, in source or PTX (CUDA 13's PTX calls
#: ``__cudaCDP2GetParameterBufferV2`` and ``__cudaCDP2LaunchDeviceV2``; older ones ``cudaLaunchDevice``).
CHILD_CALLS = ("LaunchDevice", "GetParameterBuffer", "GraphLaunch")
#: Parts of the names of device-side streams, in source or PTX (the two special streams are macros,
#: gone from the PTX: only the source names them).
STREAM_CALLS = ("StreamCreate", "StreamDestroy", "StreamFireAndForget", "StreamTailLaunch",
                "GraphFireAndForgetLaunch", "GraphTailLaunch")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_LAUNCH_SYNTAX = re.compile(r"<<<")
#: A special stream as the headers' macros expand (``cudaStreamFireAndForget`` is ``((cudaStream_t)0x4)``).
_STREAM_CONSTANT = re.compile(r"\(\s*cudaStream_t\s*\)\s*0x([0-9a-fA-F]+)")
#: The special streams' values (cuda_device_runtime_api.h), by name.
_SPECIAL = {0x3: "cudaStreamTailLaunch", 0x4: "cudaStreamFireAndForget", 0x0100000000000000: "cudaStreamGraphTailLaunch",
            0x0200000000000000: "cudaStreamGraphFireAndForget", 0x0300000000000000: "cudaStreamGraphFireAndForgetAsSibling"}


@dataclass(frozen=True)
class Scan:
    """What the scan found.

    Attributes:
        child_grids: the device-side launch calls found (PTX targets, or ``<<<`` in device source).
        side_streams: the device-side stream calls or names found.
        ptx: whether the PTX was read (False: nvcc could not compile it relocatably; the source alone was).
        note: why the PTX was not read ('' when it was).
    """

    child_grids: tuple[str, ...] = ()
    side_streams: tuple[str, ...] = ()
    ptx: bool = False
    note: str = field(default="")


def _calls(text: str, parts: tuple[str, ...]) -> tuple[str, ...]:
    """Every whole name in ``text`` that holds one of ``parts`` (the names as written there)."""
    found = {m.group(0) for p in parts for m in re.finditer(rf"\w*{p}\w*", text)}
    return tuple(sorted(n for n in found if "_param_" not in n))  # PTX names a call's parameters after it


def scan_texts(source: str, ptx: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(child-grid calls, side-stream calls) in the source (comments stripped) and the PTX, if any."""
    code = _COMMENTS.sub(" ", source)
    child = set(_calls(code, CHILD_CALLS))
    if _LAUNCH_SYNTAX.search(code):  # a .cu given to --add holds device code only: any launch is a child grid
        child.add("<<<")
    streams = set(_calls(code, STREAM_CALLS)) | {_SPECIAL.get(int(m.group(1), 16), m.group(0))
                                                 for m in _STREAM_CONSTANT.finditer(code)}
    if ptx:
        child |= set(_calls(ptx, CHILD_CALLS))
        streams |= set(_calls(ptx, STREAM_CALLS))
    return tuple(sorted(child)), tuple(sorted(streams))


def scan(path: Path, defines: Mapping[str, str], arch: str = "sm_90") -> Scan:
    """Scan the user's file: its code as the preprocessor leaves it with the run's macros (``#if`` branches
    not taken are gone; the file's own lines only, not the headers'), and its PTX compiled with ``-rdc=true``.
    Where nvcc cannot preprocess it, its raw text (comments stripped) is read instead.

    The macros go in a prelude (``#define`` lines, then ``#include`` of the file by absolute path): no user
    text reaches a command line.
    """
    path = path.resolve()
    try:
        source = path.read_text(errors="replace")
    except OSError as exc:
        return Scan(note=f"cannot read {path} ({exc.strerror})")
    pre, ptx, note = _nvcc(path, defines, arch)
    child, streams = scan_texts(pre if pre is not None else source, ptx)
    return Scan(child_grids=child, side_streams=streams, ptx=ptx is not None, note=note)


def own_lines(preprocessed: str, path: Path) -> str:
    """The lines of ``preprocessed`` (``nvcc -E`` output) that come from ``path`` itself (its line markers)."""
    mine, keep = [], False
    for line in preprocessed.splitlines():
        if line.startswith("# ") and '"' in line:
            keep = line.split('"')[1] == str(path)
            continue
        if keep:
            mine.append(line)
    return "\n".join(mine)


def _nvcc(path: Path, defines: Mapping[str, str], arch: str) -> tuple[str | None, str | None, str]:
    """(the file's own preprocessed lines, the PTX, a note): None for what nvcc could not make."""
    from cudalab import build  # noqa: PLC0415
    from cudalab.errors import CudalabError  # noqa: PLC0415

    lines = [f"#define {k} {v}" for k, v in sorted(defines.items())]
    text = "\n".join(["// cudalab judge scan", *lines, f'#include "{path}"', ""])
    folder = private.private_folder("cudalab-judge")
    prelude = private.write_private(folder, f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.cu", text)
    try:
        nvcc = build.find_nvcc()
    except CudalabError as exc:
        return None, None, f"PTX not read: {str(exc).splitlines()[0]}"
    virtual = f"-arch={arch.replace('sm_', 'compute_')}"
    with tempfile.TemporaryDirectory(prefix="cudalab-judge-") as tmp:
        out, ii = Path(tmp) / "scan.ptx", Path(tmp) / "scan.ii"
        proc = build._run([nvcc, "-E", "-rdc=true", virtual, "-I", str(path.parent), "-o", str(ii), str(prelude)])
        pre = own_lines(ii.read_text(errors="replace"), path) if proc.returncode == 0 and ii.exists() else None
        proc = build._run([nvcc, "-ptx", "-rdc=true", virtual, "-I", str(path.parent), "-o", str(out), str(prelude)])
        if proc.returncode != 0 or not out.exists():
            first = next((ln for ln in (proc.stderr or "").splitlines() if "error" in ln), "nvcc failed")
            return pre, None, f"PTX not read: {first.strip()[:200]}"
        return pre, out.read_text(errors="replace"), ""
