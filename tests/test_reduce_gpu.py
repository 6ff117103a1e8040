"""reduce on a real GPU: every variant, three dtypes, sizes that are and are not multiples of the tile."""

from __future__ import annotations

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import catalog
from cudalab.worker import executor as runner
from cudalab.bench import Protocol
from cudalab.families import load

pytestmark = pytest.mark.gpu

FAST = Protocol(warmup=1, min_samples=2, budget_s=0.01)
DTYPES = ("int32", "float32", "float64")
TILE8 = 8 * 512
SIZES = (
    2**20,          # a power of two: every variant runs
    TILE8 * 37,     # a multiple of 8 x 512 but not a power of two
    1000003,        # prime: only the variants that handle tails run, the others are refused
    5,              # shorter than a warp: one partly filled block
)
SEED = 1234


def _run(device, dtype: str, n: int, block: str | None = None, variants: str | None = None):
    req = planning.RunRequest(family="reduce", n=str(n), dtype=dtype, block=block, variants=variants,
                            roofline=False, protocol=FAST, seed=SEED)
    fr = runner.FamilyRun(planning.precheck(req), device)
    return fr, fr.run()


def _reference(fr) -> np.ndarray:
    """The reference of the inputs the run drew (it keeps them)."""
    return fr.family.reference(fr.problem, fr.inputs)


def _assert_rows(fr, rows, n: int, tile_of) -> None:
    spec = catalog.family("reduce")
    assert [r.variant for r in rows] == spec.names()
    ref = _reference(fr)
    failures = []
    for r in rows:
        v = spec.variant(r.variant)
        if r.status == runner.SKIPPED:
            if v.kind == "library" and "CuPy" in r.reason:
                continue
            # Only the variants that need a multiple of their tile may be skipped, and the reason names the rule.
            assert v.divisible and n % tile_of(v), f"{r.variant} skipped: {r.reason}"
            assert "multiples of its tile" in r.reason
            continue
        if v.divisible:
            assert n % tile_of(v) == 0
        if r.status != runner.PASSED:
            failures.append(f"{r.variant} ({'legacy' if r.legacy else 'correct'}): {r.status} {r.reason}")
            continue
        # The time-to-result runs repeat the launch several times: each must start from the restored input.
        value = r.extra.get("value")
        assert value is not None, r.variant
        got = fr.family.check(fr.problem, np.array([value]).astype(fr.problem.np_dtype), ref)
        assert got.ok, f"{r.variant}: time-to-result value {value} vs {ref[0]} ({got})"
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_every_variant(device, dtype, n):
    fr, rows = _run(device, dtype, n)
    _assert_rows(fr, rows, n, lambda v: 512 * v.per_thread[0])


@pytest.mark.parametrize("block", [64, 128, 256, 1024])
@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_block_sweep(device, block, dtype):
    n = 2**20 + 8 * 1024 * 3   # a multiple of 8 x every block size, not a power of two
    fr, rows = _run(device, dtype, n, block=str(block))
    _assert_rows(fr, rows, n, lambda v: block * v.per_thread[0])
    assert all(r.block == str(block) for r in rows if r.kind == "kernel")


def test_block_sweep_tail(device):
    # Tails with other block sizes, for the variants that handle them.
    for block in (128, 1024):
        fr, rows = _run(device, "int32", 999_999, block=str(block), variants="neighbored,neighbored-less,interleaved,modern")
        assert all(r.status == runner.PASSED for r in rows), [(r.variant, r.status, r.reason) for r in rows]


def test_modern_is_deterministic(device):
    values = [_run(device, "float32", 3_000_001, variants="modern")[1][0].extra["value"] for _ in range(2)]
    assert values[0] == values[1]


def test_modern_any_grid(device):
    # Grid-stride: any --grid covers the array, including a single block.
    for grid in ("1", "7", "1000"):
        req = planning.RunRequest(family="reduce", variants="modern", n="1000003", dtype="float64", grid=grid,
                                roofline=False, protocol=FAST, seed=SEED)
        rows = runner.FamilyRun(planning.precheck(req), device).run()
        assert rows[0].status == runner.PASSED, (grid, rows[0].reason)
        assert rows[0].extra["blocks"] == int(grid)


def test_divisible_variants_refuse_tails_by_name(device):
    # Beside a variant that takes the size, the refused ones become Skipped rows naming the rule.
    fr, rows = _run(device, "float64", 4097, variants="interleaved,unrolling2,unrolling8,complete-unroll")
    assert [r.status for r in rows] == [runner.PASSED] + [runner.SKIPPED] * 3
    assert all("multiples of its tile" in r.reason for r in rows[1:])


def test_module_loads():
    assert load("reduce").EXTRA_COLUMNS
