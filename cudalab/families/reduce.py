"""reduce family: the sum of n elements, from the textbook in-place ladder to a modern kernel and CUB.

Every kernel writes one partial sum per block; the final scalar is the host sum of the partials
(in float64, or int64 for integers), so each row reports two times: the kernel alone (the book's
figure) and the 'time to result' (kernel + download of the partials + host sum).

The textbook kernels reduce in place and destroy their input. The input is uploaded once (a
pristine copy shared by every variant) and copied device-to-device into a work buffer before each
launch by ``Case.reset``, which the runner leaves out of the timing.

Verification compares the final scalar with NumPy's sum:

* int32: exact. Inputs are positive (1..V, V = min(100, (2^31 - 1) / n)), so no sum wraps and
  every partial sum is positive: neither poison (0xFF bytes: -1; 0x7F bytes: 2139062143) can stand
  for a partial, and a dropped element or block always lowers the total (signed inputs could sum
  to 0 over a dropped block and pass).
* float32 / float64: the reference is the sum in float64. Inputs are positive (uniform in
  [0.5, 1.5)), so sum |x| equals the sum itself and the classic bound for floating-point summation
  applies to the relative error: |error| <= d * u * sum |x| (to first order), where u is the unit
  roundoff (eps / 2) and d the longest chain of additions any element goes through. We allow
  d = 2 * ceil(log2 n) + ceil(n / 65536) + 2: a tree of depth log2 n (twice, for the in-block tree
  and the tree over blocks or lanes), per-thread serial runs of up to n / 65536 elements (grid-stride
  kernels and CUB have at least 65536 threads in flight), and the host sum and the final cast. For
  2^24 elements that is 306 u: 1.8e-5 relative in float32, 3.4e-14 in float64. Rounding errors of
  random data grow far slower than this worst case, so a pass is robust and a lost or doubled block
  (a relative change of at least 1/n) still fails in float64 and int32.
* float32 / float64, exactly: that tolerance is 300 elements' worth at 2^24 in float32, so one
  dropped warp passes it. Every float variant is therefore also run on integer inputs (1..V) small
  enough that every partial sum a block forms is an exact float (V · elements per block <= 2^24 in
  float32, 2^53 in float64), and the float64 host sum of its partials must equal the exact total
  (:func:`exact_check`): one dropped or doubled element fails, whatever the rounding tolerance.
"""

from __future__ import annotations

import math

import numpy as np

from cudalab import hostwork
from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.errors import SkipRow, UsageError
from cudalab.families import Case, Check, Launch, Size, SetupContext, Work, compare
from cudalab.families.base import Family
from cudalab.families.model import cupy_version


DEFAULT_N = 2**24
#: The textbook kernels index with 32-bit unsigned ints (idx + 7 * blockDim.x must not wrap).
MAX_N = 2**31
#: C type of each dtype, passed to reduce.cu as ELEM_T.
C_TYPES = {"int32": "int", "float32": "float", "float64": "double"}


# --- inputs, reference, tolerance -------------------------------------------------------------------

