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
    streams = set(_calls(code, STREAM_CALLS))
    if ptx:
        child |= set(_calls(ptx, CHILD_CALLS))
        streams |= set(_calls(ptx, STREAM_CALLS))
    return tuple(sorted(child)), tuple(sorted(streams))


def scan(path: Path, defines: Mapping[str, str], arch: str = "sm_90") -> Scan:
    """Scan the user's file: its source, and its PTX compiled with ``-rdc=true`` and the run's macros.

    The macros go in a prelude (``#define`` lines, then ``#include`` of the file by absolute path): no user
    text reaches a command line.
    """
    path = path.resolve()
    try:
        source = path.read_text(errors="replace")
    except OSError as exc:
        return Scan(note=f"cannot read {path} ({exc.strerror})")
    ptx, note = _ptx(path, defines, arch)
    child, streams = scan_texts(source, ptx)
    return Scan(child_grids=child, side_streams=streams, ptx=ptx is not None, note=note)


def _ptx(path: Path, defines: Mapping[str, str], arch: str) -> tuple[str | None, str]:
    from cudalab import build  # noqa: PLC0415
    from cudalab.errors import CudalabError  # noqa: PLC0415

    lines = [f"#define {k} {v}" for k, v in sorted(defines.items())]
    text = "\n".join(["// cudalab judge scan", *lines, f'#include "{path}"', ""])
    folder = private.private_folder("cudalab-judge")
    prelude = private.write_private(folder, f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.cu", text)
    try:
        nvcc = build.find_nvcc()
    except CudalabError as exc:
        return None, f"PTX not read: {str(exc).splitlines()[0]}"
    with tempfile.TemporaryDirectory(prefix="cudalab-judge-") as tmp:
        out = Path(tmp) / "scan.ptx"
        proc = build._run([nvcc, "-ptx", "-rdc=true", f"-arch={arch.replace('sm_', 'compute_')}",
                           "-I", str(path.parent), "-o", str(out), str(prelude)])
        if proc.returncode != 0 or not out.exists():
            first = next((ln for ln in (proc.stderr or "").splitlines() if "error" in ln), "nvcc failed")
            return None, f"PTX not read: {first.strip()[:200]}"
        return out.read_text(errors="replace"), ""
