"""transpose family: out (cols x rows) = in (rows x cols)ᵀ, from naive global access to tiles that match copy.

Sizes, inputs, the exact check and the pitched upload are the matrix helpers copy uses too
(:mod:`cudalab.families.matrix`)."""

from __future__ import annotations

import numpy as np

from cudalab import launch as L
from cudalab.catalog.specs import VariantSpec
from cudalab.families import Case, Check, Size, SetupContext, Work, matrix
from cudalab.families.base import Family


class Transpose(Family):
    """Matrix transpose: the matrix helpers' sizes, inputs and check; its own extent, reference and setup."""

    SIZE_HELP = matrix.SIZE_HELP
    EXTRA_COLUMNS = matrix.EXTRA_COLUMNS
    SIGNATURE = """\
void KERNEL(float *out,        // cols x rows output: out[c * pitch_out + r] = in[r * pitch_in + c]
            const float *in,   // rows x cols input, row-major
            int rows,          // input rows (= output columns)
            int cols,          // input columns (= output rows)
            int pitch_in,      // elements between the starts of two rows of in (>= cols)
            int pitch_out)     // elements between the starts of two rows of out (>= rows)
// grid: tiles of block x per_thread (or tile=) over the input, (cols, rows): blockIdx.x walks its columns"""

    def problem(self, n: str | None, shape: str | None, dtype: str, options: dict) -> Size:
        """``--n N`` (square) or ``--shape RxC``: :func:`cudalab.families.matrix.problem`."""
        return matrix.problem(n, shape, dtype, options)

    def extent(self, problem: Size, variant: VariantSpec) -> L.Dim3:
        """Blocks walk the input: its columns along x, its rows along y."""
        rows, cols = problem.dims
        return (cols, rows, 1)

    def work(self, problem: Size) -> Work:
        """Each element read once and written once."""
        return matrix.work(problem)

    def device_bytes(self, problem: Size) -> int:
        """Input and output, with room for row padding."""
        return matrix.device_bytes(problem)

    def host_bytes(self, problem: Size) -> int:
        """The input and 128 MiB of pinned chunks (:func:`cudalab.families.matrix.host_bytes`)."""
        return matrix.host_bytes(problem)

    def host_seconds(self, problem: Size) -> float:
        """NumPy's strided transpose moves about 0.35 GB/s (5.5-6.7 s at 16384² on an H100 host)."""
        return self.work(problem).bytes / 0.35e9

    def make_inputs(self, problem: Size, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A random matrix in [-1, 1)."""
        return matrix.make_inputs(problem, rng)

    def reference(self, problem: Size, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """NumPy's transpose as a view: the check compares against it in blocks, never materialising it."""
        return inputs["a"].T

    def check(self, problem: Size, result: np.ndarray, ref: np.ndarray) -> Check:
        """Exact, chunk by chunk as the result downloads (:func:`cudalab.families.matrix.check`)."""
        return matrix.check(result, ref)

    def setup(self, ctx: SetupContext) -> Case:
        """Build the case for one transpose variant."""
        variant, launch, problem, inputs = ctx.variant, ctx.launch, ctx.problem, ctx.inputs
        a = inputs["a"]
        if variant.kind == "host":
            return matrix.host_case(lambda x: np.ascontiguousarray(x.T), a)
        rows, cols = problem.dims
        d_in = matrix.upload(ctx, a)
        d_out = ctx.device.empty((cols, rows), a.dtype, pitched=True)
        k = ctx.kernel()
        args = (d_out, d_in, np.int32(rows), np.int32(cols), np.int32(d_in.pitch_elems), np.int32(d_out.pitch_elems))
        return Case(
            run=lambda: k.launch(launch.grid, launch.block, args, launch.shared),
            result=d_out.chunks, poison=d_out.poison, close=d_out.free, padded=(d_out,),
            notes={"pitch": d_in.pitch_elems, "pitch_out": d_out.pitch_elems, "registers": k.num_regs},
        )


FAMILY = Transpose()
