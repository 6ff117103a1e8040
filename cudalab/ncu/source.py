"""Pure parser for ncu's source page (``ncu --import R --page source --print-source cuda,sass --csv``).

The page holds one block per profiled launch (result order, which is ID order) and per source file of
its function::

    "File Path","/path/kernel.cu"
    "Function Name","transpose_block"
    "Line No","Source","Address","Source","Warp Stall Sampling (All Samples)",...,"stall_barrier",...
    "55","out[...] = tile[threadIdx.x][threadIdx.y];","-","-","4372",...      <- a CUDA line (ncu's sums)
    "","","0x7f05a57af640","      LDS R7, [R4]","12",...                      <- its SASS instructions
    "","","...","...","-",...                                                  <- a gap in the SASS

Columns differ between blocks (``Divergent Branches`` only where there are branches, ``# Samples``
not always), so every block is read by its own header. ncu does not escape quotes inside fields
(``"extern "C" __global__ void ..."``), so rows are split on ``","`` and surplus pieces joined back
into the source text. The CUDA row carries ncu's per-line sums; requests (one per warp instruction)
are the instructions executed by the line's SASS rows that access shared or global memory, so
wavefronts per request and sectors per request are computed per line as Nsight Compute's GUI does.

Lines come from the ``-lineinfo`` every cudalab build has (see :data:`cudalab.build.FLAGS`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from cudalab.ncu.parse import parse_number

#: The ncu column names the parser reads.
SAMPLES = "Warp Stall Sampling (All Samples)"
SAMPLES_NOT_ISSUED = "Warp Stall Sampling (Not-issued Samples)"
INSTS = "Instructions Executed"
THREAD_INSTS = "Thread Instructions Executed"
SPACE = "Address Space"
ACCESS = "Access Operation"
NWAY = "L1 Conflicts Shared N-Way"
SH_WF = "L1 Wavefronts Shared"
SH_IDEAL = "L1 Wavefronts Shared Ideal"
SH_EXCESS = "L1 Wavefronts Shared Excessive"
GL_SECT = "L2 Theoretical Sectors Global"
GL_IDEAL = "L2 Theoretical Sectors Global Ideal"
GL_EXCESS = "L2 Theoretical Sectors Global Excessive"
DIVERGENT = "Divergent Branches"
_STALL = "stall_"


@dataclass(frozen=True)
class SourceLine:
    """One CUDA line of one launch with ncu's per-line figures (None: ncu printed no value)."""

    file: str
    line: int
    text: str
    samples: float | None = None
    samples_not_issued: float | None = None
    insts: float | None = None
    thread_insts: float | None = None
    access: str = ""
    shared_requests: float = 0.0
    shared_wavefronts: float | None = None
    shared_ideal: float | None = None
    shared_excess: float | None = None
    nway: float | None = None
    global_requests: float = 0.0
    global_sectors: float | None = None
    global_ideal: float | None = None
    global_excess: float | None = None
    divergent: float | None = None
    #: (reason, samples) of every stall reason with samples on this line, most first (``stall_`` dropped).
    stalls: tuple[tuple[str, float], ...] = ()

    @property
    def wavefronts_per_request(self) -> float | None:
        """Shared-memory wavefronts per request: the n-way figure (1 = conflict-free)."""
        return self.shared_wavefronts / self.shared_requests if self.shared_requests and self.shared_wavefronts else None

    @property
    def sectors_per_request(self) -> float | None:
        """Global (L2) sectors per request: 4 for 32 threads x 4 bytes coalesced, 32 for one sector a thread."""
        return self.global_sectors / self.global_requests if self.global_requests and self.global_sectors else None

    @property
    def threads_per_inst(self) -> float | None:
        """Average active threads per executed warp instruction (32 = no divergence)."""
        return self.thread_insts / self.insts if self.insts and self.thread_insts is not None else None

    @property
    def excess(self) -> float:
        """Wavefronts and sectors beyond the ideal on this line (0: the accesses are as good as they get)."""
        return (self.shared_excess or 0.0) + (self.global_excess or 0.0)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (saved runs); :meth:`from_dict` reads it back."""
        d = asdict(self)
        d["stalls"] = [list(s) for s in self.stalls]
        return {k: v for k, v in d.items() if v not in (None, "", 0.0, [])} | {"file": self.file, "line": self.line}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SourceLine":
        names = {f for f in cls.__dataclass_fields__}
        kw = {k: v for k, v in d.items() if k in names}
        kw["stalls"] = tuple((str(a), float(b)) for a, b in d.get("stalls", ()))
        return cls(**kw)


@dataclass(frozen=True)
class SourceBlock:
    """One block of the page: a launch's function in one file, its CUDA lines in file order."""

    file: str
    function: str
    lines: tuple[SourceLine, ...] = ()
    columns: tuple[str, ...] = field(default=(), repr=False)


