"""A matmul check for products too large for a full float64 reference on the host (pure NumPy).

At 46340³ (the largest square product the kernels' int sizes allow) the float64 reference is 2e14
floating-point operations on the CPU, minutes to an hour, and 17 GB; the GPU needs seconds. Above
:data:`FULL_LIMIT` multiply-adds the result is checked against a sketch that costs O(n²) plus a few
exact rows and columns, all computed from the float32 inputs in float64 (never from another kernel):

* every element is finite: the NaN poison is still there wherever nothing was written (and the
  two-poison protocol still counts unwritten elements exactly);
* :data:`SAMPLES` whole rows and as many whole columns, the first and last of each among them,
  equal their float64 reference within the element bound of the full check
  (:func:`cudalab.families.matmul.tolerances`): a wrong edge tile or a wrong row shows here;
* two Freivalds projections: C·x against A·(B·x) and wᵀ·C against (wᵀ·A)·B for random ±1 vectors
  x and w. Each of the M (N) sums adds N (M) element errors of random sign, so the bound is the
  element rms the Frobenius test allows, times sqrt(N) (sqrt(M)), times 6 (six sigma over all
  sums). A whole-row or whole-column error, or one element off by a fraction of rms|C| anywhere,
  moves one of these sums beyond it.

This is weaker than the full check for one element that is only slightly off outside the sampled
rows and columns; the row says "sketch check" so nobody mistakes it for the full one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cudalab.families.model import Check

#: Products of more multiply-adds (M·N·K) than this get the sketch check: 8192³, a few seconds of
#: float64 BLAS on the host; every size the tests and the benchmark tables use stays below.
FULL_LIMIT = 8192**3
#: Exact rows (and columns) sampled, the first and the last among them.
SAMPLES = 32
#: Rows of A (and of C) per float64 block: bounds the host memory of the check to a few hundred MB.
BLOCK_ROWS = 1024
#: Sigmas of the projection bound: the largest of ~10^5 Gaussian sums stays below 6 sigma.
SIGMAS = 6.0
SEED = 20261123


def sketched(dims: tuple[int, int, int]) -> bool:
    """Whether a product of these (M, K, N) dims is checked by the sketch."""
    m, k, n = dims
    return m * k * n > FULL_LIMIT


@dataclass(frozen=True)
class Sketch:
    """The float64 facts a result is compared with (see the module docstring)."""

    dims: tuple[int, int, int]
    rows: np.ndarray        # indices of the sampled rows
    row_ref: np.ndarray     # (len(rows), N) float64
    cols: np.ndarray        # indices of the sampled columns
    col_ref: np.ndarray     # (M, len(cols)) float64
    x: np.ndarray           # ±1, length N
    cx: np.ndarray          # A·(B·x), length M
    w: np.ndarray           # ±1, length M
    wc: np.ndarray          # (wᵀ·A)·B, length N
    rms: float              # rms of the sampled reference elements (|C|'s scale)

    @property
    def nbytes(self) -> int:
        """Host memory the sketch holds."""
        return sum(a.nbytes for a in (self.rows, self.row_ref, self.cols, self.col_ref, self.x, self.cx, self.w, self.wc))


def _picks(size: int, rng: np.random.Generator) -> np.ndarray:
    extra = rng.choice(size, size=min(size, SAMPLES), replace=False) if size > 2 else np.arange(size)
    return np.unique(np.concatenate([[0, size - 1], extra]))[: SAMPLES + 2].astype(np.int64)


def _blocks(size: int) -> range:
    return range(0, size, BLOCK_ROWS)


def host_bytes(dims: tuple[int, int, int]) -> int:
    """Peak host memory of the check beside the inputs and results: the sketch and one block's temporaries."""
    m, k, n = dims
    s = SAMPLES + 2
    sketch = 8 * (s * n + m * s + 2 * (m + n) + k)
    block = 8 * BLOCK_ROWS * max(k, n) * 2 + 8 * k * s   # a float64 block of A or C (and its product), B[:, cols]
    return sketch + block


