"""A cubin's machine code (SASS): disassembled by ``nvdisasm``, parsed per kernel with the CUDA source
line of each instruction, counted by instruction class, and compared between two kernels.

Every cudalab build carries line tables (``-lineinfo``, :data:`cudalab.build.FLAGS`), so
``nvdisasm -c -g`` names the file and line of every instruction. The disassembly is cached beside the
build cache, keyed by the cubin's hash and the nvdisasm binary, so a second look costs a file read.

Two kernels are compared by what register allocation cannot change: the class histogram, the
resources, and the listings with register numbers, predicate numbers and labels normalised
(``R12`` -> ``R``), so a renaming alone is no difference.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from cudalab import build
from cudalab.errors import ToolFailedError, ToolMissingError
from cudalab.build.toolkit import find_cuda_tool

#: Instruction classes in table order; every opcode falls in exactly one (``other`` last).
CLASSES = ("FFMA", "HMMA", "GMMA", "LDG", "STG", "LDS", "STS", "LDGSTS", "TMA", "LDL/STL", "BAR",
           "branch", "convert", "other")

#: Opcode (the part before the first dot) -> class. Opcodes not named here are ``other``.
_CLASS_OF: dict[str, str] = {
    # HFMA2 stays "other": ptxas uses HFMA2.MMA Rd, -RZ, RZ, imm as a move of a constant.
    **dict.fromkeys(("FFMA", "FFMA2", "DFMA"), "FFMA"),
    **dict.fromkeys(("HMMA", "IMMA", "DMMA", "BMMA"), "HMMA"),
    **dict.fromkeys(("HGMMA", "IGMMA", "QGMMA", "BGMMA", "UTCHMMA", "UTCIMMA", "UTCQMMA"), "GMMA"),
    "LDG": "LDG", "STG": "STG", "LDS": "LDS", "STS": "STS", "LDSM": "LDS", "STSM": "STS",
    "LDGSTS": "LDGSTS", "LDGDEPBAR": "LDGSTS",
    **dict.fromkeys(("UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL", "UTMAREDG", "UBLKCP", "UBLKRED", "UBLKPF"), "TMA"),
    "LDL": "LDL/STL", "STL": "LDL/STL",
    "BAR": "BAR",
    **dict.fromkeys(("BRA", "BRX", "JMP", "JMX", "CALL", "RET", "BSSY", "BSYNC", "BREAK", "BMOV", "EXIT",
                     "WARPSYNC", "KILL"), "branch"),
    **dict.fromkeys(("F2F", "F2I", "I2F", "I2I", "F2FP", "I2FP", "F2IP", "FRND"), "convert"),
}

_FUNC = re.compile(r"^\s*\.section\s+\.text\.([A-Za-z_$][\w$]*),")
_LINE = re.compile(r'//## File "([^"]*)", line (\d+)')
_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Z0-9_]+)*)\s*([^;]*);")
#: What a register allocation may renumber: general, uniform and predicate registers, and labels.
_RENAME = re.compile(r"\b(U?R)(\d+)\b|\b(U?P)(\d)\b|\.L_x_\d+")


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction.

    Attributes:
        offset: byte offset in the kernel.
        guard: its predicate (``@!P0``), or ''.
        opcode: the mnemonic without modifiers (``LDG``).
        text: the instruction as nvdisasm prints it, guard and modifiers included (``LDG.E R4, [R2.64]``).
        file: the CUDA source file it came from ('' when the cubin has no line table).
        line: the line in that file (0 when unknown).
    """

    offset: int
    guard: str
    opcode: str
    text: str
    file: str = ""
    line: int = 0

    @property
    def klass(self) -> str:
        """Its instruction class (:data:`CLASSES`)."""
        return classify(self.opcode)

    def normalised(self) -> str:
        """The text with register and predicate numbers and labels replaced: what renaming cannot change."""
        return _RENAME.sub(lambda m: m.group(1) or m.group(3) or ".L", self.text)


def classify(opcode: str) -> str:
    """The class of an opcode (``FFMA`` -> ``FFMA``, ``LDG`` -> ``LDG``, ``IMAD`` -> ``other``)."""
    return _CLASS_OF.get(opcode.split(".", 1)[0], "other")


