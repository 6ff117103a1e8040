"""What ptxas and the PTX say about a build's kernels: registers, shared memory, spills, barriers
(``-Xptxas -v``) and each kernel's parameter sizes (the ``.entry`` signature). Pure text parsing."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudalab.errors import CompileError

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")
_PTX_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(([^)]*)\)")
_PTX_PARAM = re.compile(r"\.param\b.*?\.[busf](\d+)\b[^,\[]*?(?:\[(\d+)\])?\s*$", re.S)


@dataclass(frozen=True)
class KernelInfo:
    """What one kernel of a build uses: ptxas's report and its parameter sizes.

    Attributes:
        params: size in bytes of each parameter, in order, from the PTX ``.entry`` signature
            (a pointer is 8, an int 4, a 16-byte struct 16): what a user's kernel must match to
            take the family's arguments.
    """

    name: str
    registers: int
    static_shared: int
    stack_frame: int
    spill_stores: int
    spill_loads: int
    barriers: int
    params: tuple[int, ...] = ()


def parse_ptxas(text: str) -> list[KernelInfo]:
    """Parse ``-Xptxas -v`` output into one record per kernel, in the order ptxas reports them
    (``params`` left empty: ptxas does not report them)."""
    out: list[KernelInfo] = []
    current: dict | None = None
    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = {"name": m.group(1), "frame": (0, 0, 0)}
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            current["frame"] = tuple(int(x) for x in m.groups())
            continue
        m = _USED.search(line)
        if m:
            stack, st, ld = current["frame"]
            out.append(KernelInfo(name=current["name"], registers=int(m.group(1)),
                                  static_shared=int(m.group(3) or 0), stack_frame=stack, spill_stores=st,
                                  spill_loads=ld, barriers=int(m.group(2) or 0)))
            current = None
    return out


def parse_ptx_params(ptx: str) -> dict[str, tuple[int, ...]]:
    """Parameter sizes in bytes of every ``.entry`` in PTX text, in source order.

    ``.param .u64 p`` is 8 bytes, ``.param .align 8 .b8 p[16]`` (a struct passed by value) 16.
    """
    out: dict[str, tuple[int, ...]] = {}
    for m in _PTX_ENTRY.finditer(ptx):
        sizes = []
        for decl in filter(str.strip, m.group(2).split(",")):
            p = _PTX_PARAM.search(decl.strip())
            if p is None:
                raise CompileError(f"cannot read the PTX parameter {decl.strip()!r} of {m.group(1)}")
            sizes.append(int(p.group(1)) // 8 * int(p.group(2) or 1))
        out[m.group(1)] = tuple(sizes)
    return out