def split_row(line: str, width: int, text_col: int) -> list[str] | None:
    """Fields of one quoted row of ``width`` columns; None when it is not a whole row.

    ncu leaves quotes inside a field unescaped, so the row is split on ``","``; pieces beyond ``width``
    belong to the source text at ``text_col`` (a line like ``f("a","b")``) and are joined back."""
    s = line.rstrip("\r\n")
    if s.endswith(","):  # some ncu rows end with a separator and no field
        s = s[:-1]
    if len(s) < 2 or not (s.startswith('"') and s.endswith('"')):
        return None
    parts = s[1:-1].split('","')
    if len(parts) > width:
        extra = len(parts) - width
        parts = parts[:text_col] + ['","'.join(parts[text_col:text_col + extra + 1])] + parts[text_col + extra + 1:]
    return parts if len(parts) == width else None


#: The marker line an export writes before the source page (after the details page).
PAGE_MARKER = "==CUDALAB== page source"


def source_page_argv(ncu: str, report: str) -> list[str]:
    """ncu's argv that prints a saved report's source page: CUDA lines with their SASS, as CSV."""
    return [ncu, "--import", str(report), "--page", "source", "--print-source", "cuda,sass", "--csv"]


def split_pages(text: str) -> tuple[str, str | None]:
    """(details page, source page or None) of a cudalab export."""
    head, sep, tail = text.partition("\n" + PAGE_MARKER)
    if not sep:
        if text.startswith(PAGE_MARKER):
            return "", text[len(PAGE_MARKER):]
        return text, None
    return head + "\n", tail.partition("\n")[2]


def _num(d: dict[str, str], name: str) -> float | None:
    return parse_number(d[name]) if name in d else None


