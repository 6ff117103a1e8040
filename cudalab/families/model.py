"""The data a family and the runner exchange: options, problems, work, launches, checks, cases (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cudalab.launch import Dim3


@dataclass(frozen=True)
class FamilyOption:
    """An extra command-line option of one family (``--tile 32``)."""

    name: str
    type: type
    default: Any
    help: str


@dataclass(frozen=True)
class Problem:
    """The size of one run: dims in the family's own order, dtype name and option values."""

    dims: tuple[int, ...]
    dtype: str
    options: tuple[tuple[str, Any], ...] = ()

    def opt(self, name: str, default: Any = None) -> Any:
        """Value of a family option."""
        return dict(self.options).get(name, default)

    @property
    def label(self) -> str:
        """Dims joined with x (``16384x16384``)."""
        return "x".join(str(d) for d in self.dims)

    @property
    def np_dtype(self) -> np.dtype:
        """The NumPy dtype."""
        return np.dtype(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {"dims": list(self.dims), "dtype": self.dtype, "options": dict(self.options)}


@dataclass(frozen=True)
class Work:
    """What one launch must move and compute: bytes (each necessary byte once) and FLOPs."""

    bytes: int = 0
    flops: int = 0


@dataclass(frozen=True)
class Launch:
    """A resolved launch configuration for one variant."""

    block: Dim3
    grid: Dim3
    tile: Dim3
    shared: int = 0
    defines: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Check:
    """The outcome of comparing a result with the reference."""

    ok: bool
    max_error: float
    tolerance: float
    detail: str = ""


@dataclass
class Case:
    """How the runner drives one variant.

    The runner calls ``reset`` (untimed) before every launch, ``poison`` before the verified
    launch, ``run`` between two CUDA events (or a host clock when ``timer == "host"``),
    ``result`` after synchronising, and ``close`` at the end. ``to_result`` (optional) runs
    ``run`` plus whatever turns the output into the final answer (e.g. the host sum of partial
    sums) and is timed with a host clock after a synchronise: the 'time to result'.
    """

    run: Callable[[], None]
    result: Callable[[], np.ndarray]
    reset: Callable[[], None] = lambda: None
    poison: Callable[[], None] = lambda: None
    close: Callable[[], None] = lambda: None
    to_result: Callable[[], Any] | None = None
    timer: str = "events"
    notes: dict[str, Any] = field(default_factory=dict)
    items: int = 0
    """Keys, queries or elements one ``run`` handles; when set, the runner adds their rate
    (items / median time, in 1e9 a second) as ``extra["rate"]``: the rate column of a family whose
    metric is ``rate``."""


def compare(result: np.ndarray, reference: np.ndarray, tolerance: float, relative: bool = True) -> Check:
    """Compare element-wise; NaN (the poison) anywhere fails.

    Args:
        result: what the variant produced.
        reference: the NumPy answer.
        tolerance: largest allowed error.
        relative: scale the error by max(1, |reference|) element-wise.
    """
    result = np.asarray(result)
    reference = np.asarray(reference)
    if result.shape != reference.shape:
        return Check(False, float("inf"), tolerance, f" (shape {result.shape}, expected {reference.shape})")
    r = result.astype(np.float64, copy=False)
    ref = reference.astype(np.float64, copy=False)
    nan = int(np.count_nonzero(np.isnan(r)))
    if nan:
        return Check(False, float("nan"), tolerance, f" ({nan} elements unwritten or NaN)")
    if r.size == 0:
        return Check(True, 0.0, tolerance)
    err = np.abs(r - ref)
    if relative:
        err = err / np.maximum(1.0, np.abs(ref))
    worst = float(err.max())
    return Check(worst <= tolerance, worst, tolerance)
