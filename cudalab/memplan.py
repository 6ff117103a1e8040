"""The memory plan: a run's peak host and device memory, checked before anything is allocated (pure).

A run that does not fit must be refused in one line before any GPU work, never killed by the
operating system after minutes of measuring (a 90000² transpose once ran both kernels and then
died for memory at 130 GB resident, losing everything). The family says what one run holds at its
peak (:meth:`~cudalab.families.base.Family.device_bytes`, :meth:`~cudalab.families.base.Family.host_bytes`);
this module adds cudalab's own buffers, reads what is available, and finds the largest size that fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cudalab.errors import OutOfMemoryError, UsageError
from cudalab.families import Family, Size

#: The L2 flush buffer (twice the L2: 100-120 MB on Hopper) and the CUDA context's own use.
DEVICE_OVERHEAD = 512 << 20
#: Python, NumPy, pycuda, CuPy and the process itself.
HOST_OVERHEAD = 1 << 30
#: Keep this share of the available memory free (drivers, page cache, other processes' growth).
HEADROOM = 0.05


def host_available(meminfo: str | None = None) -> int | None:
    """Bytes of host memory available to a new allocation (``MemAvailable``), or None where unknown."""
    try:
        text = meminfo if meminfo is not None else Path("/proc/meminfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


@dataclass(frozen=True)
class MemoryPlan:
    """What a run needs at its peak and what the machine has (None: not known)."""

    label: str
    device_need: int
    host_need: int
    device_free: int | None = None
    host_free: int | None = None

    @property
    def device_fits(self) -> bool:
        """Whether the device side fits (True when the free memory is unknown)."""
        return self.device_free is None or self.device_need <= self.device_free * (1 - HEADROOM)

    @property
    def host_fits(self) -> bool:
        """Whether the host side fits (True when the available memory is unknown)."""
        return self.host_free is None or self.host_need <= self.host_free * (1 - HEADROOM)


def plan(fam: Family, problem: Size, device_free: int | None, host_free: int | None) -> MemoryPlan:
    """The plan of one run of ``fam`` at ``problem``."""
    return MemoryPlan(label=f"{problem.label} {problem.dtype}",
                      device_need=fam.device_bytes(problem) + DEVICE_OVERHEAD,
                      host_need=fam.host_bytes(problem) + HOST_OVERHEAD,
                      device_free=device_free, host_free=host_free)


def largest_n(fam: Family, dtype: str, options: dict, device_free: int | None, host_free: int | None,
              limit: int = 1 << 40) -> int | None:
    """The largest ``--n`` whose plan fits (binary search; sizes the family refuses do not fit), or
    None when not even ``--n 1`` fits."""

    def fits(n: int) -> bool:
        try:
            p = plan(fam, fam.problem(str(n), None, dtype, dict(options)), device_free, host_free)
        except UsageError:
            return False
        return p.device_fits and p.host_fits

    # The first power of two that fits, not 1: a family may refuse small sizes (``validate``: at least a
    # block, a multiple of a tile), and its largest size is no less real for that.
    lo = 1
    while lo < limit and not fits(lo):
        lo *= 2
    if lo >= limit:
        return None
    hi = lo * 2
    while hi < limit and fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def check(p: MemoryPlan, largest: int | None, force: bool = False) -> None:
    """Refuse a run that does not fit, in one line naming what is needed, what is available and the
    largest ``--n`` that fits. ``force`` overrides the device side only (the host side is what the
    operating system kills a process for).

    Raises:
        OutOfMemoryError: the host side, or (without ``force``) the device side, does not fit.
    """
    hint = f"; the largest --n that fits is {largest}" if largest else ""
    if not p.host_fits:
        raise OutOfMemoryError(p.host_need, p.host_free or 0, f"{p.label}: host memory", hint=hint,
                               where="host memory available")
    if not p.device_fits and not force:
        raise OutOfMemoryError(p.device_need, p.device_free or 0, f"{p.label}: GPU memory",
                               hint=hint + " (--force tries anyway)", where="GPU memory free")
