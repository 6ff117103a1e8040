"""Theoretical occupancy: how many blocks and warps of a kernel fit on one SM, and which limit binds.

The model is the CUDA occupancy calculator's (``cuda_occupancy.h``, the one behind
``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` and Nsight Compute's occupancy section):

* warps: ``max warps per SM // warps per block`` (a block takes whole warps);
* registers: each warp takes ``registers per thread x 32`` rounded up to the allocation unit (256),
  where a launch allocates at least 16 registers a thread whatever ptxas reports (Nsight Compute's
  ``launch__registers_per_thread`` reads 16 for copy_naive, which ptxas builds with 8, on an H100 and
  an H200, and its register limit is that of 16; ``cuda_occupancy.h`` has no such floor);
  the register file is split into 4 SM sub-partitions and a warp's registers live in one of them, so
  ``(registers per sub-partition // registers per warp) x 4`` warps fit, then whole blocks of those;
* shared memory: each block takes its static plus dynamic bytes plus the 1 KiB the system reserves per
  block (sm_80 and later), rounded up to the allocation unit (128 B), out of the SM's shared memory;
* blocks: the hardware cap of resident blocks per SM.

The smallest of the four is the number of resident blocks; occupancy is their warps over the SM's
maximum. The shared memory an SM offers here is its largest carveout: the driver picks a carveout
that does not lower occupancy, so Nsight Compute may report a smaller "shared memory configuration"
and a smaller shared-memory block limit that still does not bind.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from cudalab import launch as L
from cudalab.errors import CudalabError, LaunchConfigError
from cudalab.records.results import Result


@dataclass(frozen=True)
class SmLimits:
    """One compute capability's per-SM limits (CUDA programming guide, compute capability tables).

    Attributes:
        arch: ``sm_90``.
        max_warps: resident warps per SM.
        max_blocks: resident blocks per SM.
        registers: 32-bit registers per SM.
        max_registers_per_block: registers one block may hold.
        shared: shared memory per SM (its largest carveout), bytes.
        max_shared_per_block: shared memory one block may opt in to, bytes.
        reserved_shared: bytes the system reserves per block (1 KiB since sm_80).
        shared_unit: shared memory allocation unit, bytes.
        register_unit: register allocation unit per warp.
        min_registers: registers a thread is allocated at least (a kernel built with fewer gets these).
        sub_partitions: SM sub-partitions the register file is split among.
        max_threads_per_block: threads per block.
    """

    arch: str
    max_warps: int
    max_blocks: int
    shared: int
    max_shared_per_block: int
    registers: int = 65536
    max_registers_per_block: int = 65536
    reserved_shared: int = 1024
    shared_unit: int = 128
    register_unit: int = 256
    min_registers: int = 16
    sub_partitions: int = 4
    max_threads_per_block: int = 1024


_KIB = 1024
#: Limits by compute capability; an arch suffix (sm_90a, sm_100f) has its base's limits.
LIMITS: dict[str, SmLimits] = {s.arch: s for s in (
    SmLimits("sm_75", max_warps=32, max_blocks=16, shared=64 * _KIB, max_shared_per_block=64 * _KIB,
             reserved_shared=0, shared_unit=256),
    SmLimits("sm_80", max_warps=64, max_blocks=32, shared=164 * _KIB, max_shared_per_block=163 * _KIB),
    SmLimits("sm_86", max_warps=48, max_blocks=16, shared=100 * _KIB, max_shared_per_block=99 * _KIB),
    SmLimits("sm_87", max_warps=48, max_blocks=16, shared=164 * _KIB, max_shared_per_block=163 * _KIB),
    SmLimits("sm_89", max_warps=48, max_blocks=24, shared=100 * _KIB, max_shared_per_block=99 * _KIB),
    SmLimits("sm_90", max_warps=64, max_blocks=32, shared=228 * _KIB, max_shared_per_block=227 * _KIB),
    SmLimits("sm_100", max_warps=64, max_blocks=32, shared=228 * _KIB, max_shared_per_block=227 * _KIB),
)}

#: The names of the four limits, as tables and JSON show them.
WARPS, REGISTERS, SHARED, BLOCKS = "warps", "registers", "shared memory", "blocks"


@dataclass(frozen=True)
class Occupancy:
    """A kernel's theoretical occupancy on one SM.

    Attributes:
        blocks: resident blocks per SM (the smallest of the four limits).
        warps: resident warps per SM.
        max_warps: the SM's maximum warps.
        limits: blocks per SM each limit allows, by name (``warps``, ``registers``, ``shared memory``,
            ``blocks``); a limit that does not apply (no registers reported) is left out.
        limiter: the names of the limits that bind (several when they tie), ``, ``-joined.
    """

    arch: str
    blocks: int
    warps: int
    max_warps: int
    limits: dict[str, int]
    limiter: str

    @property
    def pct(self) -> float:
        """Occupancy in percent (resident warps over the SM's maximum)."""
        return 100.0 * self.warps / self.max_warps

    def cell(self) -> str:
        """``50% (registers)``: what a table shows."""
        return f"{self.pct:.3g}% ({self.limiter})"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON (pct included)."""
        return asdict(self) | {"pct": round(self.pct, 2)}


def limits_for(arch: str) -> SmLimits | None:
    """The limits of ``arch`` (``sm_90``, ``sm_90a``, ``9.0``), or None for a generation not in the table."""
    arch = arch.strip()
    if arch and arch[0].isdigit() and "." in arch:  # a compute capability: 9.0 -> sm_90
        major, minor = arch.split(".", 1)
        arch = f"sm_{major}{minor}"
    return LIMITS.get(arch.rstrip("af"))


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(arch: str, threads: int, registers: int, shared: int) -> Occupancy | None:
    """Theoretical occupancy of a kernel on ``arch`` (None when cudalab has no table for it).

    Args:
        arch: ``sm_90`` (or ``sm_90a``, ``9.0``).
        threads: threads per block.
        registers: registers per thread (ptxas's report, or the function attribute).
        shared: static plus dynamic shared memory per block, bytes.

    Raises:
        LaunchConfigError: the block cannot be resident at all (too many threads, registers or shared
            memory for one block), naming the limit.
    """
    lim = limits_for(arch)
    if lim is None:
        return None
    if not 0 < threads <= lim.max_threads_per_block:
        raise LaunchConfigError(f"{threads} threads per block: {lim.arch} allows 1 to {lim.max_threads_per_block}",
                                "maxThreadsPerBlock")
    warps_per_block = -(-threads // 32)
    limits = {WARPS: lim.max_warps // warps_per_block, BLOCKS: lim.max_blocks}
    if registers > 0:
        per_warp = _round_up(max(registers, lim.min_registers) * 32, lim.register_unit)
        if per_warp * warps_per_block > lim.max_registers_per_block:
            raise LaunchConfigError(f"{registers} registers x {threads} threads: more than the "
                                    f"{lim.max_registers_per_block} registers a block may hold on {lim.arch}",
                                    "maxRegistersPerBlock")
        warps_by_regs = (lim.registers // lim.sub_partitions // per_warp) * lim.sub_partitions
        limits[REGISTERS] = warps_by_regs // warps_per_block
    if shared > lim.max_shared_per_block:
        raise LaunchConfigError(f"{shared} bytes of shared memory per block: {lim.arch} allows "
                                f"{lim.max_shared_per_block}", "maxSharedMemoryPerBlockOptin")
    per_block = _round_up(shared + lim.reserved_shared, lim.shared_unit)
    limits[SHARED] = lim.shared // per_block
    blocks = min(limits.values())
    limiter = ", ".join(name for name in (WARPS, REGISTERS, SHARED, BLOCKS) if limits.get(name) == blocks)
    return Occupancy(arch=lim.arch, blocks=blocks, warps=blocks * warps_per_block, max_warps=lim.max_warps,
                     limits=limits, limiter=limiter)


def default_arch() -> str:
    """The local GPU's ``sm_XX`` (first GPU, as ``nvidia-smi`` reports its compute capability), else ``sm_90``.

    No CUDA context is made: the parent process of cudalab never holds one.
    """
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415

    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            proc = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                                  text=True, timeout=10)
            first = proc.stdout.split()[0] if proc.returncode == 0 and proc.stdout.split() else ""
            major, _, minor = first.partition(".")
            if major.isdigit() and minor.isdigit():
                return f"sm_{major}{minor}"
        except (OSError, subprocess.TimeoutExpired):
            pass
    return "sm_90"


def with_occupancy(row: Result, kernels: list[Any], name: str, arch: str) -> Result:
    """``row`` with the theoretical occupancy of its kernel's last launch in ``extra`` (``occupancy`` in %,
    ``occupancy_limiter``, ``occupancy_blocks``): the variant's own kernel (``name``) where the family
    compiled it, else the first it compiled; the row unchanged where none was launched."""
    k = next((k for k in kernels if getattr(k, "name", "") == name), kernels[0] if kernels else None)
    launched = getattr(k, "last_launch", None)
    if launched is None:
        return row
    block, shared = launched
    try:
        occ = occupancy(arch, L.threads(block), int(k.num_regs), int(k.static_shared) + int(shared))
    except (CudalabError, TypeError, ValueError):
        return row
    if occ is None:
        return row
    extra = {"occupancy": round(occ.pct, 2), "occupancy_limiter": occ.limiter, "occupancy_blocks": occ.blocks}
    if k.name != name:
        extra["occupancy_kernel"] = k.name
    return replace(row, extra={**row.extra, **extra})
