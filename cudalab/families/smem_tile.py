"""Helpers of the shared-memory tile families (smem-square, smem-rect): a model of each kernel's index
math, the bank-conflict figure it predicts, sizes in blocks, and the case that un-permutes ``out``.
A module of functions, not a family: each family passes its own patterns and padding.

A pattern models one kernel: per thread, the tile word it stores to and the word it loads from. From
it come both what the kernel writes to ``out`` (:func:`expected_out`) and the bank-conflict figure each
access should show (:func:`model_wavefronts`).

Verification: a kernel's output is a permutation of its block's global thread indices, and which
permutation depends on the variant, while the runner's reference is one array per problem. So
``Case.result`` un-permutes the downloaded ``out`` by the variant's modelled read pattern; a correct
kernel then yields exactly the global thread index everywhere (:func:`reference`), and any misplaced,
wrong or unwritten (poisoned: -1) element shows as a difference.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import UsageError
from cudalab.families.model import Case, Check, FamilyOption, Size, SetupContext, Work, compare

WARP, BANKS = 32, 32

BLOCKS = FamilyOption("blocks", int, 1, "Blocks to launch (each writes its own slice of out); many blocks make the "
                                        "pattern timeable, one block is the textbook demo.")
SIZE_HELP = "number of blocks (same as --blocks); default 1, the textbook demo"
EXTRA_COLUMNS = (("smem_expect", "expected wavefronts/req ld/st"),)

# (tx, ty, bdimx, bdimy, ipad) -> (store word address, load word address), per thread.
Pattern = Callable[[np.ndarray, np.ndarray, int, int, int], tuple[np.ndarray, np.ndarray]]


# --- the model ------------------------------------------------------------------------------------

def thread_grid(bx: int, by: int) -> tuple[np.ndarray, np.ndarray]:
    """threadIdx.x and threadIdx.y of one block, flat in linear thread order (x fastest)."""
    ty, tx = np.meshgrid(np.arange(by), np.arange(bx), indexing="ij")
    return tx.ravel(), ty.ravel()


def accesses(patterns: dict[str, Pattern], kernel: str, bx: int, by: int, ipad: int) -> tuple[np.ndarray, np.ndarray]:
    """Store and load word addresses of every thread of one block, in linear thread order."""
    tx, ty = thread_grid(bx, by)
    st, ld = patterns[kernel](tx, ty, bx, by, ipad)
    return np.asarray(st, dtype=np.int64), np.asarray(ld, dtype=np.int64)


def read_permutation(patterns: dict[str, Pattern], kernel: str, bx: int, by: int, ipad: int) -> np.ndarray:
    """perm[i]: the block-local thread index whose stored value thread i reads back.

    Raises:
        ValueError: the model loads a word no thread stored, or two threads store to one word.
    """
    st, ld = accesses(patterns, kernel, bx, by, ipad)
    size = int(max(st.max(), ld.max())) + 1
    owner = np.full(size, -1, dtype=np.int64)
    owner[st] = np.arange(st.size)
    if np.unique(st).size != st.size:
        raise ValueError(f"{kernel}: two threads store to one tile word")
    perm = owner[ld]
    if (perm < 0).any():
        raise ValueError(f"{kernel}: a thread loads a tile word no thread stored")
    return perm


def wavefronts_per_request(addresses: np.ndarray, warp: int = WARP, banks: int = BANKS) -> float:
    """Mean shared-memory wavefronts per warp request for 32-bit accesses.

    A request needs as many wavefronts as the busiest bank has distinct words (threads reading
    the same word share it: a broadcast). This is the n-way figure: 1 conflict-free, 32 when a
    whole warp hits one bank at different words.
    """
    ways = []
    for start in range(0, addresses.size, warp):
        words = np.unique(addresses[start:start + warp])
        ways.append(int(np.bincount(words % banks, minlength=banks).max()))
    return float(np.mean(ways))


def model_wavefronts(patterns: dict[str, Pattern], kernel: str, bx: int, by: int, ipad: int) -> dict[str, float]:
    """Expected wavefronts per request, ``{"ld": .., "st": ..}``, from the kernel's index math."""
    st, ld = accesses(patterns, kernel, bx, by, ipad)
    return {"ld": wavefronts_per_request(ld), "st": wavefronts_per_request(st)}


def expected_out(problem: Size, variant: VariantSpec, patterns: dict[str, Pattern], ipad: int) -> np.ndarray:
    """What the variant's kernel writes to ``out``, shape (blocks, BDIMY, BDIMX)."""
    blocks, by, bx = problem.dims
    perm = read_permutation(patterns, variant.kernel, bx, by, ipad)
    base = (np.arange(blocks, dtype=np.int64) * bx * by)[:, None]
    return (base + perm[None, :]).astype(np.int32).reshape(blocks, by, bx)