def int_limit(n: int) -> int:
    """Largest int32 input value: 100, or less so that n of them cannot wrap (sum < 2^31)."""
    return max(1, min(100, (2**31 - 1) // max(1, n)))


def _is_int(problem: Size) -> bool:
    return problem.np_dtype.kind in "iu"


def tolerance(problem: Size) -> float:
    """Largest relative error allowed for the final scalar (0 for integers; see the module doc)."""
    if _is_int(problem):
        return 0.0
    n = problem.dims[0]
    unit_roundoff = float(np.finfo(problem.np_dtype).eps) / 2
    depth = 2 * math.ceil(math.log2(n)) + math.ceil(n / 65536) + 2
    return depth * unit_roundoff


def exact_limit(problem: Size, per_block: int) -> int:
    """Largest value of the exactly summable inputs: every sum of ``per_block`` of them is an exact
    float (at most 2^24 in float32, 2^53 in float64), capped at 100."""
    mantissa = np.finfo(problem.np_dtype).nmant + 1
    return max(1, min(100, 2**mantissa // max(1, per_block)))


def exact_inputs(problem: Size, rng: np.random.Generator, limit: int) -> np.ndarray:
    """Integers 1..limit in the problem's float dtype: all positive, so a dropped element always
    lowers the sum, and varied, so reading a wrong element usually changes it."""
    return hostwork.integers(rng, problem.dims[0], 1, limit + 1, np.int32, out_dtype=problem.np_dtype)


def check_exact(partials: np.ndarray, total: int, limit: int) -> Check:
    """The float64 sum of a launch's partials on exact inputs must be ``total`` exactly.

    The partials are exact integers when the kernel adds every element once; their float64 sum is
    exact (below 2^53). NaN or inf partials are the poison of a block that never wrote.
    """
    p = np.asarray(partials).astype(np.float64)
    what = f" (exact-sum check on integer inputs 1..{limit})"
    bad = int(np.count_nonzero(~np.isfinite(p)))
    if bad:
        return Check(False, float("nan"), 0.0, f" ({bad} partials unwritten or not finite in the exact-sum check)")
    err = abs(float(p.sum()) - float(total))
    return Check(err == 0.0, err, 0.0, what + (f": off by {err:g}" if err else ""))


def finish(problem: Size, partials: np.ndarray) -> np.ndarray:
    """Add the per-block partial sums on the host: float64 (int64) accumulation, cast to the dtype.

    NaN partials (the poison, left by a block that never wrote) stay NaN and fail the check.
    """
    if _is_int(problem):
        return np.array([partials.astype(np.int64).sum()]).astype(np.int32)
    return np.array([partials.astype(np.float64).sum()]).astype(problem.np_dtype)


def pairwise_sum(a: np.ndarray) -> np.generic:
    """Sum ``a`` by recursive halving in place, one vectorised add per level; destroys ``a``.

    The book's ``recursiveReduce`` on the host: a[i] += a[i + half] until one element is left.
    An odd length first folds its last element into a[0], so any length works. Integers wrap as
    the GPU's do.
    """
    m = a.size
    if m == 0:
        return a.dtype.type(0)
    while m > 1:
        if m % 2:
            np.add(a[0:1], a[m - 1:m], out=a[0:1])   # array op: wraps without a scalar overflow warning
            m -= 1
        half = m // 2
        np.add(a[:half], a[half:m], out=a[:half])
        m = half
    return a[0]


# --- cases ---------------------------------------------------------------------------------------

def _host_case(problem: Size, x: np.ndarray) -> Case:
    """The ``cpu`` row: pairwise_sum on a scratch copy refreshed (untimed) before every run."""
    buf = np.empty_like(x)
    box: dict[str, np.generic] = {}

    def run() -> None:
        box["v"] = pairwise_sum(buf)

    def to_result():
        run()
        return box["v"].item()

    return Case(
        run=run, result=lambda: np.array([box["v"]], dtype=x.dtype), reset=lambda: np.copyto(buf, x),
        to_result=to_result, timer="host",
    )


def _library_case(d_x, problem: Size) -> Case:
    """The ``cub`` reference row: CuPy's sum over a view of the pristine device input.

    Raises:
        SkipRow: CuPy is not installed (the runner turns this into a Skipped row).
    """
    view = d_x.cupy()
    if view is None:
        raise SkipRow("CuPy is not installed: the cub reference row needs it (pip install cupy-cuda13x)")
    box: dict = {}

    def run() -> None:
        # Accumulate in the element type, as the kernels do; CuPy dispatches sums to CUB.
        box["out"] = view.sum(dtype=problem.np_dtype)

    def to_result():
        run()
        return box["out"].get().item()

    return Case(
        run=run, result=lambda: np.array([box["out"].get()]).astype(problem.np_dtype), to_result=to_result,
        notes={"library": f"cupy {cupy_version()}"},
    )


def _exact_check(ctx, problem: Size, k, launch: Launch, d_part, d_work):
    """A check that launches the kernel on exactly summable inputs (:func:`check_exact`).

    Elements per block: a block covers at most ceil(n / blocks) elements, plus one block's width
    for the grid-stride kernel's last round.
    """
    n = problem.dims[0]
    blocks = launch.grid[0]
    limit = exact_limit(problem, -(-n // blocks) + L.threads(launch.block))
    host = ctx.shared(f"x_exact_{limit}_host", lambda: exact_inputs(problem, ctx.rng, limit))
    d_exact = ctx.shared(f"x_exact_{limit}", lambda: ctx.device.to_device(host))
    total = ctx.shared(f"x_exact_{limit}_total", lambda: _Total(hostwork.int_sum(host)))
    args = (d_work, d_part, np.uint32(n)) if d_work is not None else (d_exact, d_part, np.uint64(n))

    def check(byte: int) -> Check:
        d_part.poison(byte)
        if d_work is not None:
            d_work.copy_from(d_exact)
        k.launch(launch.grid, launch.block, args, launch.shared)
        ctx.device.synchronize()
        return check_exact(d_part.download(), total.value, limit)

    return check


class _Total:
    """An int kept in ``ctx.shared`` (which frees what it holds at the end)."""

    def __init__(self, value: int):
        self.value = value


class Reduce(Family):
    """Sum of n elements."""

    SIZE_HELP = "number of elements (--n 16M, 2^24, 1000003); default 2^24 = 16,777,216"
    EXTRA_COLUMNS = (("to_result_ms", "to result ms"), ("value", "result"))
    #: compute-sanitizer sizes: a multiple of the unrolled tiles (8 × 512 × 2) and one that is not.
    SANITIZE_SIZES = ({"n": "8192"}, {"n": "8191"})
    SIGNATURE = """\
void KERNEL(ELEM_T *data,      // n input elements; ELEM_T is float, double or int (--dtype); the kernel
                               // may overwrite them (restored before every launch)
            ELEM_T *partial,   // output: one partial sum per block, partial[blockIdx.x]; the host adds them
            unsigned int n)    // number of elements
// grid: 1-D, tiles of block x per_thread over n (per_thread=8: each block sums 8 x blockDim.x elements)"""

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """Parse ``--n`` into a one-element dims tuple.

        Raises:
            UsageError: ``--shape`` given, or n outside 1..2^31.
        """
        if shape:
            raise UsageError("reduce takes a length: use --n (e.g. --n 2^24), not --shape")
        size = L.parse_size(n, "--n") if n else DEFAULT_N
        if size > MAX_N:
            raise UsageError(f"--n {size:,} is too large: the reduce kernels index with 32-bit ints (at most 2^31)")
        return Size(dims=(size,), dtype=dtype, options=tuple(sorted(options.items())))

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """The flat array along x."""
        return (problem.dims[0], 1, 1)

    def work(self, problem: Size) -> Work:
        """Each element read once (the in-place writes are the algorithm's cost, not necessary bytes, and the
        one value written is nothing beside N): rated against the read stream."""
        return Work(bytes=problem.dims[0] * problem.np_dtype.itemsize, written=0)

    def roofline_bytes(self, problem: Size) -> int:
        """The copy that sets the roofline moves the same input: n elements (read once, as counted here)."""
        return problem.dims[0] * problem.np_dtype.itemsize

    def device_bytes(self, problem: Size) -> int:
        """Pristine input, the in-place work copy, one partial per block (blocks of at least 32), and
        for floats the exactly summable input."""
        n, size = problem.dims[0], problem.np_dtype.itemsize
        exact = 0 if _is_int(problem) else n * size
        return 2 * n * size + exact + (n // 32 + 1) * size + (1 << 20)

    def defines(self, problem: Size, variant: VariantSpec) -> dict[str, str]:
        """The element type for reduce.cu."""
        return {"ELEM_T": C_TYPES[problem.dtype]}

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Random, never-zero, positive data: floats in [0.5, 1.5), integers 1..:func:`int_limit`.

        Floats are positive so that sum |x| is the sum and the relative bound in :func:`tolerance`
        is rigorous; integers are positive and small so no partial wraps and none can equal a poison.
        """
        n = problem.dims[0]
        if problem.dtype == "int32":
            return {"x": hostwork.integers(rng, n, 1, int_limit(n) + 1, np.int32)}
        return {"x": hostwork.uniform(rng, n, problem.np_dtype, 0.5, 1.5)}  # drawn in its dtype, in parallel

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """NumPy's sum as a one-element array: float64 for floats, int64 wrapped to int32 for ints."""
        x = inputs["x"]
        if _is_int(problem):
            return np.array([np.sum(x, dtype=np.int64)]).astype(np.int32)
        return np.array([np.sum(x, dtype=np.float64)])

    def check(self, problem: Size, result: np.ndarray, ref: np.ndarray) -> Check:
        """Integers exactly (modulo 2^32), floats within :func:`tolerance` of the float64 sum."""
        if _is_int(problem):
            return compare(np.asarray(result).astype(np.int32), ref, tolerance=0.0, relative=False)
        return compare(result, ref, tolerance=tolerance(problem), relative=True)

    def setup(self, ctx: SetupContext) -> Case:
        """Build the case for one reduce variant.

        Raises:
            SkipRow: a two- or three-dimensional block or grid (the kernels are one-dimensional),
                or CuPy missing for the ``cub`` row.
        """
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        x = inputs["x"]
        if variant.kind == "host":
            return _host_case(problem, x)
        d_x = ctx.upload(x)   # pristine: never written
        if variant.kind == "library":
            return _library_case(d_x, problem)
        if variant.kind != "kernel":
            raise SkipRow(f"reduce has no {variant.kind} rows ({variant.name})")
        ctx.one_dimensional()
        n = problem.dims[0]
        k = ctx.kernel()
        blocks = launch.grid[0]
        d_part = ctx.device.empty((blocks,), x.dtype)
        inplace = bool(variant.param("inplace", True))
        if inplace:
            d_work = ctx.shared("work", lambda: ctx.device.empty(x.shape, x.dtype))
            args = (d_work, d_part, np.uint32(n))
            reset = lambda: d_work.copy_from(d_x)  # noqa: E731  (enqueued before the start event)
        else:
            args = (d_x, d_part, np.uint64(n))
            reset = lambda: None  # noqa: E731  (the input is only read)
        checks = ()
        if not _is_int(problem):  # int32 inputs are exact already (see make_inputs)
            checks = (_exact_check(ctx, problem, k, launch, d_part, d_work if inplace else None),)

        def run() -> None:
            k.launch(launch.grid, launch.block, args, launch.shared)

        def result() -> np.ndarray:
            return finish(problem, d_part.download())

        def to_result():
            run()
            return result()[0].item()

        return Case(
            run=run, result=result, reset=reset, poison=d_part.poison, close=d_part.free, to_result=to_result,
            notes={"blocks": blocks, "registers": k.num_regs, "in_place": inplace},
            repeatable=not inplace, extra_checks=checks,
        )


FAMILY = Reduce()
