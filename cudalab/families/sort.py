"""sort family: n keys in ascending order, by a bitonic network, a stable counting merge sort and two
stable LSD radix sorts (their cases live in :mod:`cudalab.families.sort_radix` and
:mod:`cudalab.families.sort_onesweep`).

Inputs (``--input``): ``random`` (int32 over the whole range, float32 normal), ``dups`` (only 16
distinct values: long runs of equal keys), ``sorted`` and ``reverse`` (random keys, pre-sorted).

Verification is exact: the keys must equal NumPy's sorted keys element for element. A variant that
claims stability (``params.stable``: merge-rank) also returns each key's original index, and those
must equal NumPy's stable argsort: a sort that puts equal keys out of input order returns the same
keys but a different permutation, and fails (``--input dups`` is where that shows). radix and onesweep
are stable by construction but carry no payload (keys only, for speed), so their check sees the keys
only.

Poison: float outputs are filled with 0xFF bytes (NaN), which no sorted float32 input holds. For
int32 the fill is a byte pattern whose int32 value is not among the input keys (0xFF.. = -1 unless
-1 is a key, then the next candidate), so an unwritten element can never equal the expected key;
index outputs are filled with 0x80808080 (negative, never an index).

Rate (metric ``rate``): keys / median time; % of ref is over CuPy's sort (CUB radix sort) when
CuPy is installed. Sorting is out of place everywhere (CuPy's sort copies too), so the input is
never modified and needs no restore. Column ``passes``: the kernel launches one run makes (bitonic,
merge-rank: each a pass over the keys; radix: histogram, scan of the counts and scatter for each of
8 digits, 24; onesweep: zeroing, one histogram launch and one pass for each of 4 digits, 6).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import SkipRow, UsageError
from cudalab.families import Case, Check, FamilyOption, Size, SetupContext, Work
from cudalab.families.base import Family
from cudalab.families.model import cupy_version
from cudalab.families.sort_onesweep import onesweep_case
from cudalab.families.sort_radix import radix_case

INPUTS = ("random", "dups", "sorted", "reverse")

DEFAULT_N = 2**24
#: The kernels index with int / unsigned (the padded bitonic buffer is then at most 2^28); onesweep's
#: status words hold counts below 2^30.
MAX_N = 2**28
C_TYPES = {"int32": "int", "float32": "float"}
DUP_VALUES = 16
INDEX_POISON = 0x80
#: Bytes tried, in order, for the int32 key poison: the first whose 4-byte value is not a key wins.
POISON_BYTES = (0xFF, 0x80, 0x7F, 0xA5, 0x5A, 0xC3, 0x3C, 0x01)
#: Threads per block of the one-thread-per-element global kernels.
GLOBAL_BLOCK = 256


# --- sizes and work ------------------------------------------------------------------------------

def pow2_at_least(x: int) -> int:
    """The smallest power of two >= x (x >= 1)."""
    return 1 << max(0, (x - 1).bit_length())


# --- inputs and answers ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Sorted:
    """A variant's answer: the keys, and the original index of each key where the variant carries one."""

    keys: np.ndarray
    order: np.ndarray | None = None


@dataclass
class Expected:
    """NumPy's answer: the sorted keys, and the stable argsort computed on first use."""

    x: np.ndarray
    keys: np.ndarray
    _order: np.ndarray | None = field(default=None, repr=False)

    @property
    def order(self) -> np.ndarray:
        """Original indices in stable sorted order (ties in input order)."""
        if self._order is None:
            self._order = np.argsort(self.x, kind="stable").astype(np.int32)
        return self._order


def key_poison(x: np.ndarray) -> int:
    """A fill byte whose 4-byte pattern is not an input key (so an unwritten element never passes).

    Floats: 0xFF (NaN). int32: the first of :data:`POISON_BYTES` whose value the input lacks.
    """
    if x.dtype.kind == "f":
        return 0xFF
    for b in POISON_BYTES:
        value = np.frombuffer(bytes([b]) * 4, dtype=np.int32)[0]
        if not np.any(x == value):
            return b
    raise SkipRow("no poison byte pattern is free of the input keys (8 candidates all present)")


