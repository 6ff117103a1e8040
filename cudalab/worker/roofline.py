"""The roofline: the rate a memory-bound row is rated against (its ``% roofline`` column).

The roofline is a copy of the same bytes: the faster of the driver's device-to-device copy (the copy
family's ``memcpy_dtod`` row) and the copy family's best kernel (its variant marked
``params.roofline = true`` in ``cuda_src/copy/family.toml``). It is measured by running those two rows
of the copy family as any run is run (:func:`measure`). This module is the one place that knows this:
the runner asks it for a roofline (a bandwidth family's point), and the copy family asks it whether
its own rows already measured one (:func:`from_rows`). Nothing here imports a family module; the copy
family is found through the catalog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from cudalab.catalog import VariantSpec, family
from cudalab.errors import CudalabError, UsageError
from cudalab.records.results import PASSED, Result, Roofline

if TYPE_CHECKING:
    from cudalab.bench import Protocol

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


def source_matrix(nbytes: int, source: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """The float32 matrix the roofline copies: ``source`` itself when it is a float32 matrix of those
    bytes, else a view of ``source``'s first ``nbytes`` as rows of 4096, else fresh random data."""
    if source is not None and source.dtype == np.float32 and source.ndim == 2 and source.nbytes == nbytes:
        return source  # the very array the family uploaded: its device copy is reused
    elems = max(1, nbytes // 4)
    cols = min(elems, 4096)
    rows = max(1, elems // cols)
    if source is not None and source.flags.c_contiguous and source.nbytes >= rows * cols * 4:
        return source.reshape(-1).view(np.uint8)[: rows * cols * 4].view(np.float32).reshape(rows, cols)
    from cudalab import hostwork  # noqa: PLC0415

    return hostwork.uniform(rng, (rows, cols), np.float32)


def measure(device: Any, nbytes: int, protocol: Protocol, source: np.ndarray | None = None,
            ctx: Any | None = None) -> Roofline:
    """Measure the roofline for a buffer of ``nbytes``: the driver copy and the copy family's best
    kernel on the same bytes, run as the copy family's rows; the faster is the roofline.

    Args:
        device: the GPU.
        nbytes: bytes the copy reads (and writes).
        protocol: the run's timing protocol.
        source: what to copy: a float32 matrix is copied as it is (see :func:`source_matrix`).
        ctx: the run's :class:`cudalab.worker.executor.Context`: an input already uploaded there is not uploaded again.

    Raises:
        CudalabError: the driver copy failed.
    """
    from cudalab.worker.executor import FamilyRun, RunRequest  # noqa: PLC0415  (the runner asks this module)

    best = kernel_variant()
    ready = source is not None and source.dtype == np.float32 and source.ndim == 2
    a = source if ready else source_matrix(nbytes, source, np.random.default_rng())
    rows, cols = a.shape
    # force: the copy's peak (its source, already on the device, and one destination) is within the
    # plan of the run it serves, whose variants' buffers were released first; checking it again against
    # the free memory left beside the kept source refused the largest transpose the plan allowed.
    req = RunRequest(family=FAMILY, variants=f"{DRIVER_ROW},{best.name}", shape=f"{rows}x{cols}",
                     roofline=False, protocol=protocol, force=True)
    got = {r.variant: r for r in FamilyRun(req, device, inputs={"a": a}).run(ctx)}
    dtod = got[DRIVER_ROW]
    kern = got[best.name]
    if dtod.status != PASSED or not dtod.gbs:
        raise CudalabError(f"the roofline copy failed: {dtod.reason}")
    return faster(dtod.gbs, best.name, kern.gbs if kern.status == PASSED else None)
