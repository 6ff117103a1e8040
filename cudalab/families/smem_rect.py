"""smem-rect family: shared-memory bank conflicts on a rectangular tile (32x16 threads, tile[16][32]).

The same six kernels as smem-square with the rectangular index math (``irow = idx / blockDim.y``,
``icol = idx % blockDim.y``, ``tile[icol][irow]``). ``--ipad`` (default 2) pads the rows of the
padded variants and is usable in family.toml expressions as ``ipad``.

Expected wavefronts per request depend on ``--ipad`` for the padded variants, so :meth:`SmemRect.smem_expect`
computes them from this module's model of the kernels' index math (the same model that verifies
out): ipad 2 gives 1/1, ipad 1 leaves a 2-way load conflict, ipad 0 the unpadded 16-way. family.toml
declares the ipad-2 values; ``tests/test_smem.py`` checks that the model agrees with them.

Sizes, verification and ``--blocks``: as smem-square, through the same helpers (:mod:`cudalab.families.smem_tile`).
"""

from __future__ import annotations

import numpy as np

from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import UsageError
from cudalab.families import Case, Check, FamilyOption, Size, SetupContext, Work, smem_tile
from cudalab.families.base import Family
from cudalab.families.smem_tile import Pattern

BDIMX, BDIMY = 32, 16
DEFAULT_IPAD = 2


def _rows(tx, ty, bx, by, p):
    return ty * bx + tx, ty * bx + tx


def _cols(tx, ty, bx, by, p):
    # tile[BDIMX][BDIMY] indexed [threadIdx.x][threadIdx.y]
    return tx * by + ty, tx * by + ty


def _transposed(tx, ty, bx, by):
    idx = ty * bx + tx
    return idx // by, idx % by  # irow, icol


def _row_col(tx, ty, bx, by, p):
    irow, icol = _transposed(tx, ty, bx, by)
    return ty * bx + tx, icol * bx + irow


def _row_col_pad(tx, ty, bx, by, p):
    irow, icol = _transposed(tx, ty, bx, by)
    return ty * (bx + p) + tx, icol * (bx + p) + irow


#: The rectangle kernels' index math, by kernel symbol (mirrors smem_rect.cu).
PATTERNS: dict[str, Pattern] = {
    "setRowReadRow": _rows,
    "setColReadCol": _cols,
    "setRowReadCol": _row_col,
    "setRowReadColDyn": _row_col,
    "setRowReadColPad": _row_col_pad,
    "setRowReadColDynPad": _row_col_pad,
}


def ipad(problem: Size) -> int:
    """The --ipad value."""
    return int(problem.opt("ipad", DEFAULT_IPAD))


def expected_out(problem: Size, variant: VariantSpec) -> np.ndarray:
    """What the variant's kernel writes to out, shape (blocks, 16, 32)."""
    return smem_tile.expected_out(problem, variant, PATTERNS, ipad(problem))


class SmemRect(Family):
    """Shared-memory bank conflicts on a 32x16 tile, padding set by ``--ipad``."""

    OPTIONS = (
        smem_tile.BLOCKS,
        FamilyOption("ipad", int, DEFAULT_IPAD, "Words of padding per tile row in the padded variants "
                                                "(2 removes the conflict, 1 leaves 2-way)."),
    )
    SIZE_HELP = smem_tile.SIZE_HELP
    EXTRA_COLUMNS = smem_tile.EXTRA_COLUMNS
    SIGNATURE = """\
void KERNEL(int *out)          // blocks x 16 x 32 ints: block b writes out[b * 512 + i], i = 0..511, each
                               // one of its own global thread indices b * 512 + threadIdx.y * 32 + threadIdx.x
// block 32x16 (BDIMX, BDIMY); grid: --blocks blocks along x. Checked as a permutation: every index of the
// block once (the order is the pattern's business; the built-in rows check their exact order)"""

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """Parse the number of blocks and check --ipad."""
        pad = int(options.get("ipad", DEFAULT_IPAD))
        if not 0 <= pad <= 32:
            raise UsageError(f"--ipad must be between 0 and 32 words (got {pad})")
        return smem_tile.problem(n, shape, dtype, dict(options, ipad=pad), BDIMX, BDIMY)

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
        """Expected wavefronts per request for this --ipad, from the kernels' index math."""
        if variant.kind != "kernel" or variant.kernel not in PATTERNS:
            return None
        blocks, by, bx = problem.dims
        return smem_tile.model_wavefronts(PATTERNS, variant.kernel, bx, by, ipad(problem))

    def setup(self, ctx: SetupContext) -> Case:
        """Allocate out, launch the variant's kernel and un-permute its out for the check."""
        return smem_tile.case(ctx, PATTERNS, ipad(ctx.problem), self.smem_expect(ctx.problem, ctx.variant))


FAMILY = SmemRect()