# --- cases ---------------------------------------------------------------------------------------

def _host_case(problem: Size, x: np.ndarray) -> Case:
    box: dict[str, np.ndarray] = {}

    def run() -> None:
        box["out"] = np.sort(x)

    return Case(run=run, result=lambda: Sorted(box["out"]), timer="host", items=x.size)


def _library_case(d_x, problem: Size) -> Case:
    """The ``cupy`` reference row: cupy.sort (a copy sorted by CUB's radix sort).

    Raises:
        SkipRow: CuPy is not installed (the runner turns this into a Skipped row).
    """
    view = d_x.cupy()
    if view is None:
        raise SkipRow("CuPy is not installed: the cupy reference row needs it (pip install cupy-cuda13x)")
    import cupy  # noqa: PLC0415  (present: cupy_view succeeded)

    box: dict = {}

    def run() -> None:
        box["out"] = cupy.sort(view)

    return Case(run=run, result=lambda: Sorted(box["out"].get()), items=view.size,
                notes={"library": f"cupy {cupy_version()}"})


def bitonic_plan(n2: int, tile: int) -> list[tuple[str, int, int]]:
    """The launches after the tile sort: (kernel, k, j) for the global passes, (merge, k, 0) per stage.

    A global pass takes as many distances (up to 4) as stay >= tile: each pass reads and writes the
    whole buffer once, so fewer passes is the whole game.
    """
    plan: list[tuple[str, int, int]] = []
    k = 2 * tile
    while k <= n2:
        j = k // 2
        while j >= tile:
            levels = min(4, (j // tile).bit_length())      # distances j .. j >> (levels - 1), all >= tile
            plan.append((KERNEL_OF_LEVELS[levels], k, j))
            j >>= levels
        plan.append(("sort_bitonic_merge", k, 0))
        k *= 2
    return plan


LEVELS = {"sort_bitonic_step": 1, "sort_bitonic_step2": 2, "sort_bitonic_step3": 3, "sort_bitonic_step4": 4}
KERNEL_OF_LEVELS = {v: k for k, v in LEVELS.items()}


def _bitonic_case(ctx: SetupContext, d_x, poison: int) -> Case:
    variant, launch, problem = ctx.variant, ctx.launch, ctx.problem
    n = problem.dims[0]
    tile = launch.tile[0]
    if tile & (tile - 1):
        raise SkipRow(f"{variant.name} needs a power-of-two tile (got {tile})")
    n2 = max(pow2_at_least(n), tile)
    tiles = n2 // tile
    if launch.grid != (tiles, 1, 1):
        raise SkipRow(f"{variant.name} sets its own grid ({tiles} tiles of {tile}); --grid {L.fmt_dims(launch.grid)} "
                      "does not match")
    ks = {name: ctx.kernel(name) for name in ("sort_bitonic_tile", "sort_bitonic_merge", *LEVELS)}
    d_buf = ctx.device.empty((n2,), problem.np_dtype)
    steps = []
    for name, k, j in bitonic_plan(n2, tile):
        if name == "sort_bitonic_merge":
            steps.append((ks[name], (tiles, 1, 1), launch.block, (d_buf, np.uint32(k)), launch.shared))
        else:
            threads = n2 >> LEVELS[name]
            grid = ((threads + GLOBAL_BLOCK - 1) // GLOBAL_BLOCK, 1, 1)
            steps.append((ks[name], grid, (GLOBAL_BLOCK, 1, 1), (d_buf, np.uint32(n2), np.uint32(k), np.uint32(j)), 0))
    first = ks["sort_bitonic_tile"]

    def run() -> None:
        first.launch(launch.grid, launch.block, (d_x, np.int32(n), d_buf), launch.shared)
        for kern, grid, block, args, shared in steps:
            kern.launch(grid, block, args, shared)

    return Case(run=run, result=lambda: Sorted(d_buf.download()[:n]), poison=lambda byte=None: d_buf.poison(poison), one_poison=True,
                close=d_buf.free, items=n,
                notes={"passes": 1 + len(steps), "padded": n2, "registers": first.num_regs})


def _merge_case(ctx: SetupContext, d_x, poison: int) -> Case:
    launch, problem = ctx.launch, ctx.problem
    n = problem.dims[0]
    tile = launch.tile[0]
    first, merge = ctx.kernel(), ctx.kernel("sort_merge_pass")
    dev = ctx.device
    keys = [dev.empty((n,), problem.np_dtype) for _ in range(2)]
    vals = [dev.empty((n,), np.int32) for _ in range(2)]
    widths = []
    w = tile
    while w < n:
        widths.append(w)
        w *= 2
    final = len(widths) % 2
    grid = ((n + GLOBAL_BLOCK - 1) // GLOBAL_BLOCK, 1, 1)

    def run() -> None:
        first.launch(launch.grid, launch.block, (d_x, np.int32(n), keys[0], vals[0]), launch.shared)
        src = 0
        for width in widths:
            merge.launch(grid, (GLOBAL_BLOCK, 1, 1),
                         (keys[src], vals[src], np.int32(n), np.int32(width), keys[1 - src], vals[1 - src]))
            src = 1 - src

    def do_poison(byte: int | None = None) -> None:  # its own patterns: absent keys, a negative index
        for b in keys:
            b.poison(poison)
        for b in vals:
            b.poison(INDEX_POISON)

    def close() -> None:
        for b in keys + vals:
            b.free()

    return Case(run=run, result=lambda: Sorted(keys[final].download(), vals[final].download()), poison=do_poison, one_poison=True,
                close=close, items=n, notes={"passes": 1 + len(widths), "registers": merge.num_regs})


class Sort(Family):
    """Ascending sort of n keys."""

    OPTIONS: tuple[FamilyOption, ...] = (
        FamilyOption("input", str, "random", "keys: random, dups (16 distinct values), sorted or reverse (sorted descending)"),
    )
    SIZE_HELP = "number of keys (--n 16M, 2^24, 1000003); default 2^24 = 16,777,216; at most 2^28"
    EXTRA_COLUMNS = (("passes", "passes"),)
    #: compute-sanitizer sizes: a multiple of every tile (bitonic 8192, onesweep 6144, radix 4096, merge-rank 1024) and
    #: one that is not.
    SANITIZE_SIZES = ({"n": "24576"}, {"n": "5000"})

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """Parse ``--n`` and ``--input``.

        Raises:
            UsageError: ``--shape`` given, n outside 1..2^28, or an unknown --input.
        """
        if shape:
            raise UsageError("sort takes a length: use --n (e.g. --n 2^24), not --shape")
        size = L.parse_size(n, "--n") if n else DEFAULT_N
        if not 1 <= size <= MAX_N:
            raise UsageError(f"--n {size:,} is out of range: sort takes 1 to 2^28 keys")
        opts = dict(options)
        kind = opts.get("input") or "random"
        if kind not in INPUTS:
            raise UsageError(f"--input {kind!r} must be one of {', '.join(INPUTS)}")
        opts["input"] = kind
        return Size(dims=(size,), dtype=dtype, options=tuple(sorted(opts.items())))

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """bitonic: the array padded to a power of two; merge-rank and radix: the array."""
        n = problem.dims[0]
        return (pow2_at_least(n) if variant.param("pad_pow2") else n, 1, 1)

    def work(self, problem: Size) -> Work:
        """Each key read and written once (the rate column counts keys, not bytes)."""
        return Work(bytes=2 * problem.dims[0] * problem.np_dtype.itemsize)

    def device_bytes(self, problem: Size) -> int:
        """Input, two key and two index buffers (merge-rank), or the padded buffer (bitonic, < 2n), + CuPy's copy.

        radix's two key buffers and its counts (16 four-byte counts per tile of >= 32 keys: <= 2n bytes),
        and onesweep's two key buffers and its scratch (4 x 256 four-byte status words per tile of >= 2048
        keys, plus 4.2 KiB: <= 2n bytes + 4.2 KiB), need less than merge-rank's buffers.
        """
        n, size = problem.dims[0], problem.np_dtype.itemsize
        return n * size + 2 * n * (size + 4) + 2 * n * size + (64 << 20)

    def defines(self, problem: Size, variant: VariantSpec) -> dict[str, str]:
        """The element type for sort.cu and sort_onesweep.cu."""
        return {"ELEM_T": C_TYPES[problem.dtype]}

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Keys as ``--input`` says (see the module docstring)."""
        n = problem.dims[0]
        kind = problem.opt("input", "random")
        if kind == "dups":
            x = rng.integers(0, DUP_VALUES, size=n).astype(problem.np_dtype)
        elif problem.dtype == "int32":
            x = rng.integers(np.iinfo(np.int32).min, np.iinfo(np.int32).max, size=n, dtype=np.int32, endpoint=True)
        else:
            x = rng.standard_normal(n, dtype=np.float32)
        if kind == "sorted":
            x = np.sort(x)
        elif kind == "reverse":
            x = np.ascontiguousarray(np.sort(x)[::-1])
        return {"x": x}

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> Expected:
        """NumPy's sorted keys (the stable order comes later, only if a stable variant runs)."""
        x = inputs["x"]
        return Expected(x, np.sort(x))

    def check(self, problem: Size, result: Sorted, ref: Expected) -> Check:
        """Keys exactly equal to NumPy's; where the variant returns indices, equal to the stable argsort.

        ``max_error`` is the number of wrong positions.
        """
        keys = np.asarray(result.keys)
        if keys.shape != ref.keys.shape:
            return Check(False, float("inf"), 0.0, f" (shape {keys.shape}, expected {ref.keys.shape})")
        # array_equal is False for NaN (the float poison), as it should be.
        wrong = np.flatnonzero(~(keys == ref.keys))
        if wrong.size:
            i = int(wrong[0])
            return Check(False, float(wrong.size), 0.0,
                         f" ({wrong.size} keys wrong; first at {i}: {keys[i]!r}, expected {ref.keys[i]!r})")
        if result.order is not None:
            order = np.asarray(result.order)
            bad = np.flatnonzero(order != ref.order)
            if bad.size:
                i = int(bad[0])
                valid = (order.shape == ref.order.shape and bool(np.all((order >= 0) & (order < keys.size)))
                         and np.unique(order).size == order.size)   # a permutation: nothing lost or doubled
                why = ("keys sorted but equal keys out of input order: not stable" if valid and
                       np.array_equal(ref.x[order], keys) else "indices do not match the keys (lost or unwritten)")
                return Check(False, float(bad.size), 0.0,
                             f" ({bad.size} indices wrong, first at {i}: {int(order[i])}, expected {int(ref.order[i])}; {why})")
        return Check(True, 0.0, 0.0)

    def setup(self, ctx: SetupContext) -> Case:
        """Build the case for one sort variant.

        Raises:
            SkipRow: a 2-D block or grid, CuPy missing for the cupy row, or a grid that does not fit.
        """
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        x = inputs["x"]
        if variant.kind == "host":
            return _host_case(problem, x)
        d_x = ctx.shared("x", lambda: ctx.device.to_device(x))   # pristine: every variant sorts out of place
        if variant.kind == "library":
            return _library_case(d_x, problem)
        if variant.kind != "kernel":
            raise SkipRow(f"sort has no {variant.kind} rows ({variant.name})")
        ctx.one_dimensional()
        poison = ctx.shared("poison", lambda: key_poison(x))
        if variant.param("pad_pow2"):
            return _bitonic_case(ctx, d_x, poison)
        if variant.param("radix"):
            return radix_case(ctx, d_x, poison, answer=Sorted)
        if variant.param("onesweep"):
            return onesweep_case(ctx, d_x, poison, answer=Sorted)
        if launch.grid[0] * launch.tile[0] < problem.dims[0]:
            raise SkipRow(f"{variant.name}: --grid {launch.grid[0]} does not cover {problem.dims[0]} keys in tiles of {launch.tile[0]}")
        return _merge_case(ctx, d_x, poison)


FAMILY = Sort()
