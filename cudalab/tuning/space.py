"""A tuning campaign's search space: its dimensions, their values and the constraints over them (pure).

A dimension is one sweep axis a run already takes: ``--block``, a family option (``--tile``), or a
``-D NAME``. Its values are written as a sweep's are, plus ranges:

* ``8,16,32``: those values;
* ``2..5``: every integer from 2 to 5;
* ``8..64:pow2``: the powers of two from 8 to 64 (kept as exponents for the strategies that model
  numbers: CMA-ES and the Gaussian process see 3..6, not 8..64).

Constraints (``--require 'WT_BM % WT_WM == 0'``) are :mod:`cudalab.catalog.expr` expressions over the
dimensions, the variant's integer defines and, from the block, ``block_x``, ``block_y``, ``block_z``
and ``threads``; a name outside those is refused before anything runs.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from cudalab.errors import CatalogError, UsageError
from cudalab.catalog.expr import LIMIT, evaluate

__all__ = ["Dim", "Space", "parse_values", "point_key", "BLOCK", "ENUMERATE_LIMIT"]

#: The dimension name of ``--block``.
BLOCK = "block"
#: Spaces up to this many points (before constraints) are counted exactly; larger ones are estimated.
ENUMERATE_LIMIT = 2_000_000
#: The most values one range may give (a typo such as 1..10000000 is refused, not enumerated).
MAX_VALUES = 100_000
_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*(?::\s*(pow2|\d+))?\s*$")
_DIMS = re.compile(r"^\d+(x\d+){0,2}$")


@dataclass(frozen=True)
class Dim:
    """One search dimension.

    Attributes:
        name: the define's name, the option's name, or ``block``.
        kind: ``define``, ``option`` or ``block``.
        values: every value, as the run's axis takes it (text).
        pow2: the values are powers of two (strategies see the exponent).
        text: what the user wrote (shown by ``cudalab list``).
    """

    name: str
    kind: str
    values: tuple[str, ...]
    pow2: bool = False
    text: str = ""

    @property
    def numeric(self) -> bool:
        """Every value is an integer (so the value is ordered and an expression may name it)."""
        return all(re.fullmatch(r"-?\d+", v) for v in self.values)


def parse_values(text: str, what: str) -> tuple[tuple[str, ...], bool]:
    """The values of one dimension written ``a,b,c``, ``LO..HI``, ``LO..HI:STEP`` or ``LO..HI:pow2``.

    Returns:
        (values, pow2).

    Raises:
        UsageError: an empty entry, a range with no values or too many, a duplicated value.
    """
    text = str(text).strip()
    for whole in re.findall(r"-?\d+", text):  # the family commands' rule for a -D value (catalog.expr.LIMIT)
        if not -LIMIT <= int(whole) < LIMIT:
            raise UsageError(f"{what}={text}: {whole} does not fit 64 bits")
    m = _RANGE.match(text)
    if m:
        lo, hi, step = int(m.group(1)), int(m.group(2)), m.group(3)
        if step == "pow2":
            values = [1 << e for e in range(0, 63) if lo <= 1 << e <= hi]
        else:
            by = int(step or 1)
            if by < 1:
                raise UsageError(f"{what}={text}: the step must be at least 1")
            if (hi - lo) // by + 1 > MAX_VALUES:
                raise UsageError(f"{what}={text}: more than {MAX_VALUES} values; narrow the range")
            values = list(range(lo, hi + 1, by))
        if not values:
            raise UsageError(f"{what}={text}: the range has no values (example: {what}=8..64:pow2)")
        return tuple(str(v) for v in values), step == "pow2"
    items = [s.strip() for s in text.split(",")]
    if not text or not all(items):
        raise UsageError(f"{what}={text!r} has an empty entry (example: {what}=8,16,32 or 8..64:pow2)")
    if len(set(items)) != len(items):
        raise UsageError(f"{what}={text!r} names a value twice")
    return tuple(items), False


def point_key(point: Mapping[str, str]) -> str:
    """A point as one text (``WT_BK=16 block=256``), its names in the space's order."""
    return " ".join(f"{k}={v}" for k, v in point.items())


