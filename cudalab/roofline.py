"""The roofline rule: the rate a memory-bound row is rated against (its ``% roofline`` column).

The roofline's copy rate is a copy of the same bytes: the faster of the driver's device-to-device copy (the
copy family's ``memcpy_dtod`` row) and the copy family's best kernel (its variant marked
``params.roofline = true`` in ``cuda_src/copy/family.toml``). Beside it a GPU worker measures a read stream and
a write stream of the same bytes (:mod:`cudalab.worker.streams`), and each row is charged its own traffic
(:func:`min_seconds`): a kernel that mostly reads is rated against the read stream, not a copy it can beat.
This module is the one place that knows which rows those are, which is faster and how a row is rated (pure:
the parent rates rows with it, the copy family asks it whether its own rows already measured one); a GPU
worker measures a roofline with :func:`cudalab.worker.executor.measure_roofline`. The copy family is found
through the catalog, not imported.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

from cudalab.catalog import VariantSpec, family
from cudalab.errors import UsageError
from cudalab.records.noise import DEFAULT_EFFECT
from cudalab.records.results import OVER_ROOFLINE, PASSED, Result, Roofline

#: The family whose rows are the roofline.
FAMILY = "copy"
#: Its row of the driver's device-to-device copy.
DRIVER_ROW = "memcpy_dtod"
#: A row's keys (``Result.extra``) for the bytes it reads and writes (:class:`cudalab.families.model.Work`).
READ_KEY, WRITTEN_KEY = "bytes_read", "bytes_written"
#: A row's key, set when it lands above its roofline beyond the noise floor: the limit (%) it passed.
OVER_KEY = OVER_ROOFLINE


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
    (None: it did not pass): whichever is faster (no streams: :func:`with_streams` adds them)."""
    if kernel_gbs and kernel_gbs > dtod_gbs:
        return Roofline(gbs=kernel_gbs, source=f"{FAMILY} {kernel}", dtod_gbs=dtod_gbs, kernel_gbs=kernel_gbs)
    return Roofline(gbs=dtod_gbs, source=DRIVER_ROW, dtod_gbs=dtod_gbs, kernel_gbs=kernel_gbs)


def with_streams(roofline: Roofline, read_gbs: float | None, write_gbs: float | None,
                 floor: float | None) -> Roofline:
    """``roofline`` with the read and write streams measured beside it and the GPU's noise floor."""
    return replace(roofline, read_gbs=read_gbs or None, write_gbs=write_gbs or None, floor=floor)


def from_rows(results: Iterable[Result]) -> Roofline | None:
    """The roofline a copy run's own rows measured (both the driver row and the roofline kernel
    passed), or None."""
    rows = {r.variant: r for r in results if r.status == PASSED and r.gbs}
    dtod, best = rows.get(DRIVER_ROW), rows.get(kernel_variant().name)
    if dtod is None or best is None:
        return None
    return faster(dtod.gbs, best.variant, best.gbs)


def min_seconds(roofline: Roofline, read: float, written: float) -> float:
    """The least time reading ``read`` bytes and writing ``written`` can take at ``roofline``'s rates.

    The model is piecewise: each written byte is paired with a read byte and the pairs move at the copy
    rate (``gbs`` counts a copy's bytes read + written); the bytes left over, all reads or all writes,
    move at their own stream's rate. So a copy (R = W) comes out at exactly its copy rate, a pure read at
    the read stream's, and anything between is the straight line between the two in time per byte, which
    is what a kernel interleaving the two streams sees: DRAM turns the bus around between reads and writes
    (why a copy is slower per byte than either stream alone), and R/read + W/write would rate a copy at
    more than its own measured rate. A stream is never counted slower than the copy (its stream is part of
    a copy of the same bytes; a probe slower than that would only let rows beat their ceiling).
    """
    copy = roofline.gbs * 1e9
    reads = max(roofline.read_gbs or 0.0, roofline.gbs) * 1e9
    writes = max(roofline.write_gbs or 0.0, roofline.gbs) * 1e9
    paired = min(read, written)
    return 2 * paired / copy + (read - paired) / reads + (written - paired) / writes


def traffic(r: Result) -> tuple[float, float] | None:
    """The bytes ``r`` read and wrote, as its row says (None: a row without them, rated as a copy)."""
    rd, wr = r.extra.get(READ_KEY), r.extra.get(WRITTEN_KEY)
    ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in (rd, wr))
    return (float(rd), float(wr)) if ok and rd + wr > 0 else None


def pct_of(r: Result, roofline: Roofline) -> float | None:
    """``r``'s % of its own roofline: the least time its reads and writes take (:func:`min_seconds`) over
    its time (its bytes over its GB/s, the same median the table shows); None without a rate."""
    if not r.gbs:
        return None
    moved = traffic(r)
    if moved is None:  # no declared mix: half and half, the copy's own rate
        return 100.0 * r.gbs / roofline.gbs
    read, written = moved
    took = (read + written) / (r.gbs * 1e9)
    return 100.0 * min_seconds(roofline, read, written) / took


def over_limit(roofline: Roofline) -> float:
    """The % above which a row is flagged: 100 plus the GPU's noise floor (the default effect when the GPU
    was never calibrated): beyond it, the row escaped its roofline's model, which is no speed to read."""
    floor = roofline.floor if roofline.floor is not None else DEFAULT_EFFECT
    return 100.0 * (1 + floor)


def with_roofline(r: Result, roofline: Roofline | None) -> Result:
    """The row with its % of ``roofline`` (:func:`pct_of`), flagged (``extra[OVER_KEY]``) above
    :func:`over_limit`; unchanged without a rate or a roofline."""
    if r.gbs is None or roofline is None:
        return r
    pct = pct_of(r, roofline)
    extra = {k: v for k, v in r.extra.items() if k != OVER_KEY}
    if pct is not None and pct > over_limit(roofline):
        extra[OVER_KEY] = round(over_limit(roofline), 2)
    return replace(r, pct_roofline=pct, extra=extra)


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
