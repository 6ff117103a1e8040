"""Float checks on the host (cudalab.hostcheck): the block-parallel moments are the serial ones (no GPU)."""

import numpy as np
import pytest

from cudalab import hostcheck


def _serial(res: np.ndarray, ref: np.ndarray) -> tuple:
    """The moments computed the plain way: full-size float64 temporaries, one pass each."""
    d = res.astype(np.float64).reshape(-1) - ref.reshape(-1)
    finite = np.isfinite(d)
    bad = np.flatnonzero(~finite)
    d = np.where(finite, d, 0.0)
    a = np.abs(d)
    return (len(bad), int(bad[0]) if len(bad) else -1, float((d * d).sum()),
            float((ref.astype(np.float64) ** 2).sum()), int(np.argmax(a)), float(a.max()))


@pytest.mark.parametrize("n", [1, hostcheck.MOMENT_CHUNK, 3 * hostcheck.MOMENT_CHUNK + 17])
def test_the_moments_are_the_serial_ones_across_blocks_with_nonfinite_elements(n):
    rng = np.random.default_rng(n)
    ref = rng.standard_normal(n)
    res = (ref + 1e-6 * rng.standard_normal(n)).astype(np.float32)
    worst = n - 1 if n > 1 else 0
    res[worst] += np.float32(0.5)  # the largest difference, in the last block
    if n > 10:
        res[[7, n // 2]] = [np.nan, np.inf]  # unwritten or overflowed: counted, first one named, left out of the sums
    m = hostcheck.diff_moments(res, ref)
    bad, first, sq, sq_ref, at, worst_abs = _serial(res, ref)
    assert (m.nonfinite, m.first_nonfinite, m.worst) == (bad, first, at)
    assert m.sq_diff == pytest.approx(sq, rel=1e-12) and m.sq_ref == pytest.approx(sq_ref, rel=1e-12)
    assert m.worst_abs == worst_abs


def test_the_moments_use_no_blas(monkeypatch):
    # np.dot of a block is BLAS: OpenBLAS spreads each call over every core, from every block's thread at once,
    # and its threads spin after each; on a 16-core H200 host a 4096^2 matmul check took 98 ms and 1.5 CPU-s, and
    # left 1.8 CPU-s of spinning in the half second after it (the einsum form: 18 ms, 0.1 CPU-s, none after)
    def no(*a, **k):
        raise AssertionError("BLAS called")

    monkeypatch.setattr(np, "dot", no)
    monkeypatch.setattr(np, "vdot", no)
    ref = np.random.default_rng(1).standard_normal(2 * hostcheck.MOMENT_CHUNK)
    assert hostcheck.diff_moments(ref.astype(np.float32), ref).sq_ref == pytest.approx(float((ref * ref).sum()))
