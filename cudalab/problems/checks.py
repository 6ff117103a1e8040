"""The whole contract of a :class:`~cudalab.problems.contract.Problem`, checked when its family loads.

A mistake in a problem of one's own (``check="close"``, an ``args`` name that is no array or size, a
``tile`` or ``shared`` expression naming nothing the launch knows, a library row with no ``Library``, a
two-dimensional problem whose grid cover is left to a guess) is one line naming the file and the field,
at ``cudalab list`` already, not a table that looks right or an error minutes into a run.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from cudalab.catalog.specs import VariantSpec
from cudalab.errors import CatalogError, CudalabError
from cudalab.catalog.expr import names_in
from cudalab.problems.contract import Tolerance

#: Names every family.toml expression may read (:func:`cudalab.plan.names_for`), besides int options.
LAUNCH_NAMES = frozenset({"block_x", "block_y", "block_z", "threads", "tile_x", "tile_y", "tile_z", "itemsize",
                          "warps"})


def check_problem(fam: Any, variants: Sequence[VariantSpec]) -> None:
    """Refuse, in one line naming the file and the field, a problem whose contract cannot run as written.

    Args:
        fam: the :class:`~cudalab.problems.adapter.ProblemFamily`.
        variants: its family.toml variants.

    Raises:
        CatalogError: the first mistake found.
    """
    where, p = fam.where, fam.spec
    _check_rule(p.check, where)
    _check_dtypes(p, where)
    kernels = [v for v in variants if v.kind == "kernel"]
    if kernels:
        check_extent(fam)
    _check_args(fam)
    for v in variants:
        if v.kind == "library" and not any(lib.name == v.name for lib in p.libraries):
            raise CatalogError(f"{where}: family.toml row {v.name!r} is kind = \"library\", and libraries= has no "
                               f"Library({v.name!r}, fn) for it")
    options = {o.name for o in fam.OPTIONS if o.type is int or isinstance(o.default, int)}
    for v in kernels:
        _check_expressions(v, options, where)


def _check_rule(rule: Any, where: str) -> None:
    ok_number = isinstance(rule, (int, float)) and not isinstance(rule, bool) and math.isfinite(rule) and rule > 0
    if rule == "exact" or ok_number or (callable(rule) and not isinstance(rule, type)):
        return
    if isinstance(rule, Tolerance):
        for key in ("rtol", "atol"):
            v = getattr(rule, key)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise CatalogError(f"{where}: check=Tolerance({key}={v!r}): {key} must be a number >= 0")
        return
    raise CatalogError(f"{where}: check={rule!r} is not a check: give 'exact', Tolerance(rtol=, atol=), a relative "
                       "tolerance such as 1e-5, or a function check(size, result, reference)")


def _check_dtypes(p: Any, where: str) -> None:
    fields = [(f"outputs {o.name!r} dtype", o.dtype) for o in p.outputs] + \
             [(f"scratch {s.name!r} dtype", s.dtype) for s in p.scratch] + \
             [(f"scalars {s.name!r} dtype", s.dtype) for s in p.scalars] + \
             [(f"input_dtypes {k!r}", v) for k, v in p.input_dtypes.items()] + [("dtypes", d) for d in p.dtypes]
    for what, dtype in fields:
        if dtype is None or dtype == "bfloat16":
            continue
        try:
            np.dtype(dtype)
        except TypeError:
            raise CatalogError(f"{where}: {what} {dtype!r} is not a NumPy dtype name (float32, int32, uint8, ...)") from None
    if not p.outputs:
        raise CatalogError(f"{where}: outputs= is empty: give the array the kernel writes, Output(name, shape)")


def check_extent(fam: Any) -> None:
    """A problem of two or more dims says what its grid covers: no default fits both a thread an element
    and a thread a row (the default of the first launches ``cols`` times too many threads for the second,
    and such a kernel still verifies). A subclass with its own ``extent`` method says it there."""
    from cudalab.problems.adapter import ProblemFamily  # noqa: PLC0415  (the adapter imports this module)

    p = fam.spec
    if len(p.dims) < 2 or p.extent is not None or type(fam).extent is not ProblemFamily.extent:
        return
    rev = ", ".join(f"s.{d}" for d in reversed(p.dims))
    raise CatalogError(f"{fam.where}: a {len(p.dims)}-D problem needs extent=, the elements its grid covers along "
                       f"x, y, z: extent=lambda s, v: ({rev}) for a thread an element, or "
                       f"extent=lambda s, v: (s.{p.dims[0]},) for a thread a {p.dims[0]} entry")


def _check_args(fam: Any) -> None:
    """Every ``args`` name is an output, scratch, scalar, size or input (inputs drawn at a small size)."""
    p, where = fam.spec, fam.where
    known = {o.name for o in (*p.outputs, *p.scratch)} | {s.name for s in p.scalars} | set(p.dims)
    seen: set[str] = set()
    for name in p.args:
        if not isinstance(name, str) or not name.isidentifier():
            raise CatalogError(f"{where}: args has {name!r}: each is the name of an input, output, scratch, scalar "
                               "or size")
        if name in seen:
            raise CatalogError(f"{where}: args names {name!r} twice")
        seen.add(name)
    unknown = [a for a in p.args if a not in known]
    if not unknown:
        return
    inputs = _small_inputs(fam)
    if inputs is None:  # the problem's inputs cannot be drawn small: its run names the argument
        return
    for name in unknown:
        if name not in inputs:
            raise CatalogError(f"{where}: args names {name!r}, which is no input ({', '.join(sorted(inputs)) or 'none'}), "
                               f"output, scratch, scalar or size ({', '.join(p.dims)})")


def _small_inputs(fam: Any) -> set[str] | None:
    """The names of the inputs, drawn at a small size the problem takes (None: none of them)."""
    p = fam.spec
    tries = [("1000", None), ("4096", None)] if len(p.dims) == 1 else [(None, "x".join(["37"] * len(p.dims))), ("64", None)]
    for n, shape in tries:
        try:
            prob = fam.problem(n, shape, p.dtypes[0], {})
            got = fam.make_inputs(prob, np.random.default_rng(0))
        except CudalabError:
            continue
        return set(got)
    return None


def _check_expressions(v: VariantSpec, options: set[str], where: str) -> None:
    """The ``tile``, ``require`` and ``shared`` expressions of a row name only what its launch knows (its
    names and its defines)."""
    known = LAUNCH_NAMES | options
    fields = [("tile", e) for e in v.tile] + [("require", e) for e in v.require]
    names = known | {k for k, _ in v.defines}  # the integer defines in effect are launch names too
    for what, text in fields + [("shared", v.shared)]:
        unknown = sorted(names_in(text) - names)
        if unknown:
            raise CatalogError(f"{where}: family.toml row {v.name!r}: {what} = {str(text)!r} names {unknown[0]!r}, which "
                               f"the launch does not know (known: {', '.join(sorted(names))})")
