"""search family: the first index of a key, every index of a key, and many queries in a sorted array.

One run draws one array ``x`` of n random keys with duplicates (even values 0, 2, .., so every odd
value is absent), one key (``--key present`` picks an element of ``x``, ``--key absent`` that
element + 1) and ``--queries`` lookups (default n) for the sorted copy of ``x``, roughly half of them
present. Three operations share these inputs; each variant names its own in ``params.op``:

* ``linear``: the first index of the key, -1 when absent (NumPy: argmax of the equality mask);
* ``all``: every index of the key, ascending (NumPy: flatnonzero);
* ``binary``: for each query the lower bound in the sorted array (NumPy: searchsorted side='left').

The reference is a lazy :class:`Answers` (only the operations that run are computed) and a
variant's result is a :class:`Found` tagged with its operation, so one check covers the three.

Checks are exact. Outputs are int32 indices, poisoned with 0x80808080 (a negative number no
operation can return: -1 is linear's 'absent', every other answer is in 0..n), so an unwritten
output fails on its own; the key-present runs also fail a kernel that writes nothing at all.

Rate (metric ``rate``): items / median time, where items are the elements searched (n) for linear
and all, and the queries answered for binary: binary's column is its queries per second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import SkipRow, UsageError
from cudalab.families import Case, Check, FamilyOption, Size, SetupContext, Work
from cudalab.families.base import Family

KEY_CHOICES = ("present", "absent")

DEFAULT_N = 2**24
#: Indices, counts and the 0x7f7f7f7f sentinel are int32: n stays below 2^30.
MAX_N = 2**30 - 1
#: Distinct values at most 2^23 (even numbers up to 2^24): exact in float32.
MAX_DISTINCT = 2**23
#: Fill of every index output before the verified launch: int32 0x80808080 < -1, never an answer.
POISON = 0x80
#: linear's start value inside each run: 0x7f7f7f7f, above every index (atomicMin finds smaller hits).
NOT_FOUND_FILL = 0x7F
C_TYPES = {"int32": "int", "float32": "float"}
OPS = ("linear", "all", "binary")
SCAN_BLOCK = 1024


# --- sizes and work ------------------------------------------------------------------------------

def sizes(problem: Size) -> tuple[int, int]:
    """(array length, number of queries)."""
    n = problem.dims[0]
    return n, int(problem.opt("queries", 0) or n)


def op_of(variant: VariantSpec) -> str:
    """The operation a variant performs (``params.op``)."""
    op = variant.param("op")
    if op not in OPS:
        raise SkipRow(f"search variant {variant.name} has params.op {op!r}; expected one of {', '.join(OPS)}")
    return op


# --- inputs and answers ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Found:
    """A variant's answer: its operation, the indices and (for ``all``) the count it reported."""

    op: str
    values: np.ndarray
    count: int | None = None


@dataclass
class Answers:
    """NumPy's answers for the three operations, each computed on first use."""

    inputs: dict[str, np.ndarray]
    _cache: dict[str, np.ndarray] = field(default_factory=dict)

    def get(self, op: str) -> np.ndarray:
        """The reference indices for ``op`` (int32)."""
        if op not in self._cache:
            self._cache[op] = {"linear": host_linear, "all": host_all, "binary": host_binary}[op](self.inputs)
        return self._cache[op]


