"""Every matmul, gemm and gemv variant on a real GPU: verified against float64 NumPy at sizes that
are and are not multiples of the tiles, rectangular shapes and n = 1 (outputs poisoned first)."""

from __future__ import annotations

import pytest

from cudalab import plan as planning
from cudalab.worker import executor as runner
from cudalab.bench import Protocol

pytestmark = pytest.mark.gpu

QUICK = Protocol(warmup=1, min_samples=2, budget_s=0.01)


def run_family(device, family: str, options=(), n: str | None = None, shape: str | None = None, variants=None,
               grid: str | None = None, defines=()):
    req = planning.RunRequest(family=family, variants=variants, n=n, shape=shape, options=tuple(options),
                            roofline=False, protocol=QUICK, seed=1, grid=grid, defines=tuple(defines))
    return {r.variant: r for r in runner.FamilyRun(planning.precheck(req), device).run()}


def assert_rows(rows, skipped=()):
    for name, row in rows.items():
        if name in skipped:
            assert row.status == runner.SKIPPED, f"{name}: expected skipped, got {row.status} {row.reason}"
        elif row.status == runner.SKIPPED:
            # only the library rows may be skipped for want of CuPy
            assert row.kind == "library" and "CuPy" in row.reason, f"{name}: skipped: {row.reason}"
        else:
            assert row.status == runner.PASSED, f"{name}: {row.status} {row.reason}"


@pytest.mark.parametrize("n", ["256", "257", "1000", "1"])
def test_matmul_square(device, n):
    rows = run_family(device, "matmul", (("tile", 32),), n=n)
    assert_rows(rows, skipped=() if n == "256" else ("tiled",))


@pytest.mark.parametrize("shape", ["123x456x78", "512x64x1024", "1x1x1", "129x7x131"])
def test_matmul_rect(device, shape):
    rows = run_family(device, "matmul", (("tile", 32),), shape=shape)
    divisible = all(int(d) % 32 == 0 for d in shape.split("x"))
    assert_rows(rows, skipped=() if divisible else ("tiled",))


def test_matmul_tiled_k_not_multiple_is_skipped(device):
    rows = run_family(device, "matmul", (("tile", 32),), shape="64x48x64", variants="tiled,tiled-any")
    assert rows["tiled"].status == runner.SKIPPED and "multiples of its tile" in rows["tiled"].reason
    assert rows["tiled-any"].status == runner.PASSED


def test_matmul_nine_by_three(device):
    rows = run_family(device, "matmul", (("tile", 3),), n="9", variants="tiled,tiled-any")
    for name in ("tiled", "tiled-any"):
        assert rows[name].status == runner.PASSED, rows[name].reason
        assert rows[name].block == "3x3" and rows[name].grid == "3x3"


# streamk splits K only where there are more tiles than blocks: the sizes above run it data-parallel
# alone. A small --grid (the kernel takes its schedule from gridDim.x) splits tiles on any GPU.
@pytest.mark.parametrize("shape,grid,defines", [
    ("1024x1024x1024", "7", ()),                 # interior tiles, whole slices: the unchecked copies
    ("1000x1025x777", "5", ()),                  # edge tiles, a partial last slice, N % 4 != 0
    ("300x40x600", "7", ()),                     # 3 slices a tile, every tile stream-K: ranges span tiles
    ("300x32x600", "8", (("SK_WAVES", "1"),)),   # 2 stream-K slices on 8 blocks: empty ranges
    ("300x16x600", "7", ()),                     # 1 slice a tile: nothing to split, all data-parallel
    ("2000x1000x3000", None, ()),                # one block an SM: 192 tiles, a partial wave below 192 SMs
])
def test_matmul_streamk(device, shape, grid, defines):
    rows = run_family(device, "matmul", shape=shape, variants="streamk", grid=grid, defines=defines)
    assert rows["streamk"].status == runner.PASSED, rows["streamk"].reason
    if grid:
        assert rows["streamk"].grid == grid


@pytest.mark.parametrize("tile", [8, 16])
def test_matmul_other_tiles(device, tile):
    rows = run_family(device, "matmul", (("tile", tile),), n="100", variants="tiled-any")
    assert rows["tiled-any"].status == runner.PASSED, rows["tiled-any"].reason


@pytest.mark.parametrize("size", [("256", None), ("257", None), ("1", None), (None, "123x456x78"), (None, "512x64x1024")])
@pytest.mark.parametrize("alpha,beta", [(1.5, 0.5), (1.0, 0.0), (-2.0, 1.0)])
def test_gemm(device, size, alpha, beta):
    n, shape = size
    rows = run_family(device, "gemm", (("alpha", alpha), ("beta", beta)), n=n, shape=shape)
    assert_rows(rows)


@pytest.mark.parametrize("shape", ["1000x777", "1024x1024", "1x1", "3x4097", "4097x3"])
@pytest.mark.parametrize("alpha,beta", [(1.5, 0.5), (1.0, 0.0)])
def test_gemv(device, shape, alpha, beta):
    rows = run_family(device, "gemv", (("alpha", alpha), ("beta", beta)), shape=shape)
    assert_rows(rows)


@pytest.mark.parametrize("family,shape,fn", [("gemm", "200x300x100", "gemm"), ("gemv", "300x200", "gemv")])
def test_cublas_rows_call_cublas(device, family, shape, fn):
    """Where CuPy has cupy.cublas.<fn>, the reference row is one cuBLAS call (not matmul + elementwise)."""
    from cudalab.families.product import cublas_function

    if cublas_function(fn) is None:
        pytest.skip(f"this CuPy has no cupy.cublas.{fn}")
    rows = run_family(device, family, (("alpha", 1.5), ("beta", 0.5)), shape=shape, variants="cublas")
    row = rows["cublas"]
    assert row.status == runner.PASSED, row.reason
    assert row.extra["reference"].startswith(f"cupy.cublas.{fn}")
