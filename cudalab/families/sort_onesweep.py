"""sort's onesweep variant: the launch schedule, the scratch layout and the case.

A stable LSD radix sort over 8-bit digits after Adinets & Merrill's Onesweep: one launch zeroes the
scratch, one reads every key once and counts all four digit histograms, then one launch per digit
ranks each tile's keys and finds the tile's place in the output by decoupled look-back over the tiles
before it (sort_onesweep.cu explains the kernels). 6 launches a sort, against radix's 24. The keys move
unchanged; pass 0 reads the pristine input and the passes alternate between two buffers, so the last
one writes buffer 1.

Measured on an H100 80GB HBM3 (2026-11-24, ``cudalab sort --variant radix,onesweep,cupy --seed 1``,
int32 random keys, median of 10 cold samples): 2^24 keys 0.477 ms = 35.2 G keys/s, 0.94x CuPy's time
(0.509 ms), radix 1.119 ms; 2^28 keys 6.866 ms = 39.1 G keys/s, 1.01x CuPy's (6.792 ms), radix 15.82
ms; 2^24 dups 0.468 ms against CuPy's 0.430. How the default came about (2^24 / 2^28 ms, same GPU):
ranks held in registers until a second pass placed the keys, match_any, 16 items: 0.74 / 11.0;
ballots instead of match_any: 0.54 / 7.74; counts first so each key goes to its place as it is
ranked (no rank array: 64 registers, 4 blocks an SM): 0.50 / 7.41; 24 items a thread at 3 blocks an
SM: 0.477 / 6.87. 28 items (a few spilled registers) or 384 threads x 24 moved it by about 1%.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cudalab import launch as L
from cudalab.errors import SkipRow
from cudalab.families import Case, SetupContext

RADIX_BITS = 8
RADIX = 1 << RADIX_BITS
#: Digit passes over a 32-bit key.
PASSES = 32 // RADIX_BITS
#: Words before the look-back status: the upfront counts (PASSES x RADIX), then the tile counters
#: (PASSES, padded so that the status words stay 16-byte aligned).
COUNTS_WORDS = PASSES * RADIX
COUNTER_WORDS = 32
KERNELS = ("sort_onesweep_init", "sort_onesweep_hist", "sort_onesweep_pass")
#: Threads of the init and histogram launches.
INIT_BLOCK = 256
HIST_BLOCK = 256
#: Keys each histogram thread counts at least (4-key loads) before its block adds its counts to the
#: global ones, and blocks an SM at most: few blocks, few global atomics.
HIST_KEYS_PER_THREAD = 32
HIST_BLOCKS_PER_SM = 4
#: Flags of a status word (bits 30 and 31; the count sits below).
FLAG_AGGREGATE = 1 << 30
FLAG_PREFIX = 1 << 31
COUNT_MASK = FLAG_AGGREGATE - 1


def tiles(n: int, tile: int) -> int:
    """Blocks of a pass launch: ceil(n / tile)."""
    return (n + tile - 1) // tile


def scratch_words(n: int, tile: int) -> int:
    """Words of the scratch: counts, tile counters and PASSES x tiles x RADIX status words (a multiple of 4)."""
    return COUNTS_WORDS + COUNTER_WORDS + PASSES * tiles(n, tile) * RADIX


def status_offset(n: int, tile: int, p: int) -> int:
    """Word where pass p's status words begin (as sort_onesweep_pass computes it)."""
    return COUNTS_WORDS + COUNTER_WORDS + p * tiles(n, tile) * RADIX


def schedule() -> list[tuple[int, int | None, int]]:
    """Each pass as (pass, source, destination): source None is the input, else buffer 0 or 1."""
    return [(p, None if p == 0 else (p - 1) % 2, p % 2) for p in range(PASSES)]


def result_buffer() -> int:
    """The buffer the last pass writes."""
    return schedule()[-1][2]


def init_grid(words: int, sm_count: int) -> int:
    """Blocks of the zeroing launch (16-byte stores, grid-stride): enough for one store a thread, at most 8 an SM."""
    return max(1, min(-(-words // (4 * INIT_BLOCK)), 8 * sm_count))


def hist_grid(n: int, sm_count: int) -> int:
    """Blocks of the histogram launch (grid-stride): HIST_KEYS_PER_THREAD keys a thread, at most 4 an SM."""
    return max(1, min(-(-n // (HIST_BLOCK * HIST_KEYS_PER_THREAD)), HIST_BLOCKS_PER_SM * sm_count))


def onesweep_case(ctx: SetupContext, d_x, poison: int, answer: Callable[[np.ndarray], Any]) -> Case:
    """The onesweep row: init, histogram and 4 passes over two key buffers and one scratch array.

    Args:
        answer: wraps the downloaded keys as the family's result (sort's ``Sorted``).

    Raises:
        SkipRow: a grid other than ceil(n / tile), or ITEMS / BLOCK that do not match the launch.
    """
    variant, launch, problem = ctx.variant, ctx.launch, ctx.problem
    n = problem.dims[0]
    block, tile = launch.block[0], launch.tile[0]
    defines = dict(launch.defines)
    items = defines.get("ITEMS")
    if items is None or int(items) * block != tile:
        raise SkipRow(f"{variant.name}: ITEMS ({items}) x block ({block}) must be the tile ({tile})")
    if int(defines.get("BLOCK", block)) < block:
        raise SkipRow(f"{variant.name}: compiled for blocks of at most BLOCK = {defines['BLOCK']} threads (got {block})")
    blocks = tiles(n, tile)
    if launch.grid != (blocks, 1, 1):
        raise SkipRow(f"{variant.name} sets its own grid ({blocks} tiles of {tile}); --grid {L.fmt_dims(launch.grid)} "
                      "does not match")
    init, hist, sweep = (ctx.kernel(name) for name in KERNELS)
    dev = ctx.device
    sm_count = dev.limits.sm_count
    bufs = [dev.empty((n,), problem.np_dtype) for _ in range(2)]
    words = scratch_words(n, tile)
    scratch = dev.empty((words,), np.uint32)
    steps = [(d_x if src is None else bufs[src], np.int32(p), bufs[dst]) for p, src, dst in schedule()]
    size = np.int32(n)
    init_launch = ((init_grid(words, sm_count), 1, 1), (INIT_BLOCK, 1, 1), (scratch, np.uint32(words)))
    hist_launch = ((hist_grid(n, sm_count), 1, 1), (HIST_BLOCK, 1, 1), (d_x, size, scratch))

    def run() -> None:
        init.launch(*init_launch)
        hist.launch(*hist_launch)
        for src, p, dst in steps:
            sweep.launch(launch.grid, launch.block, (src, size, p, scratch, dst), launch.shared)

    def do_poison(byte: int | None = None) -> None:  # an absent key in both buffers: unwritten shows
        for b in bufs:
            b.poison(poison)

    def close() -> None:
        for b in (*bufs, scratch):
            b.free()

    out = bufs[result_buffer()]
    return Case(run=run, result=lambda: answer(out.download()), poison=do_poison, one_poison=True, close=close,
                items=n, notes={"passes": len(KERNELS) - 1 + PASSES, "digit_passes": PASSES,
                                "registers": sweep.num_regs})
