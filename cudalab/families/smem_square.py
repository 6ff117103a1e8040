"""smem-square family: shared-memory bank conflicts on a 32x32 tile (the textbook demo).

Each kernel stores every thread's global index into a shared tile and reads one element back into
``out``; the variants differ only in the order they walk the tile (rows, columns, padding,
dynamic shared memory). What matters is the counters (``cudalab ncu smem-square``): wavefronts
per shared-memory request, 1 when conflict-free, n for an n-way bank conflict.

This module holds a model of each kernel's index math (:data:`PATTERNS`, keyed by kernel symbol);
the machinery that turns a model into the expected ``out`` and the bank-conflict figures, and checks a
kernel by un-permuting its ``out``, is :mod:`cudalab.families.smem_tile`, shared with smem-rect.
``tests/test_smem.py`` checks that the model reproduces the ``smem_expect`` values declared in
family.toml.

Sizes: one block by default. ``--blocks K`` (or ``--n K``, the same thing) launches K blocks; block
b writes ``out[b]``, its own slice. ``--shape`` is refused. Size dims are (blocks, BDIMY, BDIMX).
"""

from __future__ import annotations

import numpy as np

from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.families import Case, Check, Size, SetupContext, Work, smem_tile
from cudalab.families.base import Family
from cudalab.families.smem_tile import Pattern

BDIMX, BDIMY = 32, 32
#: Padding of the padded square variants (family.toml's IPAD define for them).
SQUARE_IPAD = 1


def _rows(tx, ty, bx, by, p):
    return ty * bx + tx, ty * bx + tx


def _cols(tx, ty, bx, by, p):
    # tile[BDIMX][BDIMY] indexed [threadIdx.x][threadIdx.y]
    return tx * by + ty, tx * by + ty


def _row_col(tx, ty, bx, by, p):
    # square: tile[BDIMY][BDIMX] read as tile[threadIdx.x][threadIdx.y]
    return ty * bx + tx, tx * bx + ty


def _row_col_dyn(tx, ty, bx, by, p):
    return ty * bx + tx, tx * by + ty


def _row_col_pad(tx, ty, bx, by, p):
    return ty * (bx + p) + tx, tx * (bx + p) + ty


#: The square kernels' index math, by kernel symbol (mirrors smem_square.cu).
PATTERNS: dict[str, Pattern] = {
    "setRowReadRow": _rows,
    "setColReadCol": _cols,
    "setRowReadCol": _row_col,
    "setRowReadColDyn": _row_col_dyn,
    "setRowReadColPad": _row_col_pad,
    "setRowReadColDynPad": _row_col_pad,
}


def expected_out(problem: Size, variant: VariantSpec) -> np.ndarray:
    """What the variant's kernel writes to ``out``, shape (blocks, 32, 32)."""
    return smem_tile.expected_out(problem, variant, PATTERNS, SQUARE_IPAD)


class SmemSquare(Family):
    """Shared-memory bank conflicts on a 32x32 tile."""

    OPTIONS = (smem_tile.BLOCKS,)
    SIZE_HELP = smem_tile.SIZE_HELP
    EXTRA_COLUMNS = smem_tile.EXTRA_COLUMNS
    SIGNATURE = """\
void KERNEL(int *out)          // blocks x 32 x 32 ints: block b writes out[b * 1024 + i], i = 0..1023, each
                               // one of its own global thread indices b * 1024 + threadIdx.y * 32 + threadIdx.x
// block 32x32 (BDIMX, BDIMY); grid: --blocks blocks along x. Checked as a permutation: every index of the
// block once (the order is the pattern's business; the built-in rows check their exact order)"""

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """Parse the number of blocks; see the module docstring."""
        return smem_tile.problem(n, shape, dtype, options, BDIMX, BDIMY)

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """One tile of BDIMX x BDIMY per block, blocks side by side along x (grid = blocks x 1)."""
        return smem_tile.extent(problem)

    def work(self, problem: Size) -> Work:
        """The bytes of out written (the tile traffic itself stays on chip)."""
        return smem_tile.work(problem)

    def device_bytes(self, problem: Size) -> int:
        """Only out lives on the device."""
        return smem_tile.device_bytes(problem)

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """None: the kernels write thread indices, they read nothing."""
        return {}

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """Every block's global thread indices in order: what a correct kernel's out un-permutes to."""
        return smem_tile.reference(problem)

    def check(self, problem: Size, result: np.ndarray, ref: np.ndarray) -> Check:
        """Integers: exact."""
        return smem_tile.check(result, ref)

    def smem_expect(self, problem: Size, variant: VariantSpec) -> dict[str, float] | None:
        """Expected wavefronts per request: family.toml's ``smem_expect`` (the square tile is fixed)."""
        exp = variant.param("smem_expect")
        return {k: float(v) for k, v in exp.items()} if exp else None

    def setup(self, ctx: SetupContext) -> Case:
        """Allocate out, launch the variant's kernel and un-permute its out for the check."""
        return smem_tile.case(ctx, PATTERNS, SQUARE_IPAD, self.smem_expect(ctx.problem, ctx.variant))


FAMILY = SmemSquare()
