"""256-bin histogram of uniformly random bytes, counts as uint32, checked exactly."""

import numpy as np

from cudalab import Library, Output, Problem, Work


def cupy_bincount(size, arrays):
    import cupy

    return cupy.bincount(cupy.asarray(arrays["data"]), minlength=256).astype(cupy.uint32)


PROBLEM = Problem(
    dims=("n",),
    default=1 << 26,
    inputs=lambda size, rng: {"data": rng.integers(0, 256, size.n, dtype=np.uint8)},
    outputs=(Output("bins", lambda s: (256,), "uint32", accumulate=True),),  # zeroed before each launch
    args=("bins", "data", "n"),
    reference=lambda size, inputs: np.bincount(inputs["data"], minlength=256).astype(np.uint32),
    check="exact",
    work=lambda s: Work(bytes=s.n + 256 * 4, written=256 * 4),  # every byte read once, the bins written
    libraries=(Library("cupy", cupy_bincount, "cupy.bincount"),),
    dtypes=("uint8",),
    input_dtypes={"data": "uint8"},
)
