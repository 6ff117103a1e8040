"""Checks of an ``--add`` kernel made before any build, apart from its parsing (:mod:`cudalab.catalog.user`): the
names its tile, grid and shared expressions use, and that its file spells the kernel's name at all."""

from __future__ import annotations

import re
from pathlib import Path

from cudalab.catalog import VariantSpec
from cudalab.catalog.user import _DIMS, SignatureError, UserKernel, split_dims
from cudalab.errors import UsageError
from cudalab.files import read_bytes

__all__ = ["LAUNCH_NAMES", "check_names", "check_named"]


#: Names a tile, grid or shared expression may use besides the defines: the launch's and the problem's extent.
LAUNCH_NAMES = ("block_x", "block_y", "block_z", "threads", "warps", "itemsize", "tile_x", "tile_y", "tile_z",
                "extent_x", "extent_y", "extent_z")


def check_names(variant: VariantSpec, defined: set[str] | frozenset[str]) -> None:
    """Refuse a tile, grid or shared expression of an ``--add`` kernel that names what nothing defines
    (before any build: a typo would otherwise fail every launch of a campaign).

    Args:
        variant: the kernel's VariantSpec.
        defined: the macro names in effect (its ``-D``, the family's, the tuned ones) and the problem's options.

    Raises:
        UsageError: one line naming the expression and the unknown name.
    """
    import ast  # noqa: PLC0415

    known = set(defined) | set(LAUNCH_NAMES)
    grid = variant.grid[3:] if variant.grid.startswith("sm:") else variant.grid
    exprs = [("tile", e) for e in variant.tile] + [("shared", variant.shared)]
    if grid != "tiles" and not _DIMS.fullmatch(grid):
        exprs += [("grid", e) for e in split_dims(grid)]
    for key, expr in exprs:
        try:
            tree = ast.parse(str(expr), mode="eval")
        except SyntaxError:
            continue  # parse_add refused it already; a family.toml's is the catalog's to say
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id not in known:
                raise UsageError(f"{variant.name}: {key} expression {expr!r} names {node.id!r}, which is no define "
                                 f"nor launch name (known: {', '.join(sorted(known))})")


def check_named(k: "UserKernel") -> None:
    """Refuse a kernel whose name its file never spells (before any build: nvcc would say so only after one).
    Not part of :func:`parse_add`: ``cudalab watch`` may start before the kernel is written.

    Raises:
        SignatureError: one line naming the ``__global__`` functions the file has.
    """
    kernel, path, text = k.kernel, Path(k.path), k.text or f"{k.path}:{k.kernel}"
    try:
        source = read_bytes(path, f"--add {text!r}:").decode("utf-8", "replace")
    except UsageError:
        return  # gone or unreadable now: the build says so in its own words
    if re.search(rf"\b{re.escape(kernel)}\b", source):
        return
    found = re.findall(r"__global__[^(;{]*?\b([A-Za-z_]\w*)\s*\(", source)
    have = f"its kernels: {', '.join(dict.fromkeys(found))}" if found else "it has no __global__ function"
    raise SignatureError(f"--add {text!r}: {path} has no kernel {kernel} ({have})")
