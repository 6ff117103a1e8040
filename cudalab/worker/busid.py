"""``python -m cudalab.worker.busid N``: print CUDA device ``N``'s PCI bus id and exit.

The parent asks NVML about a GPU before any worker computes on it (``--exclusive``, ``--lock-clocks``),
and NVML numbers GPUs its own way: the bus id names the same GPU to both. Reading it needs the CUDA
driver, which only a GPU process loads, so the parent asks this short-lived one
(:func:`cudalab.execute.local.process.pci_bus_id`). It initialises the driver and makes no context, so it is
never one of the processes computing on the GPU.
"""

from __future__ import annotations

import sys

from cudalab.worker.gpu import pci_bus_id


def main(argv: list[str] | None = None) -> int:
    """Print the bus id of the device named in ``argv`` (exit 2 when there is no such device)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not (args[0].isascii() and args[0].isdigit()):
        print("usage: python -m cudalab.worker.busid DEVICE", file=sys.stderr)
        return 2
    try:
        print(pci_bus_id(int(args[0])))
    except Exception as exc:  # the worker opening this GPU says what is wrong in its own words
        print(f"cudalab: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
