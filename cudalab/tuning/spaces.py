"""A campaign's space from what the user asked and the family's ``[[tune]]`` table (pure)."""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.build.defines import validate_define
from cudalab.build.restated import source_defaults
from cudalab.launch import fmt_dims
from cudalab.errors import CatalogError, UsageError
from cudalab.catalog.expr import evaluate
from cudalab.families import Family
from cudalab.catalog.specs import TuneTable
from cudalab.tuning.space import BLOCK, Dim, Space, parse_values

__all__ = ["table_for", "kernel_variant", "make_space", "default_point"]


def table_for(spec: FamilySpec, variant: str) -> TuneTable | None:
    """The family's ``[[tune]]`` table for ``variant``, or None."""
    return next((t for t in spec.tune if t.variant == variant), None)


def kernel_variant(spec: FamilySpec, variants: str | None) -> VariantSpec:
    """The one kernel variant a campaign tunes (``--variant``; without it, the family's only tunable one).

    Raises:
        UsageError: none or several named, or a variant that is not a kernel.
    """
    if variants is None:
        tables = [t.variant for t in spec.tune]
        if len(tables) != 1:
            hint = f" (tunable: {', '.join(tables)})" if tables else ""
            raise UsageError(f"cudalab tune {spec.name} needs --variant NAME{hint}")
        variants = tables[0]
    names = [n.strip() for n in variants.split(",")]
    if len(names) != 1:
        raise UsageError(f"--variant {variants!r}: a campaign tunes one variant")
    v = spec.variant(names[0])
    if v.kind != "kernel":
        raise UsageError(f"{spec.name}/{v.name} is a {v.kind} row, not a kernel: nothing to tune")
    return v


def _constants(v: VariantSpec) -> dict[str, int]:
    """The variant's integer defines and default block sizes: names a constraint may use."""
    out: dict[str, int] = {}
    for name, expr in v.defines:
        try:
            out[name] = evaluate(expr, {})
        except CatalogError:  # names a launch quantity or a type: not a constant
            continue
    x, y, z = v.block
    out.update(block_x=x, block_y=y, block_z=z, threads=x * y * z)
    return out


def make_space(spec: FamilySpec, fam: Family, v: VariantSpec, *, defines: Sequence[tuple[str, str]] = (),
               block: str | None = None, options: Mapping[str, str] | None = None, require: Sequence[str] = (),
               use_table: bool = True) -> Space:
    """The search space: the ``[[tune]]`` table's dimensions (``use_table``), then those given, which
    replace a table's dimension of the same name; constraints of both.

    Raises:
        UsageError: a bad value list or range, a bad define name, an unknown name in a constraint,
            an option the family does not have.
    """
    opt_names = {o.name for o in fam.OPTIONS}
    given: dict[str, str] = {}
    rules: list[str] = []
    table = table_for(spec, v.name) if use_table else None
    if table is not None:
        given.update(table.params)
        rules += list(table.require)
    given.update({k: str(val) for k, val in defines})
    if block is not None:
        given[BLOCK] = block
    given.update({k: str(val) for k, val in (options or {}).items()})
    rules += list(require)
    dims = []
    for name, text in given.items():
        kind = BLOCK if name == BLOCK else "option" if name in opt_names else "define"
        what = "--block" if kind == BLOCK else f"--{name}" if kind == "option" else f"-D {name}"
        values, pow2 = parse_values(text, what)
        if kind == "define":
            for val in values:
                validate_define(name, val)
        if kind == BLOCK:
            values = tuple(re.sub(r"\s+", "", x) for x in values)
        dims.append(Dim(name=name, kind=kind, values=values, pow2=pow2, text=str(text)))
    if not dims:
        raise UsageError(f"nothing to tune: {spec.name}/{v.name} has no [[tune]] table; give dimensions "
                         f"(-D NAME=8..64:pow2, --block 128,256, --OPTION a,b)")
    consts = {k: c for k, c in _constants(v).items() if k not in given}
    space = Space(dims=tuple(dims), require=tuple(rules), constants=tuple(sorted(consts.items())))
    space.check()
    return space


def default_point(spec: FamilySpec, fam: Family, v: VariantSpec, space: Space,
                  options: Mapping[str, object] | None = None) -> dict[str, str]:
    """The family's own configuration as a point of ``space``: the variant's block, the options given
    (else their defaults), each define's value in family.toml (an integer expression evaluated), else
    the source's own ``#ifndef`` default; ``""`` where there is no plain value (``768 / BLOCK``).
    """
    consts = _constants(v)
    written = dict(v.defines)
    source = source_defaults(spec.directory / v.source) if v.source else {}
    opt_defaults = {o.name: o.default for o in fam.OPTIONS}
    out = {}
    for d in space.dims:
        if d.kind == BLOCK:
            out[d.name] = fmt_dims(v.block)
        elif d.kind == "option":
            out[d.name] = str((options or {}).get(d.name, opt_defaults.get(d.name, "")))
        elif d.name in consts:
            out[d.name] = str(consts[d.name])
        else:
            value = str(written.get(d.name, source.get(d.name, ""))).strip()
            out[d.name] = value if d.numeric is False or value.lstrip("-").isdigit() else ""
    return out
