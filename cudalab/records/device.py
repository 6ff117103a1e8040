"""The GPU a run used, as every report and record names it (data only: a GPU worker fills it in)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DeviceInfo"]


@dataclass(frozen=True)
class DeviceInfo:
    """What every report names about the GPU it ran on."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    total_memory: int
    l2_bytes: int
    sm_clock_mhz: int
    mem_clock_mhz: int
    bus_width_bits: int
    driver_version: str
    cuda_version: str
    driver_release: str = ""

    @property
    def arch(self) -> str:
        """nvcc architecture name, e.g. ``sm_90``."""
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    @property
    def peak_bandwidth_gbs(self) -> float:
        """Theoretical DRAM bandwidth from clock and bus width (DDR: two transfers a clock)."""
        return 2 * self.mem_clock_mhz * 1e6 * self.bus_width_bits / 8 / 1e9

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {
            "index": self.index, "name": self.name, "compute_capability": ".".join(map(str, self.compute_capability)),
            "sm_count": self.sm_count, "total_memory": self.total_memory, "l2_bytes": self.l2_bytes,
            "sm_clock_mhz": self.sm_clock_mhz, "mem_clock_mhz": self.mem_clock_mhz,
            "bus_width_bits": self.bus_width_bits, "driver_version": self.driver_version,
            "cuda_version": self.cuda_version, "driver_release": self.driver_release,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DeviceInfo":
        """Read :meth:`to_dict`'s output (a worker's facts, in the parent)."""
        cc = tuple(int(x) for x in str(d.get("compute_capability", "0.0")).split("."))
        return cls(index=int(d["index"]), name=str(d["name"]), compute_capability=(cc[0], cc[-1]),
                   sm_count=int(d["sm_count"]), total_memory=int(d["total_memory"]), l2_bytes=int(d["l2_bytes"]),
                   sm_clock_mhz=int(d["sm_clock_mhz"]), mem_clock_mhz=int(d["mem_clock_mhz"]),
                   bus_width_bits=int(d["bus_width_bits"]), driver_version=str(d["driver_version"]),
                   cuda_version=str(d["cuda_version"]), driver_release=str(d.get("driver_release", "")))
