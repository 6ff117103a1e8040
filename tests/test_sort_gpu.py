"""sort on a real GPU: every variant, both dtypes, all four inputs, sizes from 1 to 2^22 + 5 that are
and are not multiples of the tiles (bitonic 8192, onesweep 6144, radix 4096, merge-rank 1024) and not
powers of two; the stability payload is checked where claimed; radix on the extremes of both key types (signs, ±0,
±inf, INT_MIN / INT_MAX) and on keys that differ in one digit only."""

from __future__ import annotations

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import catalog, report
from cudalab.worker import executor as runner
from cudalab.families import load
from gpu_util import FAST, assert_all_passed, run_rows

pytestmark = pytest.mark.gpu

SPEC = catalog.family("sort")
DTYPES = ("int32", "float32")
INPUTS = ("random", "dups", "sorted", "reverse")
SIZES = (1, 2, 1000, 1024, 8192, 8193, 100003, 2**20, 2**22 + 5)
SEED = 2468


def _rows(device, n, dtype="int32", kind="random", **kw):
    return run_rows(device, "sort", n=str(n), dtype=dtype, options=(("input", kind),), seed=SEED, **kw)


def _passed_or_no_cupy(rows):
    for name, r in rows.items():
        if r.status == runner.SKIPPED:
            assert r.kind == "library" and "CuPy" in r.reason, (name, r.reason)
    assert_all_passed(rows, allow_skipped=True)


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_every_variant(device, n, dtype, kind):
    rows = _rows(device, n, dtype, kind)
    assert list(rows) == SPEC.names()
    _passed_or_no_cupy(rows)
    assert all(r.extra.get("rate", 0) > 0 for r in rows.values() if r.status == runner.PASSED)


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_sizes(device, dtype):
    for n, kind in ((2**24, "random"), (2**26, "dups"), (2**24 + 12345, "reverse")):
        _passed_or_no_cupy(_rows(device, n, dtype, kind, variants="bitonic,merge-rank,radix,cupy"))


def test_merge_rank_returns_the_stable_order(device):
    # The check compares merge-rank's payload with NumPy's stable argsort: make sure it is there.
    req = planning.RunRequest(family="sort", variants="merge-rank", n="100003", options=(("input", "dups"),),
                            roofline=False, protocol=FAST, seed=SEED, keep_outputs=True)
    fr = runner.FamilyRun(planning.precheck(req), device)
    rows = fr.run()
    assert rows[0].status == runner.PASSED, rows[0].reason
    out = fr.outputs["merge-rank"]
    assert out.order is not None
    assert np.array_equal(out.order, np.argsort(fr.inputs["x"], kind="stable"))


def _radix_on(device, x, **kw):
    req = planning.RunRequest(family="sort", variants="radix", n=str(x.size), dtype=x.dtype.name, roofline=False,
                            protocol=FAST, seed=SEED, keep_outputs=True, **kw)
    fr = runner.FamilyRun(planning.precheck(req), device, inputs={"x": x})
    rows = fr.run()
    assert rows[0].status == runner.PASSED, rows[0].reason
    return fr.outputs["radix"].keys


EXTREMES = {
    "float32": np.array([np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 1e-45, -1e-45, 3.4028235e38, -3.4028235e38,
                         1e-38, -1e-38, 2.0, -2.0], np.float32),
    "int32": np.array([-2**31, 2**31 - 1, -1, 0, 1, -2, 2, 0x0F0F0F0F, -0x0F0F0F0F, 0x70000000, -0x70000000,
                       0xF, -0xF, 0x10, -0x10], np.int32),
}


@pytest.mark.parametrize("n", [1, 15, 4096 * 3 + 17, 100003])
@pytest.mark.parametrize("dtype", DTYPES)
def test_radix_extremes(device, dtype, n):
    rng = np.random.default_rng(n)
    special = EXTREMES[dtype]
    wide = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)).astype(np.float32) if dtype == "float32" \
        else rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    x = np.where(rng.random(n) < 0.3, rng.choice(special, n), wide).astype(dtype)
    keys = _radix_on(device, x)
    if dtype == "float32":                              # -0.0 sorts just before +0.0 (NumPy treats them as equal)
        zeros = keys[keys == 0]
        assert np.all(np.signbit(zeros[:np.count_nonzero(np.signbit(zeros))]))


@pytest.mark.parametrize("digit", range(8))
def test_radix_keys_that_differ_in_one_digit(device, digit):
    # Every pass but one puts all keys in one bucket: the passes after the deciding one must keep the
    # order they are given (stability that a keys-only check can see), the deciding one must bucket
    # right; digit 7 carries the sign.
    rng = np.random.default_rng(digit)
    n = 4096 * 5 + 123
    x = ((rng.integers(0, 16, n, dtype=np.int64) << (4 * digit)) ^ 0x5A5A5A5A).astype(np.uint32).view(np.int32)
    _radix_on(device, x)
    _radix_on(device, (np.arange(n) % 16 << (4 * digit)).astype(np.uint32).view(np.int32), block="128")


@pytest.mark.parametrize("block", ["128", "512"])
def test_block_sizes(device, block):
    rows = _rows(device, 100003, "int32", "dups", block=block, variants="bitonic,merge-rank,radix")
    assert_all_passed(rows)
    assert all(r.block == block for r in rows.values())


def test_percent_of_cupy(device):
    rows = _rows(device, 2**20, "int32", variants="bitonic,cupy")
    if rows["cupy"].status == runner.SKIPPED:
        pytest.skip(rows["cupy"].reason)
    out = {r.variant: r for r in report.pct_column(list(rows.values()), "rate")}
    assert out["cupy"].pct_roofline == pytest.approx(100.0)
    assert out["bitonic"].pct_roofline > 0


def test_module_loads():
    assert load("sort").EXTRA_COLUMNS
