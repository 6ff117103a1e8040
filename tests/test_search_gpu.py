"""search on a real GPU: every variant, both dtypes, keys present and absent, sizes from 1 to past
several blocks (multiples of all's 2048-element chunk and not), more queries than keys."""

from __future__ import annotations

import pytest

from cudalab import catalog
from cudalab.worker import executor as runner
from gpu_util import FAST, assert_all_passed, run_rows

pytestmark = pytest.mark.gpu

SPEC = catalog.family("search")
DTYPES = ("int32", "float32")
SIZES = (1, 2, 33, 2048, 3001, 2048 * 37, 1000003, 2**22)
SEED = 4321


def _rows(device, n, dtype="int32", key="present", queries=0, **kw):
    return run_rows(device, "search", n=str(n), dtype=dtype, options=(("key", key), ("queries", queries)),
                    seed=SEED, **kw)


@pytest.mark.parametrize("key", ["present", "absent"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_every_variant(device, n, dtype, key):
    rows = _rows(device, n, dtype, key)
    assert list(rows) == SPEC.names()
    assert_all_passed(rows)
    # linear: -1 exactly when the key is absent; all: no hits then, at least one otherwise.
    assert (rows["linear"].extra["found"] == -1) == (key == "absent")
    assert (rows["all"].extra["found"] == 0) == (key == "absent")
    assert rows["linear"].extra["found"] == rows["host-linear"].extra["found"]
    assert rows["all"].extra["found"] == rows["host-all"].extra["found"]
    assert all(r.extra.get("rate", 0) > 0 for r in rows.values())


@pytest.mark.parametrize("queries", [1, 7, 3 * 100003 + 1])
def test_binary_query_counts(device, queries):
    rows = _rows(device, 100003, "float32", queries=queries, variants="host-binary,binary")
    assert_all_passed(rows)


@pytest.mark.parametrize("block", ["64", "1024"])
def test_block_sizes(device, block):
    rows = _rows(device, 1000003, "int32", block=block, variants="linear,all,binary")
    assert_all_passed(rows)
    assert all(r.block == block for r in rows.values())


@pytest.mark.parametrize("grid", ["1", "7"])
def test_linear_any_grid(device, grid):
    # Grid-stride: one block, or a handful, still covers the array.
    rows = _rows(device, 1000003, "int32", grid=grid, variants="linear")
    assert_all_passed(rows)


def test_all_refuses_a_grid_that_does_not_cover(device):
    # all is not grid-stride: a grid short of the array becomes a Skipped row naming the rule.
    rows = _rows(device, 100003, "int32", grid="2", variants="linear,all")
    assert rows["linear"].status == runner.PASSED, rows["linear"].reason
    assert rows["all"].status == runner.SKIPPED and rows["all"].reason


def test_fast_protocol_is_fast():
    assert FAST.budget_s <= 0.05
