"""copy family: matrix copy, the roofline of every matrix operation: its memcpy_dtod row and its kernel
marked ``params.roofline = true`` are what :func:`cudalab.worker.executor.measure_roofline` measures."""

from __future__ import annotations

import numpy as np

from cudalab import launch as L
from cudalab import roofline
from cudalab.catalog.specs import VariantSpec
from cudalab.families import Case, Check, Size, SetupContext, Work, matrix
from cudalab.families.base import Family
from cudalab.records.results import Roofline


class Copy(Family):
    """Matrix copy: the roofline of every matrix operation."""

    SIZE_HELP = matrix.SIZE_HELP
    EXTRA_COLUMNS = matrix.EXTRA_COLUMNS
    SIGNATURE = """\
void KERNEL(float *out,        // rows x cols output, row-major, rows `pitch` elements apart: out = in
            const float *in,   // rows x cols input, the same layout
            int rows,          // matrix rows
            int cols,          // matrix columns
            int pitch)         // elements between the starts of two rows of in and of out (>= cols)
// grid: tiles of block x per_thread over (cols, rows): x along a row, y down the columns
// (grid=sm:K: a 1-D grid-stride kernel over rows x cols elements)"""

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """``--n N`` (square) or ``--shape RxC``: :func:`cudalab.families.matrix.problem`."""
        return matrix.problem(n, shape, dtype, options)

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """Columns along x and rows along y; grid-stride kernels cover the flat matrix along x."""
        rows, cols = problem.dims
        return (rows * cols, 1, 1) if variant.grid_stride else (cols, rows, 1)

    def work(self, problem: Size) -> Work:
        """Each element read once and written once."""
        return matrix.work(problem)

    def device_bytes(self, problem: Size) -> int:
        """Input and output, with room for row padding."""
        return matrix.device_bytes(problem)

    def host_bytes(self, problem: Size) -> int:
        """The input and 128 MiB of pinned chunks (:func:`cudalab.families.matrix.host_bytes`)."""
        return matrix.host_bytes(problem)

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A random matrix in [-1, 1)."""
        return matrix.make_inputs(problem, rng)

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The copy is the input itself."""
        return inputs["a"]

    def check(self, problem: Size, result: np.ndarray, ref: np.ndarray) -> Check:
        """Exact, chunk by chunk as the result downloads (:func:`cudalab.families.matrix.check`)."""
        return matrix.check(result, ref)

    def setup(self, ctx: SetupContext) -> Case:
        """Build the case for one copy variant."""
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        a = inputs["a"]
        if variant.kind == "host":
            return matrix.host_case(np.copy, a)
        d_in = matrix.upload(ctx, a)
        d_out = ctx.device.empty(a.shape, a.dtype, pitched=True)
        notes = {"pitch": d_in.pitch_elems}
        padded: tuple = ()
        if variant.kind == "driver":  # copies whole pitched rows, padding too, by design
            run = lambda: ctx.device.memcpy_dtod(d_out, d_in, d_in.nbytes)  # noqa: E731
        else:
            padded = (d_out,)  # a kernel must leave the row padding alone
            k = ctx.kernel()
            rows, cols = problem.dims
            args = (d_out, d_in, np.int32(rows), np.int32(cols), np.int32(d_in.pitch_elems))
            run = lambda: k.launch(launch.grid, launch.block, args, launch.shared)  # noqa: E731
            notes["registers"] = k.num_regs
        return Case(run=run, result=d_out.chunks, poison=d_out.poison, close=d_out.free, notes=notes, padded=padded)

    def own_roofline(self, problem: Size, results) -> Roofline | None:
        """A copy run that measured memcpy_dtod and the roofline kernel on its own matrix has its
        roofline (:func:`cudalab.roofline.from_rows`)."""
        return roofline.from_rows(results)


FAMILY = Copy()
