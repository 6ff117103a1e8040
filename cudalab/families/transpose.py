"""transpose family: out (cols x rows) = in (rows x cols)ᵀ, from naive global access to tiles that match copy."""

from __future__ import annotations

import numpy as np

from cudalab import launch as L
from cudalab.catalog import VariantSpec
from cudalab.families import Case, Launch, Problem
from cudalab.families.copy import Copy
from cudalab.families.copy import (  # the matrix helpers are the copy family's
    EXTRA_COLUMNS,
    OPTIONS,
    SIZE_HELP,
    check,
    device_bytes,
    host_case,
    make_inputs,
    matrix_problem,
    upload_matrix,
    work,
)

__all__ = ["EXTRA_COLUMNS", "OPTIONS", "SIZE_HELP", "check", "device_bytes", "make_inputs", "work", "problem", "extent",
           "reference", "setup"]

problem = matrix_problem


def extent(problem: Problem, variant: VariantSpec) -> L.Dim3:
    """Blocks walk the input: its columns along x, its rows along y."""
    rows, cols = problem.dims
    return (cols, rows, 1)


def reference(problem: Problem, inputs: dict[str, np.ndarray]) -> np.ndarray:
    """NumPy's transpose as a view: the check compares against it in blocks, never materialising it."""
    return inputs["a"].T


def setup(ctx, variant: VariantSpec, launch: Launch, problem: Problem, inputs: dict, kernels) -> Case:
    """Build the case for one transpose variant."""
    a = inputs["a"]
    if variant.kind == "host":
        return host_case(lambda x: np.ascontiguousarray(x.T), a)
    rows, cols = problem.dims
    d_in = upload_matrix(ctx, problem, a)
    d_out = ctx.device.empty((cols, rows), a.dtype, pitched=True)
    k = kernels(variant.kernel)
    args = (d_out, d_in, np.int32(rows), np.int32(cols), np.int32(d_in.pitch_elems), np.int32(d_out.pitch_elems))
    return Case(
        run=lambda: k.launch(launch.grid, launch.block, args, launch.shared),
        result=d_out.chunks, poison=d_out.poison, close=d_out.free, padded=(d_out,),
        notes={"pitch": d_in.pitch_elems, "pitch_out": d_out.pitch_elems, "registers": k.num_regs},
    )


SIGNATURE = """\
void KERNEL(float *out,        // cols x rows output: out[c * pitch_out + r] = in[r * pitch_in + c]
            const float *in,   // rows x cols input, row-major
            int rows,          // input rows (= output columns)
            int cols,          // input columns (= output rows)
            int pitch_in,      // elements between the starts of two rows of in (>= cols)
            int pitch_out)     // elements between the starts of two rows of out (>= rows)
// grid: tiles of block x per_thread (or tile=) over the input, (cols, rows): blockIdx.x walks its columns"""

class Transpose(Copy):
    """Matrix transpose: the copy family's sizes, inputs and check, its own extent, reference and setup."""

    SIGNATURE = SIGNATURE

    def host_seconds(self, problem: Problem) -> float:
        """NumPy's strided transpose moves about 0.35 GB/s (5.5-6.7 s at 16384² on an H100 host)."""
        return self.work(problem).bytes / 0.35e9

    extent = staticmethod(extent)
    reference = staticmethod(reference)
    setup = staticmethod(setup)


FAMILY = Transpose()
