"""The catalog's frozen records: one variant (a ``[[variant]]`` table) and one family (a folder).

:mod:`cudalab.catalog` reads and validates ``family.toml`` into these; everything else reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cudalab.errors import UsageError
from cudalab.launch import Dim3, fmt_dims

KINDS = ("kernel", "host", "driver", "library")
"""kernel: a .cu kernel launched by cudalab; host: NumPy on the CPU; driver: a CUDA driver call
(memcpy_dtod); library: a vendor library through CuPy (CUB, cuBLAS), a labelled reference row."""


@dataclass(frozen=True)
class VariantSpec:
    """One variant of a family, as declared in its family.toml.

    Attributes:
        name: user-facing name (``bankopt``).
        kind: one of :data:`KINDS`.
        description: one line for ``cudalab list``.
        source: ``.cu`` file in the family folder (kernel variants).
        kernel: the ``extern "C"`` symbol to launch.
        block: default block dims.
        per_thread: elements each thread covers per dim; tile = block × per_thread.
        tile: expressions for the elements one block covers per dim, when that is not
            block × per_thread (``["block_x", "block_x"]`` for a square tile moved by fewer rows;
            ``["WT_BN", "WT_BM"]``: tile, require, ``sm:K`` and shared may name the integer defines in
            effect, the variant's and ``-D``'s).
        require: expressions over the launch names that must hold (``"block_x % block_y == 0"``).
        grid: ``tiles`` (ceil(extent / tile)), ``sm:K`` (K blocks per SM, grid-stride kernels; K may be
            an expression),
            or literal dims such as ``1`` or ``4x4``.
        grid_stride: the kernel loops over the data with a grid-sized stride, so any grid covers
            it (implied by ``sm:K``).
        divisible: the kernel handles only extents that are multiples of its tile.
        block_pow2: the kernel needs a power-of-two number of threads per block.
        fixed_block: the kernel's shape is compiled for its default block; other blocks are refused.
        defines: ``-D`` macros; values are expressions over the launch names (see runner).
        shared: dynamic shared memory bytes, an expression over the same names.
        legacy: why this faithful textbook variant is undefined on current GPUs ('' if it is not).
        params: family-specific data (unroll factor, expected counter values...).
        dtypes: dtypes the variant supports (empty: the family's).
    """

    name: str
    kind: str = "kernel"
    description: str = ""
    source: str = ""
    kernel: str = ""
    block: Dim3 = (1, 1, 1)
    per_thread: Dim3 = (1, 1, 1)
    grid: str = "tiles"
    divisible: bool = False
    block_pow2: bool = False
    fixed_block: bool = False
    defines: tuple[tuple[str, str], ...] = ()
    shared: str = "0"
    legacy: str = ""
    params: tuple[tuple[str, Any], ...] = ()
    dtypes: tuple[str, ...] = ()
    tile: tuple[str, ...] = ()
    require: tuple[str, ...] = ()
    grid_stride: bool = False

    def param(self, key: str, default: Any = None) -> Any:
        """Return a family-specific parameter from the ``params`` table."""
        return dict(self.params).get(key, default)

    def constraints(self) -> str:
        """Describe the size and block rules in a few words, for ``list`` and messages."""
        rules = []
        if self.divisible:
            rules.append("size multiple of tile")
        if self.block_pow2:
            rules.append("block power of 2")
        if self.fixed_block:
            rules.append(f"block fixed at {fmt_dims(self.block)}")
        if self.dtypes:
            rules.append("dtype " + "|".join(self.dtypes))
        rules.extend(self.require)
        return ", ".join(rules) or "any size"


@dataclass(frozen=True)
class TuneTable:
    """One ``[[tune]]`` table: a variant's search space for ``cudalab tune``.

    Attributes:
        variant: the variant it tunes.
        params: dimension name -> its values as written (``8,16,32``, ``2..4``, ``8..64:pow2``); ``block``
            is the block, a family option's name that option, any other name a ``-D`` define.
        require: constraints over the names (:mod:`cudalab.tuning.space`).
        n, shape: the problem size it is meant for (None: the family's default).
        description: one line for ``cudalab list FAMILY``.
    """

    variant: str
    params: tuple[tuple[str, str], ...]
    require: tuple[str, ...] = ()
    n: str | None = None
    shape: str | None = None
    description: str = ""


@dataclass(frozen=True)
class FamilySpec:
    """A family: its folder, its module and its variants in declaration order."""

    name: str
    description: str
    directory: Path
    module: str
    metric: str
    dtypes: tuple[str, ...]
    default_dtype: str
    variants: tuple[VariantSpec, ...] = field(default_factory=tuple)
    tune: tuple["TuneTable", ...] = ()  # [[tune]] tables: the variants' search spaces for cudalab tune

    def variant(self, name: str) -> VariantSpec:
        """Return the variant called ``name``.

        Raises:
            UsageError: naming the valid variants.
        """
        for v in self.variants:
            if v.name == name:
                return v
        raise UsageError(f"{self.name} has no variant {name!r}; valid: {', '.join(self.names())}")

    def names(self) -> list[str]:
        """Variant names in declaration order."""
        return [v.name for v in self.variants]

    def select(self, names: str | None) -> list[VariantSpec]:
        """Select variants from a comma list (None or ``all``: every variant, in order).

        Raises:
            UsageError: the list is empty (``''`` does not mean all), has an empty entry, names a
                variant twice, or names an unknown variant.
        """
        if names is None or names.strip() == "all":
            return list(self.variants)
        valid = ", ".join(self.names())
        wanted = [n.strip() for n in names.split(",")]
        if not any(wanted):
            raise UsageError(f"--variant {names!r} names no variant; valid: {valid}")
        if not all(wanted):
            raise UsageError(f"--variant {names!r} has an empty entry; valid: {valid}")
        if "none" in wanted and "none" not in self.names():  # callers with --add never get here
            raise UsageError("--variant none runs only your own kernels: give them with --add FILE.cu:KERNEL "
                             f"(cudalab list {self.name} shows the signature)")
        seen: set[str] = set()
        for n in wanted:
            if n in seen:
                raise UsageError(f"--variant {names!r} names {n!r} twice")
            seen.add(n)
        return [self.variant(n) for n in wanted]
