"""copy family: matrix copy, the roofline of every matrix operation; also the matrix helpers
(sizes, inputs, pitched uploads) that the transpose family shares."""

from __future__ import annotations

import numpy as np

from cudalab import launch as L
from cudalab.catalog import VariantSpec, family
from cudalab.errors import UsageError
from cudalab.families import Case, Check, FamilyOption, Launch, Problem, Work, compare
from cudalab.families.base import Family

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
    rows, cols = problem.dims
    return {"a": rng.uniform(-1.0, 1.0, size=(rows, cols)).astype(problem.np_dtype)}


def reference(problem: Problem, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The copy is the input itself."""
    return inputs["a"]


def check(problem: Problem, result: np.ndarray, ref: np.ndarray) -> Check:
    """Moves must be exact: compare bit for bit first, fall back to the error for the message."""
    if result.shape == ref.shape and np.array_equal(result, ref):
        return Check(True, 0.0, 0.0)
    return compare(result, ref, tolerance=0.0)


def upload_matrix(ctx, problem: Problem, a: np.ndarray):
    """Upload the input once per run, pitched as the seed kernels expect (shared by variants)."""
    return ctx.shared("a", lambda: ctx.device.to_device(a, pitched=True))


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
    return Case(run=run, result=d_out.download, poison=d_out.poison, close=d_out.free, notes=notes, padded=padded)


def roofline_variant() -> VariantSpec:
    """The copy kernel marked ``roofline = true`` in family.toml (the best one)."""
    for v in family("copy").variants:
        if v.param("roofline"):
            return v
    raise UsageError("the copy family marks no variant with params.roofline = true")


class Copy(Family):
    """Matrix copy: the roofline of every matrix operation."""

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
