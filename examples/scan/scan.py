"""Inclusive prefix sum of int32, checked bit for bit (int32 wraps as NumPy's does)."""

import numpy as np

from cudalab import Library, Output, Problem, Scratch, Work


def three_kernels(ctx):
    """reduce-then-scan launches three kernels a run; the other variants the plain one."""
    if not ctx.variant.param("kernels"):
        return ctx.default()
    reduce_, sums, apply_ = ctx.kernel("scan_reduce"), ctx.kernel("scan_sums"), ctx.kernel("scan_apply")
    x, y, s, n = ctx.args("x", "y", "sums", "n")
    tiles = np.int32(ctx.grid[0])

    def run():
        reduce_.launch(ctx.grid, ctx.block, (x, s, n))
        sums.launch((1, 1, 1), (1024, 1, 1), (s, tiles))
        apply_.launch(ctx.grid, ctx.block, (y, x, s, n))
    return run


def cupy_cumsum(size, arrays):
    import cupy

    cupy.cumsum(cupy.asarray(arrays["x"]), dtype=cupy.int32, out=cupy.asarray(arrays["y"]))


PROBLEM = Problem(
    dims=("n",),
    default=1 << 26,
    inputs=lambda size, rng: {"x": rng.integers(-100, 100, size.n, dtype=np.int32)},
    outputs=(Output("y", lambda s: (s.n,)),),
    scratch=(Scratch("status", lambda s, launch: (launch.grid[0],), "uint64", zero=True),
             Scratch("counter", lambda s, launch: (1,), "int32", zero=True),
             Scratch("sums", lambda s, launch: (launch.grid[0],), "int32")),
    args=("y", "x", "status", "counter", "n"),
    reference=lambda size, inputs: np.cumsum(inputs["x"], dtype=np.int32),
    check="exact",
    work=lambda s: Work(bytes=2 * s.n * 4, written=s.n * 4),  # x read once, y written once
    launch=three_kernels,
    libraries=(Library("cupy", cupy_cumsum, "cupy.cumsum (CUB)"),),
    dtypes=("int32",),
)
