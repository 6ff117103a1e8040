"""The sketch check of products too large for a float64 reference on the host (CPU only).

Each wrong result here is a kernel bug in miniature; the sketch must call every one of them wrong,
and pass the float32 product itself. FULL_LIMIT is lowered so that small matrices are sketched.
"""

from __future__ import annotations

import numpy as np
import pytest

from cudalab import memplan
from cudalab.families import load
from cudalab.families import product as prod
from cudalab.families import matmul_sketch as sketch

M, K, N = 700, 900, 650


@pytest.fixture(scope="module")
def product():
    rng = np.random.default_rng(7)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return a, b, (a @ b).astype(np.float32), float(np.sqrt(np.mean(ref * ref)))


@pytest.fixture
def sketched(monkeypatch):
    monkeypatch.setattr(sketch, "FULL_LIMIT", 1000)
    monkeypatch.setattr(sketch, "BLOCK_ROWS", 128)   # several blocks, a ragged last one


def judge(a, b, c):
    fam = load("matmul")
    p = fam.problem(None, f"{M}x{K}x{N}", "float32", {})
    ref = fam.reference(p, {"a": a, "b": b})
    assert isinstance(ref, sketch.Sketch)
    return fam.check(p, c, ref)


def test_the_float32_product_passes(sketched, product):
    a, b, c, _ = product
    chk = judge(a, b, c)
    assert chk.ok, chk
    assert 0 < chk.max_error < chk.tolerance


def _mutants(c, rms):
    def elem(x):
        x[401, 333] += 0.05 * rms                    # one element outside the samples, slightly off
    def last_col(x):
        x[:, -1] = 0
    def last_row(x):
        x[-1] = 0
    def row(x):
        x[317] *= 1.01
    def col(x):
        x[:, 222] = x[:, 221]
    def tile(x):
        x[64:96, 96:128] += 0.02 * rms
    def nan(x):
        x[500, 17] = np.nan
    def swap(x):
        x[[10, 11]] = x[[11, 10]]
    return [elem, last_col, last_row, row, col, tile, nan, swap]


@pytest.mark.parametrize("which", range(8))
def test_each_wrong_result_fails(sketched, product, which):
    a, b, c, rms = product
    bad = c.copy()
    mutant = _mutants(bad, rms)[which]
    mutant(bad)
    chk = judge(a, b, bad)
    assert not chk.ok, mutant.__name__
    assert "sketch check" in chk.detail


def test_a_product_missing_one_k_block_fails(sketched, product):
    a, b, _, _ = product
    assert not judge(a, b, (a[:, 32:] @ b[32:]).astype(np.float32)).ok


def test_only_products_above_the_limit_are_sketched():
    assert not sketch.sketched((4096, 4096, 4096)) and not sketch.sketched((8192, 8192, 8192))
    assert sketch.sketched((8193, 8192, 8192)) and sketch.sketched((46340,) * 3)


def test_sketched_rows_say_so():
    fam = load("matmul")
    assert prod.check_note(fam.problem("46340", None, "float32", {}))["check"].startswith("sketch")
    assert prod.check_note(fam.problem("4096", None, "float32", {})) == {}


def test_the_largest_matmul_fits_a_128_gib_host_with_the_sketch():
    # Full reference: 3 x A and B + 5 x C = 94 GB at 46340; the sketch needs A, B, two results.
    fam = load("matmul")
    p = fam.problem("46340", None, "float32", {})
    need = fam.host_bytes(p)
    assert need < 40 * 2**30
    assert need > 4 * 46340**2 * 4                    # A, B and two results at the least
    assert memplan.largest_n(fam, "float32", {"tile": 32}, 140 << 30, 120 << 30) == 46340   # the int-size limit
    assert memplan.largest_n(fam, "float32", {"tile": 32}, 140 << 30, 20 << 30) < 46340     # a small host


def test_gemm_keeps_its_full_reference_plan():
    gemm = load("gemm")
    p = gemm.problem("16384", None, "float32", {})
    assert gemm.host_bytes(p) > prod.full_host_bytes(p)
