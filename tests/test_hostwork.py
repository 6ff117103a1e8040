"""Host work: parallel draws reproduce, exact comparisons catch one flipped bit anywhere (no GPU)."""

import numpy as np
import pytest

from cudalab import hostwork
from cudalab.hostwork import RowChunks, bytes_equal, exact_diff


@pytest.fixture(params=["memcmp", "numpy"])
def path(request, monkeypatch):
    """Every comparison test runs with libc's memcmp and with the NumPy blocks alone."""
    if request.param == "numpy":
        monkeypatch.setattr(hostwork, "_MEMCMP", False)
    return request.param


def _flip(a: np.ndarray, flat: int, bit: int = 0) -> np.ndarray:
    b = a.copy()
    b.reshape(-1).view(np.uint8)[flat * a.itemsize] ^= np.uint8(1 << bit)
    return b


def test_draws_reproduce_from_the_seed_whatever_the_thread_count(monkeypatch):
    a = hostwork.uniform(np.random.default_rng(7), (300, 50_000), np.float32)
    monkeypatch.setattr(hostwork, "_POOL", None)
    monkeypatch.setattr(hostwork, "workers", lambda: 1)
    b = hostwork.uniform(np.random.default_rng(7), (300, 50_000), np.float32)
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert -1.0 <= a.min() and a.max() < 1.0


@pytest.mark.parametrize("where", [0, 12_345, 3 * 4097 * 5 - 1])
@pytest.mark.parametrize("bit", [0, 31])
def test_one_flipped_bit_is_found_where_it_is(path, where, bit):
    a = np.random.default_rng(1).random((3 * 4097, 5), dtype=np.float32)
    b = a.copy()
    b.reshape(-1).view(np.uint32)[where] ^= np.uint32(1 << bit)
    d = exact_diff(b, a)
    assert d.first == np.unravel_index(where, a.shape) and d.wrong == 1
    assert exact_diff(a.copy(), a).first is None


def test_negative_zero_and_nan_payloads_are_differences(path):
    a = np.zeros(1000, np.float32)
    b = a.copy()
    b[999] = -0.0
    assert exact_diff(b, a).first == (999,)
    n = np.full(8, np.nan, np.float64)
    m = n.copy()
    m.view(np.uint64)[3] ^= np.uint64(1)  # another NaN: equal as a float test would say, not as bits
    assert exact_diff(m, n).first == (3,)


def test_a_strided_reference_is_compared_without_the_fast_path(path):
    a = np.random.default_rng(2).random((700, 900), dtype=np.float32)
    t = np.ascontiguousarray(a.T)
    assert bytes_equal(t, a.T) is None  # a view: memcmp does not apply
    assert exact_diff(t, a.T).first is None
    bad = _flip(t, 899 * 700 + 5)
    assert exact_diff(bad, a.T).first == (899, 5)


@pytest.mark.parametrize("where", [(0, 0), (15, 16), (511, 4), (100, 1023), (1100, 13), (1023, 1205)])
def test_a_transposed_reference_compared_in_tiles_misses_no_element(where):
    """A 1200x1210 result (full 512-blocks walked in 16x16 tiles, edge blocks plainly) against a.T."""
    a = np.random.default_rng(4).random((1210, 1200), dtype=np.float32)
    t = np.ascontiguousarray(a.T)
    assert exact_diff(t, a.T).first is None
    bad = _flip(t, where[0] * 1210 + where[1], 6)
    d = exact_diff(bad, a.T)
    assert d.first == where and d.wrong == 1


def test_chunked_results_are_compared_as_they_arrive(path):
    a = np.random.default_rng(3).random((1000, 64), dtype=np.float64)
    for flat, want in ((None, None), (64 * 999 + 63, (999, 63)), (64 * 500, (500, 0))):
        res = a if flat is None else _flip(a, flat, 7)
        chunks = RowChunks(res.shape, res.dtype, 96, lambda r0, r1, res=res: res[r0:r1].copy(), lambda res=res: res)
        assert exact_diff(chunks, a).first == want


def test_bytes_equal_says_none_where_it_cannot_judge():
    a = np.arange(100, dtype=np.float32)
    assert bytes_equal(a, a.copy()) is True
    assert bytes_equal(a, _flip(a, 99, 3)) is False
    assert bytes_equal(a, a[::-1].copy()) is False
    assert bytes_equal(a[::2], a[::2].copy()) is None
    assert bytes_equal(a, a[:50].copy()) is None


def test_a_wrong_vector_is_compared_in_few_large_tasks(monkeypatch):
    """A 1-D result is an n x 1 matrix to the block diff: 512-square blocks made it n/512 tasks (a
    wrong 2^26 scan took > 10 s to check on an H100 host, and its worker was killed as hung)."""
    counts = []
    real = hostwork._run
    monkeypatch.setattr(hostwork, "_run", lambda task, count: (counts.append(count), real(task, count))[1])
    n = 1 << 22
    ref = np.arange(n, dtype=np.int32)
    res = ref + 1
    d = hostwork.exact_diff(res, ref)
    assert (d.first, d.wrong) == ((0,), n)
    assert max(counts) <= 8, counts


def test_integers_stored_as_floats_are_the_same_draw_and_sum_exactly():
    ints = hostwork.integers(np.random.default_rng(9), 3 * hostwork.CHUNK + 5, 1, 101)
    floats = hostwork.integers(np.random.default_rng(9), 3 * hostwork.CHUNK + 5, 1, 101, out_dtype=np.float64)
    assert floats.dtype == np.float64 and np.array_equal(ints, floats)
    assert hostwork.int_sum(floats) == int(ints.sum(dtype=np.int64)) == hostwork.int_sum(ints)
    floats[-1] += 1  # one element in the last chunk
    assert hostwork.int_sum(floats) == hostwork.int_sum(ints) + 1
