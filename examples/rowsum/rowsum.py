"""Row sums of a float32 rows x cols matrix of small integers: every sum is exact in float32, in any
order, so the check is bit for bit and one dropped element shows."""

import numpy as np

from cudalab import Library, Output, Problem, Work

EXACT_COLS = 2**24 // 15  # 15 x cols below 2^24: each row's sum is an integer float32 holds exactly


def inputs(size, rng):
    """Integers 0..15 as float32 (drawn as uint8: a quarter of the random bytes)."""
    return {"x": rng.integers(0, 16, (size.rows, size.cols), dtype=np.uint8).astype(np.float32)}


def reference(size, inputs):
    """The row sums, added in float64 and given as the output's float32 (exact for these inputs: the check
    compares bit for bit, so the reference has the output's type)."""
    return inputs["x"].sum(axis=1, dtype=np.float64).astype(np.float32)


def extent(size, variant):
    """What the grid covers: a warp a row is 32 lanes along x and the rows along y; else a thread a row."""
    return (32, size.rows) if variant.param("warp_per_row") else (size.rows,)


def validate(size):
    """Refuse rows whose sums float32 cannot hold exactly (the check would be wrong, not the kernel)."""
    if size.cols > EXACT_COLS:
        raise ValueError(f"rowsum: cols up to {EXACT_COLS:,} keep every sum exact in float32 (got {size.cols:,})")


def cupy_rowsum(size, arrays):
    """The library row: CuPy's reduction on the device arrays (its answer is copied back and checked)."""
    import cupy

    return cupy.asarray(arrays["x"]).sum(axis=1)


PROBLEM = Problem(
    dims=("rows", "cols"),
    default=(16384, 1024),
    size_help="--shape ROWSxCOLS (default 16384x1024) or --n N for N x N; cols up to 1,118,481",
    inputs=inputs,
    outputs=(Output("y", lambda s: (s.rows,)),),
    args=("y", "x", "rows", "cols"),
    reference=reference,
    check="exact",
    work=lambda s: Work(bytes=4 * s.rows * s.cols + 4 * s.rows, written=4 * s.rows),  # x read once, y written once
    extent=extent,
    validate=validate,
    libraries=(Library("cupy", cupy_rowsum, "cupy.sum(axis=1)"),),
)