def names_of(dims: Sequence[Dim], point: Mapping[str, str], constants: Mapping[str, int]) -> dict[str, int]:
    """The expression names of one point: its integer values, the constants, the block's sizes."""
    names = dict(constants)
    for d in dims:
        v = point[d.name]
        if d.kind == BLOCK:
            x, y, z = (list(map(int, v.split("x"))) + [1, 1])[:3]
            names.update(block_x=x, block_y=y, block_z=z, threads=x * y * z)
        elif re.fullmatch(r"-?\d+", v):
            names[d.name] = int(v)
    return names


@dataclass(frozen=True)
class Space:
    """The dimensions and constraints of a campaign.

    Attributes:
        dims: the dimensions, in the order they were given.
        require: constraint expressions; a point must make each one true (non-zero).
        constants: names every expression may use (the variant's integer defines, the default block).
    """

    dims: tuple[Dim, ...]
    require: tuple[str, ...] = ()
    constants: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for d in self.dims:
            if d.name in seen:
                raise UsageError(f"dimension {d.name} is given twice")
            seen.add(d.name)
            if d.kind == BLOCK and not all(_DIMS.match(v) for v in d.values):
                raise UsageError(f"--block values must be sizes such as 256 or 32x8 (got {', '.join(d.values)})")

    @property
    def known(self) -> set[str]:
        """The names a constraint may use."""
        out = {n for n, _ in self.constants} | {d.name for d in self.dims if d.kind != BLOCK}
        if any(d.kind == BLOCK for d in self.dims) or "threads" in dict(self.constants):
            out |= {"block_x", "block_y", "block_z", "threads"}
        return out

    def check(self) -> None:
        """Refuse a constraint that is not an expression or names something unknown (before any run).

        Raises:
            UsageError: one line naming the constraint and the unknown name.
        """
        known = self.known
        for rule in self.require:
            try:
                tree = ast.parse(rule, mode="eval")
            except SyntaxError as exc:
                raise UsageError(f"--require {rule!r} is not an expression: {exc.msg}") from None
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and node.id not in known:
                    raise UsageError(f"--require {rule!r}: unknown name {node.id!r} "
                                     f"(known: {', '.join(sorted(known)) or 'none'})")

    def size(self) -> int:
        """Points in the cross product, before constraints."""
        n = 1
        for d in self.dims:
            n *= len(d.values)
        return n

    def allows(self, point: Mapping[str, str]) -> str:
        """Empty when ``point`` meets every constraint, else the first one it breaks (its words)."""
        names = names_of(self.dims, point, dict(self.constants))
        for rule in self.require:
            try:
                ok = evaluate(rule, names)
            except CatalogError as exc:  # 64 // 0 for this point: the point is refused, not the space
                return f"{rule}: {str(exc).split(': ', 1)[-1]}"
            if not ok:
                return rule
        return ""

    def points(self) -> Iterator[dict[str, str]]:
        """Every point of the cross product, the last dimension varying fastest."""
        names = [d.name for d in self.dims]
        for combo in itertools.product(*[d.values for d in self.dims]):
            yield dict(zip(names, combo))

    def valid_points(self) -> list[dict[str, str]]:
        """Every point that meets the constraints.

        Raises:
            UsageError: the cross product is too large to list (:data:`ENUMERATE_LIMIT`).
        """
        if self.size() > ENUMERATE_LIMIT:
            raise UsageError(f"the space has {self.size():,} points before constraints, more than "
                             f"{ENUMERATE_LIMIT:,} to list; narrow a dimension")
        return [p for p in self.points() if not self.allows(p)]

    def count_valid(self) -> int | None:
        """How many points meet the constraints (None: too many to count)."""
        return len(self.valid_points()) if self.size() <= ENUMERATE_LIMIT else None

    def describe(self) -> dict[str, Any]:
        """A plain description (JSON): dimensions with their values, and the constraints."""
        return {"dims": [{"name": d.name, "kind": d.kind, "values": list(d.values), "pow2": d.pow2} for d in self.dims],
                "require": list(self.require)}

    def fingerprint(self, context: Mapping[str, Any]) -> str:
        """A short hash of the space and ``context`` (family, variant, problem, objectives): a campaign
        stored under it is only continued by the same."""
        text = json.dumps({"space": self.describe(), "context": dict(context)}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