def _sum(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None


def _line(file: str, no: int, text: str, d: dict[str, str], sass: Sequence[dict[str, str]]) -> SourceLine:
    seen: set[str] = set()
    sh_req = gl_req = 0.0
    for s in sass:  # an instruction can be listed twice under one line: count it once
        addr = s.get("Address", "")
        if addr in seen:
            continue
        seen.add(addr)
        space, n = s.get(SPACE, ""), parse_number(s.get(INSTS, "")) or 0.0
        if "Shared" in space.split(","):
            sh_req += n
        if "Global" in space.split(","):
            gl_req += n
    stalls = []
    for k, v in d.items():
        if k.startswith(_STALL) and "(Not Issued)" not in k:
            val = parse_number(v)
            if val:
                stalls.append((k[len(_STALL):], val))
    stalls.sort(key=lambda kv: (-kv[1], kv[0]))
    return SourceLine(
        file=file, line=no, text=text.strip(), samples=_num(d, SAMPLES), samples_not_issued=_num(d, SAMPLES_NOT_ISSUED),
        insts=_num(d, INSTS), thread_insts=_num(d, THREAD_INSTS), access=d.get(SPACE, "").strip("-"),
        shared_requests=sh_req, shared_wavefronts=_num(d, SH_WF), shared_ideal=_num(d, SH_IDEAL),
        shared_excess=_num(d, SH_EXCESS), nway=_num(d, NWAY), global_requests=gl_req, global_sectors=_num(d, GL_SECT),
        global_ideal=_num(d, GL_IDEAL), global_excess=_num(d, GL_EXCESS), divergent=_num(d, DIVERGENT),
        stalls=tuple(stalls))


def parse_source(text: str) -> tuple[SourceBlock, ...]:
    """The page's blocks in order (one per launch and file). Text that is not part of a block is skipped.

    A CSV printed with ``--print-source cuda`` alone (source text, no figures) gives blocks whose lines
    carry only the text.
    """
    blocks: list[SourceBlock] = []
    file = func = ""
    header: list[str] | None = None
    cur: list[tuple[int, str, dict[str, str], list[dict[str, str]]]] = []

    def flush() -> None:
        nonlocal cur
        if header is not None and (cur or func):
            blocks.append(SourceBlock(file, func, tuple(_line(file, n, t, d, s) for n, t, d, s in cur), tuple(header)))
        cur = []

    for raw in text.splitlines():
        s = raw.strip()
        if s.startswith('"File Path","') or s.startswith('"File Name","'):
            flush()
            header = None
            parts = split_row(s, 2, 1)
            file, func = (parts[1] if parts else ""), ""
            continue
        if s.startswith('"Function Name","'):
            parts = split_row(s, 2, 1)
            func = parts[1] if parts else ""
            continue
        if s.startswith('"Line No","'):
            flush()
            header = s.rstrip(",")[1:-1].split('","')
            continue
        if header is None:
            continue
        parts = split_row(s, len(header), 3 if s.startswith('"",') else 1)  # SASS rows: text in column 4
        if parts is None:
            continue
        if parts[0].strip():
            no = parts[0].strip()
            if not no.isdigit():
                continue
            cur.append((int(no), parts[1], _fields(header, parts), []))
        elif cur and len(parts) > 2 and parts[2] not in ("...", "-", ""):
            cur[-1][3].append(_fields(header, parts))
    flush()
    return tuple(blocks)


def _fields(header: Sequence[str], parts: Sequence[str]) -> dict[str, str]:
    """name -> value; the second "Source" column (SASS text) keeps only the first name's slot for CUDA text."""
    d: dict[str, str] = {}
    for name, val in zip(header, parts):
        if name == "Source" and name in d:
            d["SASS"] = val
            continue
        d[name] = val
    return d


def assign_blocks(blocks: Sequence[SourceBlock], kernels: Sequence[tuple[int, str]]) -> dict[int, tuple[SourceBlock, ...]]:
    """Blocks per launch ID. ``kernels``: (launch ID, kernel name) in ID order, as the report holds them.

    The page follows the report's result order; a launch whose function spans files (an inlined header)
    has one block per file, consecutive, each a different file. So: each launch takes the next block of
    its kernel's name, then the following blocks of that name while their files are new to it."""
    out: dict[int, tuple[SourceBlock, ...]] = {}
    i = 0
    for lid, kernel in kernels:
        while i < len(blocks) and blocks[i].function and blocks[i].function != kernel:
            i += 1  # a block of a launch the report holds and the run does not name: skip it
        if i >= len(blocks):
            break
        taken = [blocks[i]]
        i += 1
        while i < len(blocks) and blocks[i].function == kernel and blocks[i].file not in {b.file for b in taken}:
            taken.append(blocks[i])
            i += 1
        out[lid] = tuple(taken)
    return out


def merge_lines(groups: Sequence[Sequence[SourceLine]]) -> tuple[SourceLine, ...]:
    """One variant's lines over its launches: figures of the same (file, line) summed (nway: the largest)."""
    by: dict[tuple[str, int], list[SourceLine]] = {}
    for g in groups:
        for ln in g:
            by.setdefault((ln.file, ln.line), []).append(ln)
    out = []
    for (file, no), ls in by.items():
        if len(ls) == 1:
            out.append(ls[0])
            continue
        stalls: dict[str, float] = {}
        for ln in ls:
            for k, v in ln.stalls:
                stalls[k] = stalls.get(k, 0.0) + v
        summed = {f: _sum(getattr(ln, f) for ln in ls) for f in (
            "samples", "samples_not_issued", "insts", "thread_insts", "shared_wavefronts", "shared_ideal",
            "shared_excess", "global_sectors", "global_ideal", "global_excess", "divergent")}
        out.append(SourceLine(file, no, ls[0].text, access=ls[0].access,
                              shared_requests=sum(ln.shared_requests for ln in ls),
                              global_requests=sum(ln.global_requests for ln in ls),
                              nway=max((ln.nway for ln in ls if ln.nway is not None), default=None),
                              stalls=tuple(sorted(stalls.items(), key=lambda kv: (-kv[1], kv[0]))), **summed))
    out.sort(key=lambda ln: (ln.file, ln.line))
    return tuple(out)
