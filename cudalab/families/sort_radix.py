"""sort's radix variant: the launch schedule and the case (kept out of sort.py to keep both short).

A stable LSD radix sort over 4-bit digits: 8 passes, each a histogram per tile, one prefix sum over
all the counts, and a scatter that ranks every key within its tile (sort.cu explains the kernels).
The keys move unchanged; pass 0 reads the pristine input and the passes alternate between two
buffers so that the last one writes the result buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cudalab import launch as L
from cudalab.errors import SkipRow
from cudalab.families import Case, SetupContext

RADIX_BITS = 4
RADIX = 1 << RADIX_BITS
#: Digit passes over a 32-bit key.
PASSES = 32 // RADIX_BITS
#: Launches a pass: histogram, scan, scatter.
KERNELS = ("sort_radix_hist", "sort_radix_scan", "sort_radix_scatter")
#: Threads of the one block that scans the counts.
SCAN_BLOCK = 1024


def tiles(n: int, tile: int) -> int:
    """Blocks of the histogram and scatter launches: ceil(n / tile)."""
    return (n + tile - 1) // tile


def schedule() -> list[tuple[int, int | None, int]]:
    """Each pass as (shift, source, destination): source None is the input, else buffer 0 or 1.

    Pass p writes buffer p % 2, so the last pass writes buffer (PASSES - 1) % 2: :func:`result_buffer`.
    """
    return [(RADIX_BITS * p, None if p == 0 else (p - 1) % 2, p % 2) for p in range(PASSES)]


def result_buffer() -> int:
    """The buffer the last pass writes."""
    return schedule()[-1][2]


def radix_case(ctx: SetupContext, d_x, poison: int, answer: Callable[[np.ndarray], Any]) -> Case:
    """The radix row: 8 passes x (hist, scan, scatter) over two key buffers and one count array.

    Args:
        answer: wraps the downloaded keys as the family's result (sort's ``Sorted``).

    Raises:
        SkipRow: a grid other than ceil(n / tile), or ITEMS that does not match the tile.
    """
    variant, launch, problem = ctx.variant, ctx.launch, ctx.problem
    n = problem.dims[0]
    block, tile = launch.block[0], launch.tile[0]
    items = dict(launch.defines).get("ITEMS")
    if items is None or int(items) * block != tile:
        raise SkipRow(f"{variant.name}: ITEMS ({items}) x block ({block}) must be the tile ({tile})")
    blocks = tiles(n, tile)
    if launch.grid != (blocks, 1, 1):
        raise SkipRow(f"{variant.name} sets its own grid ({blocks} tiles of {tile}); --grid {L.fmt_dims(launch.grid)} "
                      "does not match")
    hist, scan, scatter = (ctx.kernel(name) for name in KERNELS)
    dev = ctx.device
    bufs = [dev.empty((n,), problem.np_dtype) for _ in range(2)]
    counts = dev.empty((RADIX * blocks,), np.uint32)
    steps = [(d_x if src is None else bufs[src], bufs[dst], np.int32(shift)) for shift, src, dst in schedule()]
    size, total = np.int32(n), np.int32(RADIX * blocks)

    def run() -> None:
        for src, dst, shift in steps:
            hist.launch(launch.grid, launch.block, (src, size, shift, counts))
            scan.launch((1, 1, 1), (SCAN_BLOCK, 1, 1), (counts, total))
            scatter.launch(launch.grid, launch.block, (src, size, shift, counts, dst), launch.shared)

    def do_poison(byte: int | None = None) -> None:  # an absent key in both buffers: unwritten shows
        for b in bufs:
            b.poison(poison)

    def close() -> None:
        for b in (*bufs, counts):
            b.free()

    out = bufs[result_buffer()]
    return Case(run=run, result=lambda: answer(out.download()), poison=do_poison, one_poison=True, close=close,
                items=n, notes={"passes": len(KERNELS) * PASSES, "digit_passes": PASSES,
                                "registers": scatter.num_regs})
