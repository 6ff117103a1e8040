"""sort on a real GPU: every variant, both dtypes, all four inputs, sizes from 1 to 2^22 + 5 that are
and are not multiples of the tiles (bitonic 8192, merge-rank 1024) and not powers of two; the
stability payload is checked where claimed."""

from __future__ import annotations

import numpy as np
import pytest

from cudalab import catalog, report, runner
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
        _passed_or_no_cupy(_rows(device, n, dtype, kind, variants="bitonic,merge-rank,cupy"))


def test_merge_rank_returns_the_stable_order(device):
    # The check compares merge-rank's payload with NumPy's stable argsort: make sure it is there.
    req = runner.RunRequest(family="sort", variants="merge-rank", n="100003", options=(("input", "dups"),),
                            roofline=False, protocol=FAST, seed=SEED, keep_outputs=True)
    fr = runner.FamilyRun(req, device)
    rows = fr.run()
    assert rows[0].status == runner.PASSED, rows[0].reason
    out = fr.outputs["merge-rank"]
    assert out.order is not None
    assert np.array_equal(out.order, np.argsort(fr.inputs["x"], kind="stable"))


@pytest.mark.parametrize("block", ["128", "512"])
def test_block_sizes(device, block):
    rows = _rows(device, 100003, "int32", "dups", block=block, variants="bitonic,merge-rank")
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
