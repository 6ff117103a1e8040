"""The roofline rule: the rate a memory-bound row is rated against (its ``% roofline`` column).

The roofline is a copy of the same bytes: the faster of the driver's device-to-device copy (the copy
family's ``memcpy_dtod`` row) and the copy family's best kernel (its variant marked
``params.roofline = true`` in ``cuda_src/copy/family.toml``). This module is the one place that knows
which rows those are and which is faster (pure: the parent rates rows with it, the copy family asks it
whether its own rows already measured one); a GPU worker measures a roofline with
:func:`cudalab.worker.executor.measure_roofline`. The copy family is found through the catalog, not imported.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

from cudalab.catalog import VariantSpec, family
from cudalab.errors import UsageError
from cudalab.records.results import PASSED, Result, Roofline

#: The family whose rows are the roofline.
FAMILY = "copy"
#: Its row of the driver's device-to-device copy.
DRIVER_ROW = "memcpy_dtod"


def kernel_variant() -> VariantSpec:
    """The copy kernel marked ``roofline = true`` in family.toml (the best one).

    Raises:
        UsageError: the copy family marks none.
    """
    for v in family(FAMILY).variants:
        if v.param("roofline"):
            return v
    raise UsageError("the copy family marks no variant with params.roofline = true")


def faster(dtod_gbs: float, kernel: str, kernel_gbs: float | None) -> Roofline:
    """The roofline of a driver copy at ``dtod_gbs`` and the kernel ``kernel`` at ``kernel_gbs``
    (None: it did not pass): whichever is faster."""
    if kernel_gbs and kernel_gbs > dtod_gbs:
        return Roofline(gbs=kernel_gbs, source=f"{FAMILY} {kernel}", dtod_gbs=dtod_gbs, kernel_gbs=kernel_gbs)
    return Roofline(gbs=dtod_gbs, source=DRIVER_ROW, dtod_gbs=dtod_gbs, kernel_gbs=kernel_gbs)


def from_rows(results: Iterable[Result]) -> Roofline | None:
    """The roofline a copy run's own rows measured (both the driver row and the roofline kernel
    passed), or None."""
    rows = {r.variant: r for r in results if r.status == PASSED and r.gbs}
    dtod, best = rows.get(DRIVER_ROW), rows.get(kernel_variant().name)
    if dtod is None or best is None:
        return None
    return faster(dtod.gbs, best.variant, best.gbs)


def with_roofline(r: Result, roofline: Roofline | None) -> Result:
    """The row with its rate as % of ``roofline`` (unchanged without a rate or a roofline)."""
    if r.gbs is None or roofline is None:
        return r
    return replace(r, pct_roofline=100.0 * r.gbs / roofline.gbs)


def rate_of(r: Result, metric: str) -> float | None:
    """The row's figure for the family's metric: GB/s, GFLOP/s or G items/s (``extra["rate"]``)."""
    if metric == "rate":
        return r.extra.get("rate")
    return r.gbs if metric == "bandwidth" else r.gflops


def pct_column(results: Sequence[Result], metric: str) -> list[Result]:
    """For FLOP-rate and item-rate families, fill pct_roofline as % of the library reference row
    (cuBLAS, CuPy's sort)."""
    if metric not in ("flops", "rate"):
        return list(results)
    ref = next((r for r in results if r.kind == "library" and r.status == PASSED and rate_of(r, metric)), None)
    if ref is None:
        return list(results)
    top = rate_of(ref, metric)
    return [replace(r, pct_roofline=100.0 * rate_of(r, metric) / top) if rate_of(r, metric) else r for r in results]
