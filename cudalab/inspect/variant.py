"""One variant's build as ``cudalab compile`` and a run make it: its cubin's kernel in SASS, ptxas's
resources and its theoretical occupancy (what ``cudalab sass`` shows). No GPU: nvcc and nvdisasm only."""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from cudalab import build
from cudalab import launch as L
from cudalab.errors import CompileError, UsageError
from cudalab.inspect import sass
from cudalab.inspect.occupancy import Occupancy, occupancy
from cudalab.build.ptxas import KernelInfo


@dataclass(frozen=True)
class VariantCode:
    """What the compiler made of one variant.

    Attributes:
        name: the variant.
        kernel: its kernel's symbol.
        arch: the architecture it was built for.
        defines: the defines of its build.
        block: its block.
        dynamic_shared: the dynamic shared memory of its launch, bytes.
        info: ptxas's report of the kernel (registers, spills, static shared memory).
        code: its SASS instructions.
        occupancy: theoretical occupancy on ``arch`` (None where cudalab has no limits for it).
        cached: the build came from the cache.
    """

    name: str
    kernel: str
    arch: str
    defines: tuple[tuple[str, str], ...]
    block: L.Dim3
    dynamic_shared: int
    info: KernelInfo
    code: tuple[sass.Instruction, ...]
    occupancy: Occupancy | None
    cached: bool

    def resources(self) -> dict[str, Any]:
        """Registers, spills, shared memory, occupancy and instruction count, by row name."""
        occ = self.occupancy
        return {"registers": self.info.registers, "spill stores B": self.info.spill_stores,
                "spill loads B": self.info.spill_loads, "stack B": self.info.stack_frame,
                "static smem B": self.info.static_shared, "dynamic smem B": self.dynamic_shared,
                "threads": L.threads(self.block), "occupancy %": round(occ.pct) if occ else None,
                "blocks / SM": occ.blocks if occ else None, "limiter": occ.limiter if occ else None,
                "instructions": len(self.code)}


@functools.lru_cache(maxsize=1)
def toolkit_archs() -> tuple[str, ...]:
    """The ``sm_XX`` this nvcc can build (``nvcc --list-gpu-code``); empty when it cannot say."""
    proc = subprocess.run([build.find_nvcc(), "--list-gpu-code"], capture_output=True, text=True)
    return tuple(proc.stdout.split()) if proc.returncode == 0 else ()


def check_arch(arch: str) -> None:
    """Refuse an ``--arch`` that is no architecture, or one this toolkit cannot build, in one line.

    Raises:
        UsageError: naming the architectures it can build.
    """
    build._check_arch(arch)
    known = toolkit_archs()
    if known and arch.rstrip("af") not in known:
        raise UsageError(f"--arch {arch}: this nvcc cannot build it; it builds {', '.join(known)}")


def load(specs: Sequence[Any], launches: Sequence[Any], directory: Path, arch: str) -> list[VariantCode]:
    """Build (or take from the cache) each variant's source and disassemble its kernel.

    The nvdisasm runs of all the variants start together (two variants take one's time).

    Args:
        specs: the variants (:class:`cudalab.catalog.specs.VariantSpec`), each with its planned launch in ``launches``
            (a :class:`cudalab.families.model.Launch`) and the arch it is built for in its ``arch`` key.
        directory: the family's folder (where the sources are).
        arch: the architecture each variant is built for (as :func:`cudalab.plan.variant_arch` says), one
            per variant when a sequence.

    Raises:
        CompileError: a variant does not build (with nvcc's log) or its cubin lacks its kernel.
        ToolMissingError: nvcc or nvdisasm is not installed.
    """
    archs = [arch] * len(specs) if isinstance(arch, str) else list(arch)
    try:
        builds = [build.build(directory / v.source, dict(lau.defines), a) for v, lau, a in zip(specs, launches, archs)]
    except CompileError:
        for a in archs:  # an arch this nvcc cannot build is the user's word, not the source's fault: say so
            check_arch(a)
        raise
    for v, b in zip(specs, builds):
        if b.kernel(v.kernel) is None:
            raise CompileError(f"{v.source} has no kernel {v.kernel!r} (is it extern \"C\"?)")
    started: dict[str, sass.Disassembly] = {}
    for b in builds:  # variants of one source and defines share a cubin: one nvdisasm
        started.setdefault(b.key, sass.start(b.cubin))
    parsed = {key: sass.parse(d.text()) for key, d in started.items()}
    out = []
    for v, lau, b, a in zip(specs, launches, builds, archs):
        info = b.kernel(v.kernel)
        assert info is not None
        code = parsed[b.key].get(v.kernel, ())
        occ = occupancy(a, L.threads(lau.block), info.registers, info.static_shared + lau.shared)
        out.append(VariantCode(name=v.name, kernel=v.kernel, arch=a, defines=tuple(lau.defines), block=lau.block,
                               dynamic_shared=lau.shared, info=info, code=code, occupancy=occ, cached=b.cached))
    return out
