"""copy family: matrix copy, the roofline of every matrix operation; also the matrix helpers
(sizes, inputs, pitched uploads) that the transpose family shares."""

from __future__ import annotations

import numpy as np

from cudalab import hostwork
from cudalab import launch as L
from cudalab.catalog import VariantSpec, family
from cudalab.errors import UsageError
from cudalab.families import Case, Check, FamilyOption, Launch, Problem, Work
from cudalab.families.base import Family
from cudalab.results import PASSED, Roofline

OPTIONS: tuple[FamilyOption, ...] = ()
EXTRA_COLUMNS = (("pitch", "pitch"), ("registers", "regs"))
SIZE_HELP = "square matrix side (--n 16k) or --shape ROWSxCOLS; default 16384 (1 GiB of float32)"
DEFAULT_N = 16384


def matrix_problem(n: str | None, shape: str | None, dtype: str, options: dict) -> Problem:
    """Parse ``--n N`` (square) or ``--shape RxC`` into (rows, cols)."""
    if n and shape:
        raise UsageError("give --n or --shape, not both")
    dims = L.parse_shape(shape, 2) if shape else (L.parse_size(n, "--n"),) * 2 if n else (DEFAULT_N, DEFAULT_N)
    if max(dims) > 2**31 - 1024:
        raise UsageError(f"matrix {dims[0]}x{dims[1]}: each side must be below 2^31 (the kernels take int rows and cols)")
    if dims[0] * dims[1] >= 2**31 * 4:
        raise UsageError(f"matrix {dims[0]}x{dims[1]} has more elements than the kernels index (2^33)")
    return Problem(dims=tuple(dims), dtype=dtype, options=tuple(sorted(options.items())))


problem = matrix_problem


def extent(problem: Problem, variant: VariantSpec) -> L.Dim3:
    """Columns along x and rows along y; grid-stride kernels cover the flat matrix along x."""
    rows, cols = problem.dims
    return (rows * cols, 1, 1) if variant.grid_stride else (cols, rows, 1)


def work(problem: Problem) -> Work:
    """Each element read once and written once."""
    rows, cols = problem.dims
    return Work(bytes=2 * rows * cols * problem.np_dtype.itemsize)


def device_bytes(problem: Problem) -> int:
    """Input and output, with room for row padding."""
    rows, cols = problem.dims
    return 2 * rows * (cols + 128) * problem.np_dtype.itemsize


