"""Five-point Jacobi step: out = mean of the four neighbours inside, the border copied."""

import numpy as np

from cudalab import Output, Problem, Tolerance, Work


def reference(size, inputs):
    a = inputs["a"].astype(np.float64)
    out = a.copy()
    out[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    return out


PROBLEM = Problem(
    dims=("rows", "cols"),
    default=(8192, 8192),
    inputs=lambda size, rng: {"a": rng.standard_normal((size.rows, size.cols), dtype=np.float32)},
    outputs=(Output("out", lambda s: (s.rows, s.cols)),),
    args=("out", "a", "rows", "cols"),
    reference=reference,
    check=Tolerance(rtol=1e-6, atol=1e-6),
    work=lambda s: Work(bytes=2 * s.rows * s.cols * 4),  # a read once, out written once
    extent=lambda size, variant: (size.cols, size.rows),
)