def reference(a: np.ndarray, b: np.ndarray) -> Sketch:
    """The sketch of A·B (float32 inputs, float64 arithmetic), built block by block."""
    m, k = a.shape
    n = b.shape[1]
    rng = np.random.default_rng(SEED)
    rows, cols = _picks(m, rng), _picks(n, rng)
    x = rng.choice(np.array([-1.0, 1.0]), size=n)
    w = rng.choice(np.array([-1.0, 1.0]), size=m)
    bx = np.zeros(k)
    row_ref = np.zeros((rows.size, n))
    a_rows = a[rows].astype(np.float64)
    for r0 in _blocks(k):       # B by row blocks: B·x and A[rows]·B
        blk = b[r0:r0 + BLOCK_ROWS].astype(np.float64)
        bx[r0:r0 + blk.shape[0]] = blk @ x
        row_ref += a_rows[:, r0:r0 + blk.shape[0]] @ blk
    b_cols = b[:, cols].astype(np.float64)
    cx, wa = np.empty(m), np.zeros(k)
    col_ref = np.empty((m, cols.size))
    for r0 in _blocks(m):       # A by row blocks: A·(B·x), wᵀ·A and A·B[:, cols]
        blk = a[r0:r0 + BLOCK_ROWS].astype(np.float64)
        r1 = r0 + blk.shape[0]
        cx[r0:r1] = blk @ bx
        wa += w[r0:r1] @ blk
        col_ref[r0:r1] = blk @ b_cols
    wc = np.zeros(n)
    for r0 in _blocks(k):
        wc += wa[r0:r0 + BLOCK_ROWS] @ b[r0:r0 + BLOCK_ROWS].astype(np.float64)
    sampled = np.concatenate([row_ref.ravel(), col_ref.ravel()])
    rms = float(np.sqrt(np.mean(sampled * sampled))) if sampled.size else 1.0
    return Sketch((m, k, n), rows, row_ref, cols, col_ref, x, cx, w, wc, rms or 1.0)


def check(result: np.ndarray, ref: Sketch, fro_tol: float, elem_tol: float) -> Check:
    """Judge an fp32 result against the sketch (see the module docstring).

    ``max_error`` is the worst element error in units of rms|C| (of the sampled rows and columns when
    it passes), or the failing projection's error.

    Args:
        fro_tol: the full check's relative Frobenius bound (the element rms error it allows, / rms|C|).
        elem_tol: the full check's element bound, in units of rms|C|.
    """
    m, k, n = ref.dims
    if result.shape != (m, n):
        return Check(False, float("inf"), elem_tol, f" (shape {result.shape}, expected {(m, n)}; sketch check)")
    cx, wc = np.empty(m), np.zeros(n)
    for r0 in _blocks(m):
        blk = result[r0:r0 + BLOCK_ROWS].astype(np.float64)
        bad = ~np.isfinite(blk)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            return Check(False, float("nan"), elem_tol, f" ({int(bad.sum())}+ elements unwritten, NaN or inf, "
                                                        f"first at ({r0 + int(i)}, {int(j)}); sketch check)")
        cx[r0:r0 + blk.shape[0]] = blk @ ref.x
        wc += ref.w[r0:r0 + blk.shape[0]] @ blk
    sampled_worst = 0.0
    for name, got, want in (("row", np.asarray(result[ref.rows], np.float64), ref.row_ref),
                            ("column", np.asarray(result[:, ref.cols], np.float64), ref.col_ref)):
        err = np.abs(got - want) / ref.rms
        worst = np.unravel_index(int(np.argmax(err)), err.shape)
        sampled_worst = max(sampled_worst, float(err[worst]))
        if err[worst] > elem_tol:
            i, j = (int(ref.rows[worst[0]]), int(worst[1])) if name == "row" else (int(worst[0]), int(ref.cols[worst[1]]))
            return Check(False, float(err[worst]), elem_tol,
                         f" (element ({i}, {j}) of a sampled {name}, in units of rms|C|; sketch check)")
    for name, got, want, terms in (("C·x", cx, ref.cx, n), ("wᵀ·C", wc, ref.wc, m)):
        bound = SIGMAS * fro_tol * math.sqrt(terms)
        err = np.abs(got - want) / ref.rms
        i = int(np.argmax(err))
        if err[i] > bound:
            return Check(False, float(err[i]), bound,
                         f" (projection {name} at {i}, in units of rms|C|: a row or column is wrong; sketch check)")
    return Check(True, sampled_worst, elem_tol)