# --- sizes, work, reference and check -------------------------------------------------------------

def problem(n: str | None, shape: str | None, dtype: str, options: dict, bx: int, by: int) -> Size:
    """Parse ``--blocks K`` (or ``--n K``) into dims (blocks, bdimy, bdimx)."""
    if shape:
        raise UsageError("this family takes no --shape: the tile is fixed; use --blocks K to launch K blocks")
    blocks = int(options.get("blocks", 1))
    if n:
        from_n = L.parse_size(n, "--n")
        if blocks not in (1, from_n):
            raise UsageError(f"--n {n} and --blocks {blocks} disagree (--n is the number of blocks)")
        blocks = from_n
    if blocks < 1:
        raise UsageError("--blocks must be at least 1")
    if blocks * bx * by >= 2**31:
        raise UsageError(f"--blocks {blocks} is too many: the kernels write int32 indices (at most {2**31 // (bx * by) - 1} blocks)")
    opts = dict(options, blocks=blocks)
    return Size(dims=(blocks, by, bx), dtype=dtype, options=tuple(sorted(opts.items())))


def extent(problem: Size) -> L.Dim3:
    """One tile of BDIMX x BDIMY per block, blocks side by side along x (grid = blocks x 1)."""
    blocks, by, bx = problem.dims
    return (blocks * bx, by, 1)


def work(problem: Size) -> Work:
    """The bytes of out written (the tile traffic itself stays on chip): writes only."""
    nbytes = int(np.prod(problem.dims)) * problem.np_dtype.itemsize
    return Work(bytes=nbytes, written=nbytes)


def device_bytes(problem: Size) -> int:
    """Only out lives on the device."""
    return int(np.prod(problem.dims)) * problem.np_dtype.itemsize


def reference(problem: Size) -> np.ndarray:
    """Every block's global thread indices in order: what a correct kernel's out un-permutes to."""
    return np.arange(int(np.prod(problem.dims)), dtype=np.int32).reshape(problem.dims)


def check(result: np.ndarray, ref: np.ndarray) -> Check:
    """Integers: exact."""
    if result.shape == ref.shape and np.array_equal(result, ref):
        return Check(True, 0.0, 0.0)
    return compare(result, ref, tolerance=0.0, relative=False)


# --- the case -------------------------------------------------------------------------------------

def unpermute(out: np.ndarray, perm: np.ndarray) -> np.ndarray:
    """Undo the read permutation: canon[b, perm[i]] = out[b, i] (a correct out becomes arange)."""
    blocks = out.shape[0]
    flat = out.reshape(blocks, -1)
    canon = np.empty_like(flat)
    canon[:, perm] = flat
    return canon.reshape(out.shape)


def sort_blocks(out: np.ndarray) -> np.ndarray:
    """Each block's slice sorted: a correct kernel of unknown pattern (``--add``) then reads as the reference.

    Poison (-1) sorts first, so an unwritten element still shows as a difference.
    """
    return np.sort(out.reshape(out.shape[0], -1), axis=1).reshape(out.shape)


def fmt_expect(expect: dict | None) -> str:
    """``32/1`` for {"ld": 32, "st": 1}."""
    if not expect:
        return "–"
    return "/".join(f"{float(expect[k]):g}" for k in ("ld", "st"))


def case(ctx: SetupContext, patterns: dict[str, Pattern], ipad: int, expect: dict[str, float] | None) -> Case:
    """Allocate out, launch the variant's kernel and un-permute its out for the check (a ``--add``
    kernel, whose pattern is unknown, is checked as a permutation per block)."""
    variant, launch, problem = ctx.variant, ctx.launch, ctx.problem
    blocks, by, bx = problem.dims
    if variant.param("user"):
        canon = sort_blocks
    else:
        perm = read_permutation(patterns, variant.kernel, bx, by, ipad)
        canon = lambda out: unpermute(out, perm)  # noqa: E731
    d_out = ctx.device.empty(problem.dims, np.int32)
    k = ctx.kernel()
    args = (d_out,)
    return Case(
        run=lambda: k.launch(launch.grid, launch.block, args, launch.shared),
        result=lambda: canon(d_out.download()),
        poison=d_out.poison, close=d_out.free,
        notes={"registers": k.num_regs, "smem_expect": fmt_expect(expect)},
    )