def parse(text: str) -> dict[str, tuple[Instruction, ...]]:
    """Every kernel of ``nvdisasm -c -g`` output: name -> its instructions, in address order.

    NOPs (the padding after the last EXIT) are left out: they are alignment, not code.
    """
    out: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    file, line = "", 0
    for raw in text.splitlines():
        m = _FUNC.match(raw)
        if m:
            current = out.setdefault(m.group(1), [])
            file, line = "", 0
            continue
        m = _LINE.search(raw)
        if m:
            file, line = m.group(1), int(m.group(2))
            continue
        m = _INSN.search(raw)
        if m is None or current is None or m.group(3) == "NOP":
            continue
        guard = (m.group(2) or "").strip()
        body = f"{m.group(3)}{m.group(4)} {m.group(5).strip()}".strip()
        current.append(Instruction(offset=int(m.group(1), 16), guard=guard, opcode=m.group(3),
                                   text=f"{guard} {body}".strip(), file=file, line=line))
    return {name: tuple(insns) for name, insns in out.items()}


def histogram(insns: tuple[Instruction, ...] | list[Instruction]) -> dict[str, int]:
    """Instructions per class, every class present (0 where none), in :data:`CLASSES` order."""
    counts = Counter(i.klass for i in insns)
    return {c: counts.get(c, 0) for c in CLASSES}


def listing_diff(a: tuple[Instruction, ...], b: tuple[Instruction, ...], names: tuple[str, str] = ("a", "b")) -> list[str]:
    """A unified diff of two listings after register renaming (empty when they differ only in names)."""
    left = [i.normalised() for i in a]
    right = [i.normalised() for i in b]
    return list(difflib.unified_diff(left, right, names[0], names[1], n=1, lineterm=""))


def at_line(insns: tuple[Instruction, ...], line: int, file: str | None = None) -> tuple[Instruction, ...]:
    """The instructions of source line ``line`` (of ``file`` when given: its name or its path's end)."""
    def same(path: str) -> bool:
        return file is None or path == file or Path(path).name == file or path.endswith("/" + file)
    return tuple(i for i in insns if i.line == line and same(i.file))


# --- nvdisasm -----------------------------------------------------------------------------------------------

def find_nvdisasm() -> str:
    """Path of nvdisasm: as cudalab finds any CUDA tool, else beside the real nvcc, else from the
    ``nvidia-cuda-nvdisasm`` wheel (``pip install 'cudalab[sass]'``).

    Raises:
        ToolMissingError: none found, saying how to get one.
    """
    hint = "install the CUDA toolkit's nvdisasm, or pip install nvidia-cuda-nvdisasm"
    try:
        return find_cuda_tool("nvdisasm", "nvdisasm", hint)
    except ToolMissingError as exc:
        missing = exc
    places = []
    try:
        places.append(Path(build.find_nvcc()).resolve().parent / "nvdisasm")
    except ToolMissingError:
        pass
    for folder in map(Path, sys.path):
        places += sorted(folder.glob("nvidia/cu*/bin/nvdisasm")) + sorted(folder.glob("nvidia/cuda_nvdisasm/bin/nvdisasm"))
    for p in places:
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    raise missing


def _cache_file(cubin: bytes, tool: str) -> Path:
    st = os.stat(tool)
    key = hashlib.sha256(cubin + f"\0{tool}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()
    return build.cache_dir().parent / "sass" / f"{key}.sass"


def start(cubin: bytes) -> "Disassembly":
    """Start disassembling ``cubin`` (or take the cached text): call :meth:`Disassembly.text` for the
    result. Two started at once run side by side, so two variants cost one nvdisasm's time."""
    tool = find_nvdisasm()
    cache = _cache_file(cubin, tool)
    try:
        return Disassembly(cache, cache.read_text(), None, None)
    except OSError:
        pass
    tmp = tempfile.NamedTemporaryFile(prefix="cudalab-", suffix=".cubin", delete=False)
    with tmp:
        tmp.write(cubin)
    proc = subprocess.Popen([tool, "-c", "-g", tmp.name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return Disassembly(cache, None, proc, Path(tmp.name))


@dataclass
class Disassembly:
    """A running (or cached) nvdisasm of one cubin."""

    cache: Path
    done: str | None
    proc: subprocess.Popen | None
    tmp: Path | None

    def text(self) -> str:
        """nvdisasm's output (waiting for it), stored in the cache.

        Raises:
            ToolFailedError: nvdisasm failed, with its message.
        """
        if self.done is not None:
            return self.done
        assert self.proc is not None and self.tmp is not None
        try:
            out, err = self.proc.communicate()
        finally:
            self.tmp.unlink(missing_ok=True)
        if self.proc.returncode != 0:
            raise ToolFailedError(f"nvdisasm failed (exit {self.proc.returncode})", err)
        self.done = out
        try:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            build._write_atomic(self.cache, out.encode())
        except OSError:
            pass  # no cache: the next look runs nvdisasm again
        return out


def disassemble(cubin: bytes) -> dict[str, tuple[Instruction, ...]]:
    """Every kernel of ``cubin``, parsed (:func:`parse` of :func:`start`'s text)."""
    return parse(start(cubin).text())
