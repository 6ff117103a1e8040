"""Your own kernel as a campaign's search space (``cudalab tune FAMILY --add FILE.cu:KERNEL@...``), and what
a campaign was built from (pure: no GPU, no build).

An ``--add`` kernel is tuned on the family's problem (its inputs, reference, check and work) exactly as a
family's variant is: the ``-D``, ``--block`` and family-option dimensions, plus its ``tile``, ``grid`` and
``shared`` written as expressions over the tuned names (``tile=block_x*TX x block_y*TY``: kernel_tuner's
grid divisors). Everything a typo can break is refused here, before any build: a kernel the file never
names, an expression naming what nothing defines, a tile of 0 at some point of the space.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

from cudalab.catalog import FamilySpec, VariantSpec, user, userchecks
from cudalab.catalog.expr import evaluate
from cudalab.errors import CatalogError, UsageError
from cudalab.tuning.space import Space, names_of, point_key

__all__ = ["own_variant", "check_tiles", "build_identity", "rerun_add"]

#: Points whose tile is evaluated before the campaign starts (a space's first ones when it has more).
TILE_CHECKS = 20_000


def own_variant(spec: FamilySpec, text: str, variant: str | None) -> tuple[user.UserKernel, VariantSpec]:
    """The ``--add`` kernel a campaign tunes, as the family's runs launch it.

    Raises:
        UsageError: ``--variant`` given too (a campaign tunes one kernel), or the ``--add`` text is refused
            (:func:`cudalab.catalog.user.parse_add`: syntax, the file, a kernel the file never names).
    """
    if variant is not None:
        raise UsageError(f"--variant {variant} and --add: a campaign tunes one kernel (give one of them)")
    uk = user.parse_add(text)
    userchecks.check_named(uk)
    return uk, user.variants((uk,), spec)[0]


def check_names(v: VariantSpec, space: Space, family_defines: Mapping[str, str],
                options: Mapping[str, Any]) -> None:
    """Refuse a tile, grid or shared expression naming what neither the space, the kernel's defines, the
    family nor the problem defines (:func:`cudalab.catalog.userchecks.check_names`).

    Raises:
        UsageError: one line naming the expression and the unknown name.
    """
    defined = ({d.name for d in space.dims} | {k for k, _ in v.defines} | set(family_defines)
               | {k for k, val in options.items() if isinstance(val, int) and not isinstance(val, bool)})
    userchecks.check_names(v, defined)


def check_tiles(v: VariantSpec, space: Space, points: list[dict[str, str]] | None) -> None:
    """Refuse a tile expression that is 0 or less at a valid point (its launch could cover nothing).

    Raises:
        UsageError: one line naming the expression, the point and its value.
    """
    if not v.tile:
        return
    consts = dict(space.constants)  # the variant's integer defines and default block, less the tuned names
    walk = points if points is not None else space.points()
    for i, point in enumerate(walk):
        if i >= TILE_CHECKS:
            return
        if points is None and space.allows(point):
            continue
        names = names_of(space.dims, point, consts)
        try:
            tile = [evaluate(e, names) for e in v.tile]
        except CatalogError as exc:
            raise UsageError(f"{v.name}: tile {' x '.join(v.tile)} at {point_key(point)}: {exc}") from None
        if min(tile) < 1:
            raise UsageError(f"{v.name}: tile {' x '.join(v.tile)} is {'x'.join(map(str, tile))} at {point_key(point)}: "
                             "every dim must be at least 1 (narrow the space or add a --require)")


def build_identity(spec: FamilySpec, v: VariantSpec) -> str:
    """What a campaign's kernel is built from: a hash of its source file, of the local headers it includes (as nvcc
    finds them: :func:`cudalab.build.includes`; each by its path from the source's folder, so a campaign file moved
    with its sources keeps its identity) and of the variant's fixed defines and launch rules. A campaign continues
    only on the same build, so a fixed kernel (its ``.cu`` or a header of it) starts afresh instead of inheriting its
    failures."""
    from cudalab import build  # noqa: PLC0415

    source = Path(v.source) if Path(v.source).is_absolute() else spec.directory / v.source
    try:
        text = source.read_bytes()
    except OSError:
        text = b""
    rules = {"defines": list(v.defines), "tile": list(v.tile), "grid": v.grid, "shared": v.shared,
             "per_thread": list(v.per_thread), "kernel": v.kernel}
    h = hashlib.sha256(text)
    h.update(json.dumps(rules, sort_keys=True, default=str).encode())
    folder = source.resolve().parent
    for header in (build.includes(source) if text else []):
        try:
            h.update(f"\n{os.path.relpath(header, folder)}\n".encode() + hashlib.sha256(header.read_bytes()).digest())
        except OSError:  # gone since it was found: nvcc says so when the trial builds
            pass
    return h.hexdigest()[:16]


def rerun_add(uk: user.UserKernel, point: Mapping[str, str], dims: Any) -> str:
    """The ``--add`` text that runs one configuration of the kernel: its keys, the tuned defines as ``-D``
    (the block goes on ``--block``, the family's options as theirs)."""
    keys = [f"block={uk.block}"] if uk.block else []
    if uk.per_thread != "1":
        keys.append(f"per_thread={uk.per_thread}")
    if uk.tile:
        keys.append("tile=" + ("x".join(uk.tile) if all(t.isdigit() for t in uk.tile) else " x ".join(uk.tile)))
    if uk.grid != "tiles":
        keys.append(f"grid={uk.grid}")
    if uk.shared != "0":
        keys.append(f"shared={uk.shared}")
    if uk.name != "+" + uk.kernel:
        keys.append(f"name={uk.name[1:]}")
    tuned = {d.name for d in dims if d.kind == "define"}
    keys += [f"-D{k}={val}" for k, val in uk.defines if k not in tuned]
    keys += [f"-D{d.name}={point[d.name]}" for d in dims if d.kind == "define"]
    return f"{uk.path}:{uk.kernel}" + ("@" + ",".join(keys) if keys else "")