def make_inputs(problem: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A random matrix in [-1, 1): distinct values, so a misplaced element shows."""
    return {"a": hostwork.uniform(rng, problem.dims, problem.np_dtype)}


def reference(problem: Problem, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The copy is the input itself."""
    return inputs["a"]


def check(problem: Problem, result: np.ndarray | hostwork.RowChunks, ref: np.ndarray) -> Check:
    """Moves must be exact: bit for bit, in blocks across threads, chunk by chunk as the result
    downloads (``ref`` may be a transposed view, never copied); the message names the first wrong
    element and how many were never written (still the poison)."""
    try:
        d = hostwork.exact_diff(result, ref)
    except ValueError as exc:
        return Check(False, float("inf"), 0.0, f" ({exc})")
    if d.first is None:
        return Check(True, 0.0, 0.0)
    where = f"row {d.first[0]}, column {d.first[1]}" if len(d.first) == 2 else f"element {d.first}"
    parts = []
    if d.unwritten:
        parts.append(f"{d.unwritten} elements unwritten")
    if d.wrong - d.unwritten:
        parts.append(f"{d.wrong - d.unwritten} wrong")
    err = float("nan") if d.unwritten and not d.max_error else d.max_error
    return Check(False, err, 0.0, f" ({', '.join(parts)}; first at {where}: got {d.got}, expected {d.want})")


def upload_matrix(ctx, problem: Problem, a: np.ndarray):
    """Upload the input once per run, pitched as the seed kernels expect (shared by variants)."""
    return ctx.upload(a, pitched=True)


def host_case(fn, a: np.ndarray) -> Case:
    """A NumPy row: ``fn(a)`` timed with the host clock."""
    box: dict[str, np.ndarray] = {}

    def run() -> None:
        box["out"] = fn(a)

    return Case(run=run, result=lambda: box["out"], timer="host")


def setup(ctx, variant: VariantSpec, launch: Launch, problem: Problem, inputs: dict, kernels) -> Case:
    """Build the case for one copy variant."""
    a = inputs["a"]
    if variant.kind == "host":
        return host_case(np.copy, a)
    d_in = upload_matrix(ctx, problem, a)
    d_out = ctx.device.empty(a.shape, a.dtype, pitched=True)
    notes = {"pitch": d_in.pitch_elems}
    padded: tuple = ()
    if variant.kind == "driver":  # copies whole pitched rows, padding too, by design
        run = lambda: ctx.device.memcpy_dtod(d_out, d_in, d_in.nbytes)  # noqa: E731
    else:
        padded = (d_out,)  # a kernel must leave the row padding alone
        k = kernels(variant.kernel)
        rows, cols = problem.dims
        args = (d_out, d_in, np.int32(rows), np.int32(cols), np.int32(d_in.pitch_elems))
        run = lambda: k.launch(launch.grid, launch.block, args, launch.shared)  # noqa: E731
        notes["registers"] = k.num_regs
    return Case(run=run, result=d_out.chunks, poison=d_out.poison, close=d_out.free, notes=notes, padded=padded)


def roofline_variant() -> VariantSpec:
    """The copy kernel marked ``roofline = true`` in family.toml (the best one)."""
    for v in family("copy").variants:
        if v.param("roofline"):
            return v
    raise UsageError("the copy family marks no variant with params.roofline = true")


SIGNATURE = """\
void KERNEL(float *out,        // rows x cols output, row-major, rows `pitch` elements apart: out = in
            const float *in,   // rows x cols input, the same layout
            int rows,          // matrix rows
            int cols,          // matrix columns
            int pitch)         // elements between the starts of two rows of in and of out (>= cols)
// grid: tiles of block x per_thread over (cols, rows): x along a row, y down the columns
// (grid=sm:K: a 1-D grid-stride kernel over rows x cols elements)"""

class Copy(Family):
    """Matrix copy: the roofline of every matrix operation."""

    SIGNATURE = SIGNATURE

    def host_bytes(self, problem: Problem) -> int:
        """The input, and 128 MiB of pinned chunks: results are verified as they download, the
        reference is the input itself (copy) or a view of it (transpose)."""
        rows, cols = problem.dims
        return rows * cols * problem.np_dtype.itemsize + (128 << 20)

    def own_roofline(self, problem: Problem, results) -> Roofline | None:
        """A copy run that measured memcpy_dtod and the roofline kernel on its own matrix has its roofline."""
        rows = {r.variant: r for r in results if r.status == PASSED and r.gbs}
        dtod, best = rows.get("memcpy_dtod"), rows.get(roofline_variant().name)
        if type(self) is not Copy or dtod is None or best is None:  # transpose inherits: its rows are no copies
            return None
        if best.gbs > dtod.gbs:
            return Roofline(gbs=best.gbs, source=f"copy {best.variant}", dtod_gbs=dtod.gbs, kernel_gbs=best.gbs)
        return Roofline(gbs=dtod.gbs, source="memcpy_dtod", dtod_gbs=dtod.gbs, kernel_gbs=best.gbs)

    OPTIONS = OPTIONS
    SIZE_HELP = SIZE_HELP
    EXTRA_COLUMNS = EXTRA_COLUMNS
    problem = staticmethod(problem)
    extent = staticmethod(extent)
    work = staticmethod(work)
    device_bytes = staticmethod(device_bytes)
    make_inputs = staticmethod(make_inputs)
    reference = staticmethod(reference)
    check = staticmethod(check)
    setup = staticmethod(setup)


FAMILY = Copy()
