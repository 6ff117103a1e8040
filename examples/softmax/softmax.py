"""Row-wise softmax: y = exp(x - max(row)) / sum(exp(x - max(row))), float32 rows x cols."""

import numpy as np

from cudalab import Output, Problem, Tolerance, Work


def inputs(size, rng):
    """Normal values with spread 4: each row's max matters (exp of raw values would overflow)."""
    x = rng.standard_normal((size.rows, size.cols), dtype=np.float32)
    x *= 4
    return {"x": x}


def reference(size, inputs):
    """The softmax in float64."""
    x = inputs["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def extent(size, variant):
    """A warp a row: 32 lanes along x, rows along y; a block a row: one tile along x, rows along y."""
    return (32, size.rows) if variant.param("warp_per_row") else (1, size.rows)


PROBLEM = Problem(
    dims=("rows", "cols"),
    default=(16384, 4096),
    inputs=inputs,
    outputs=(Output("y", lambda s: (s.rows, s.cols)),),
    args=("y", "x", "rows", "cols"),
    reference=reference,
    check=Tolerance(rtol=1e-4, atol=1e-9),
    work=lambda s: Work(bytes=2 * s.rows * s.cols * 4, written=s.rows * s.cols * 4),  # x read once, y written once
    extent=extent,
)