def host_linear(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """First index of the key as a one-element int32 array; -1 when absent."""
    x, key = inputs["x"], inputs["key"][0]
    mask = x == key
    i = int(np.argmax(mask))
    return np.array([i if mask[i] else -1], dtype=np.int32)


def host_all(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Every index of the key, ascending."""
    return np.flatnonzero(inputs["x"] == inputs["key"][0]).astype(np.int32)


def host_binary(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """Lower bound of every query in the sorted array."""
    return np.searchsorted(inputs["sorted"], inputs["queries"], side="left").astype(np.int32)


# --- cases ---------------------------------------------------------------------------------------

def _host_case(op: str, problem: Size, inputs: dict) -> Case:
    fn = {"linear": host_linear, "all": host_all, "binary": host_binary}[op]
    box: dict[str, np.ndarray] = {}
    notes: dict[str, Any] = {}

    def run() -> None:
        box["out"] = fn(inputs)

    def result() -> Found:
        out = box["out"]
        return _noted(notes, Found(op, out, out.size if op == "all" else None))

    return Case(run=run, result=result, timer="host", items=_items(op, problem), notes=notes)


def _noted(notes: dict, found: Found) -> Found:
    """Put what the verified launch found in the 'found' column (linear: the index, all: the count).

    The runner copies ``Case.notes`` into the row after the verified launch, so this shows there.
    """
    if found.op == "linear":
        notes["found"] = int(found.values[0])
    elif found.op == "all":
        notes["found"] = found.count
    return found


def _items(op: str, problem: Size) -> int:
    n, q = sizes(problem)
    return q if op == "binary" else n


def _scalar(problem: Size, value: Any):
    """The key as the kernel's elem_t argument."""
    return np.int32(value) if problem.dtype == "int32" else np.float32(value)


class Search(Family):
    """Linear, stream-compaction and binary search."""

    OPTIONS: tuple[FamilyOption, ...] = (
        FamilyOption("key", str, "present", "linear/all: search a key that is in the array (present) or not (absent)"),
        FamilyOption("queries", int, 0, "binary: number of queries (0: as many as --n)"),
    )
    SIZE_HELP = "array length (--n 16M, 2^24, 1000003); default 2^24 = 16,777,216"
    EXTRA_COLUMNS = (("found", "found"),)
    #: compute-sanitizer sizes: a multiple of all's chunk (256 x 8) and one that is not.
    SANITIZE_SIZES = ({"n": "4096"}, {"n": "3001"})

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """Parse ``--n`` and the options into dims (n,); ``queries`` (0: n) is resolved in the options.

        Raises:
            UsageError: ``--shape`` given, n outside 1..2^30-1, a bad --key or --queries.
        """
        if shape:
            raise UsageError("search takes a length: use --n (e.g. --n 2^24), not --shape")
        size = L.parse_size(n, "--n") if n else DEFAULT_N
        if not 1 <= size <= MAX_N:
            raise UsageError(f"--n {size:,} is out of range: search indexes with int32 (1 to 2^30 - 1)")
        opts = dict(options)
        key = opts.get("key") or "present"
        if key not in KEY_CHOICES:
            raise UsageError(f"--key {key!r} must be one of {', '.join(KEY_CHOICES)}")
        queries = int(opts.get("queries") or 0) or size
        if not 1 <= queries <= MAX_N:
            raise UsageError(f"--queries {queries:,} is out of range (1 to 2^30 - 1)")
        opts["key"] = key
        opts["queries"] = queries
        return Size(dims=(size,), dtype=dtype, options=tuple(sorted(opts.items())))

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """binary: one thread per query; linear and all: the array."""
        n, queries = sizes(problem)
        return (queries if op_of(variant) == "binary" else n, 1, 1)

    def work(self, problem: Size) -> Work:
        """The array read once (linear, all); rates come from each case's items."""
        return Work(bytes=problem.dims[0] * problem.np_dtype.itemsize)

    def device_bytes(self, problem: Size) -> int:
        """Array, sorted array, queries, all's index output, binary's output, block counts."""
        n, q = sizes(problem)
        return 2 * n * problem.np_dtype.itemsize + q * problem.np_dtype.itemsize + 4 * (n + q) + 8 * (n // 256 + 1) + (1 << 20)

    def defines(self, problem: Size, variant: VariantSpec) -> dict[str, str]:
        """The element type for search.cu."""
        return {"ELEM_T": C_TYPES[problem.dtype]}

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """The array, its sorted copy, the key and the queries (see the module docstring).

        Values are even numbers 0 .. 2(m-1) with m = max(1, n // 4) distinct values (capped so they stay
        exact in float32): about four copies of each, so 'first' and 'all' differ from 'any'. Queries are
        uniform over -1 .. 2m: odd ones (and -1, below everything) are absent, even ones present.
        """
        n, q = sizes(problem)
        m = max(1, min(n // 4, MAX_DISTINCT))
        x = (2 * rng.integers(0, m, size=n, dtype=np.int64)).astype(problem.np_dtype)
        key = x[int(rng.integers(0, n))]
        if problem.opt("key", "present") == "absent":
            key = key + 1
        queries = rng.integers(-1, 2 * m + 1, size=q, dtype=np.int64).astype(problem.np_dtype)
        return {"x": x, "sorted": np.sort(x), "key": np.array([key], dtype=problem.np_dtype), "queries": queries}

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> Answers:
        """The lazy answers of every operation."""
        return Answers(inputs)

    def check(self, problem: Size, result: Found, ref: Answers) -> Check:
        """Exact: the same indices (and, for ``all``, the same count) as NumPy.

        ``max_error`` is the number of wrong entries (a wrong count counts as its difference).
        """
        expected = ref.get(result.op)
        got = np.asarray(result.values)
        if result.op == "all" and result.count != expected.size:
            return Check(False, float(abs((result.count or 0) - expected.size)) or 1.0, 0.0,
                         f" (count {result.count}, expected {expected.size})")
        if got.shape != expected.shape:
            return Check(False, float(abs(got.size - expected.size)) or 1.0, 0.0,
                         f" ({got.size} indices, expected {expected.size})")
        wrong = np.flatnonzero(got != expected)
        if wrong.size:
            i = int(wrong[0])
            what = "unwritten (poison)" if got[i] < -1 else f"{int(got[i])}"
            return Check(False, float(wrong.size), 0.0,
                         f" ({wrong.size} wrong; first at {i}: {what}, expected {int(expected[i])})")
        return Check(True, 0.0, 0.0)

    def setup(self, ctx: SetupContext) -> Case:
        """Build the case for one search variant.

        Raises:
            SkipRow: a 2-D block or grid, or a kind this family has no rows for.
        """
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        op = op_of(variant)
        if variant.kind == "host":
            return _host_case(op, problem, inputs)
        if variant.kind != "kernel":
            raise SkipRow(f"search has no {variant.kind} rows ({variant.name})")
        ctx.one_dimensional()
        n, q = sizes(problem)
        dev = ctx.device
        key = _scalar(problem, inputs["key"][0])
        notes: dict[str, Any] = {}
        if op == "linear":
            d_x = ctx.shared("x", lambda: dev.to_device(inputs["x"]))
            k, fin = ctx.kernel(), ctx.kernel("search_linear_finish")
            d_first = dev.empty((1,), np.int32)
            args = (d_x, np.int32(n), key, d_first)

            def run() -> None:
                d_first.poison(NOT_FOUND_FILL)     # 0x7f7f7f7f: above every index, so atomicMin takes any hit
                k.launch(launch.grid, launch.block, args, launch.shared)
                fin.launch((1, 1, 1), (1, 1, 1), (d_first, np.int32(n)))

            notes["registers"] = k.num_regs
            return Case(run=run, result=lambda: _noted(notes, Found(op, d_first.download())),
                        poison=lambda byte=None: d_first.poison(POISON), one_poison=True, close=d_first.free, items=n, notes=notes)
        if op == "all":
            d_x = ctx.shared("x", lambda: dev.to_device(inputs["x"]))
            count_k, scan_k, scatter_k = (ctx.kernel(), ctx.kernel("search_all_scan"),
                                          ctx.kernel("search_all_scatter"))
            blocks = launch.grid[0]
            if blocks * launch.tile[0] < n:
                raise SkipRow(f"{variant.name}: --grid {blocks} does not cover {n} elements in chunks of {launch.tile[0]}")
            bufs = [dev.empty((blocks,), np.int32), dev.empty((blocks,), np.int32), dev.empty((1,), np.int32),
                    dev.empty((n,), np.int32)]
            d_counts, d_offsets, d_total, d_out = bufs

            def run() -> None:
                count_k.launch(launch.grid, launch.block, (d_x, np.int32(n), key, d_counts), launch.shared)
                scan_k.launch((1, 1, 1), (SCAN_BLOCK, 1, 1), (d_counts, np.int32(blocks), d_offsets, d_total))
                scatter_k.launch(launch.grid, launch.block, (d_x, np.int32(n), key, d_offsets, d_out), launch.shared)

            def result() -> Found:
                total = int(d_total.download()[0])
                out = d_out.download()
                return _noted(notes, Found(op, out[:max(0, min(total, n))], total))

            def poison(byte: int | None = None) -> None:  # a negative index: never an answer
                for b in bufs:
                    b.poison(POISON)

            def close() -> None:
                for b in bufs:
                    b.free()

            notes.update(blocks=blocks, registers=scatter_k.num_regs)
            return Case(run=run, result=result, poison=poison, one_poison=True, close=close, items=n, notes=notes)
        # binary
        d_sorted = ctx.shared("sorted", lambda: dev.to_device(inputs["sorted"]))
        d_q = ctx.shared("queries", lambda: dev.to_device(inputs["queries"]))
        k = ctx.kernel()
        d_out = dev.empty((q,), np.int32)
        args = (d_sorted, np.int32(n), d_q, np.int32(q), d_out)
        return Case(run=lambda: k.launch(launch.grid, launch.block, args, launch.shared),
                    result=lambda: Found(op, d_out.download()), poison=lambda byte=None: d_out.poison(POISON), one_poison=True, close=d_out.free,
                    items=q, notes={"registers": k.num_regs})


FAMILY = Search()
