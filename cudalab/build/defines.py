"""``-D NAME=VALUE`` overrides: parsed, and refused before any GPU work when they could not run (pure).

A value reaches the compiler as a ``#define`` prelude (:mod:`cudalab.build`), never a command line, so
:func:`validate_define` only lets plain C tokens through. Two more rules need the family:

* a macro the family derives from the launch (``ROWS = "block_y"``, ``TILE = "block_x"``) is a tile
  size or a loop stride: the tiled transposes loop ``for (j = 0; j < TILE; j += ROWS)``, so ``ROWS=0``
  never ends on the GPU. Such an override must be an integer of at least 1;
* a macro whose family value is a non-negative integer (``UNROLL = "4"``, ``IPAD = "1"``) is a count
  or a padding: it may be 0 but not negative.

Values are evaluated with :func:`cudalab.catalog.expr.evaluate` (safe: division by zero is one line, never a
traceback). Values naming launch quantities (``block_y / 2``) are left to the planner, which
evaluates them per launch.
"""

from __future__ import annotations

import re
from typing import Iterable

from cudalab.errors import CatalogError, UsageError
from cudalab.catalog.expr import evaluate
from cudalab.catalog.specs import FamilySpec, VariantSpec

#: The launch quantities a family.toml expression may name (:func:`cudalab.plan.names_for`).
_LAUNCH = re.compile(r"\b(block_[xyz]|threads|tile_[xyz]|warps)\b")
# C integer suffixes (8u, 16UL) mean nothing to the evaluator: the value is the same.
_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")


#: A C macro name.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# One token of a define value: a number with its C suffix (8u, 1.5f, 1e-3, 0x1F), an identifier,
# or an arithmetic operator. Spaces separate tokens; nothing else may appear.
_NUMBER = r"(?:0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fFlLuU]*)"
_TOKEN = re.compile(rf"{_NUMBER}(?![A-Za-z0-9_.])|[A-Za-z_][A-Za-z0-9_]*|<<|>>|[-+*/%()]| +", re.ASCII)


def validate_define(name: str, value: str) -> None:
    """Refuse a define that is not a plain C macro name and a plain value.

    Values may hold numbers (``8``, ``8u``, ``1.5f``, ``0x20``), identifiers (``float``,
    ``unsigned int``), ``+ - * / % << >> ( )`` and spaces; nothing that could end a line, start a
    string or a directive.

    Raises:
        UsageError: one line naming the define and what is wrong with it.
    """
    if not _NAME.fullmatch(name):
        raise UsageError(f"define name {name!r} is not a C identifier (example: -D UNROLL=8)")
    if name.startswith("__") or re.match(r"_[A-Z]", name) or name == "defined":
        raise UsageError(f"define name {name!r} is reserved for the compiler (as are all names starting "
                         "with __ or with _ and a capital)")
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"define {name} has an empty value (example: -D {name}=8)")
    comment = re.search(r"/[/*]|\*/", value)
    if comment:  # '/*' would swallow the prelude's next lines, '//' the rest of this one
        raise UsageError(f"define {name}={value!r}: {comment.group()!r} starts or ends a C comment; write "
                         "'/ *' with a space for a division then a product")
    pos = 0
    depth = 0
    while pos < len(value):
        m = _TOKEN.match(value, pos)
        if m is None:
            word = re.match(r"[\w.]+", value[pos:])  # a malformed number such as 2x or 1.5.3
            bad = f"{word.group()!r} is not a number or identifier" if word else f"{value[pos]!r} is not allowed"
            raise UsageError(f"define {name}={value!r}: {bad}; a value holds numbers, identifiers, "
                             "+ - * / % << >> ( ) and spaces")
        depth += {"(": 1, ")": -1}.get(m.group(), 0)
        if depth < 0:
            break
        pos = m.end()
    if depth:
        raise UsageError(f"define {name}={value!r}: unbalanced parentheses")


def _rules(spec: FamilySpec | None) -> dict[str, tuple[int, str]]:
    """Macro -> (the least value it may take, why), from every variant of the family."""
    rules: dict[str, tuple[int, str]] = {}
    for v in spec.variants if spec else ():
        for name, rule in _variant_rules(v).items():
            if name not in rules or rule[0] > rules[name][0]:
                rules[name] = rule
    return rules


def _variant_rules(v: VariantSpec) -> dict[str, tuple[int, str]]:
    rules: dict[str, tuple[int, str]] = {}
    for name, expr in v.defines:
        if _LAUNCH.search(expr):
            rules[name] = (1, f"{v.name}'s {name} is {expr}, a tile size or loop stride")
        elif expr.strip().isdigit():
            rules[name] = (0, f"{v.name}'s {name} is a count or padding ({expr} by default)")
    return rules


def check_launch_defines(variant: VariantSpec, overrides: dict[str, str]) -> None:
    """Refuse ``-D`` overrides that, evaluated for one launch (``ROWS=block_y-8`` at block 32x8 is 0), fall
    below what the variant's macro may take: the planner calls this before anything is built.

    Raises:
        UsageError: naming the macro, its value for this launch and the rule.
    """
    rules = _variant_rules(variant)
    for name, value in overrides.items():
        if name not in rules:
            continue
        try:
            n = int(str(value), 0)
        except ValueError:
            continue  # not a plain integer for this launch: the compiler judges it
        least, why = rules[name]
        if n < least:
            raise UsageError(f"-D {name}={value} for this launch: {why}; it must be at least {least}")


def _value(name: str, text: str) -> int | None:
    """The integer a plain value stands for, None when it names something (``float``, ``block_y``).

    Raises:
        UsageError: it divides by zero, overflows or has a huge exponent.
    """
    try:
        return evaluate(_SUFFIX.sub(r"\1", text), {})
    except CatalogError as exc:
        msg = str(exc)
        if "division by zero" in msg or "exponent" in msg or "64 bits" in msg:
            raise UsageError(f"-D {name}={text}: {msg.split(': ', 1)[-1]}") from None
        return None  # a name or a C token the evaluator does not know: the compiler judges it


def parse_defines(items: Iterable[str], spec: FamilySpec | None = None) -> tuple[tuple[str, str], ...]:
    """Parse repeated ``NAME=VALUE`` options (``NAME=1,2,4``: a sweep, each value checked).

    Args:
        items: the option values as typed.
        spec: the family, for its macros' rules (None: only the token rules).

    Raises:
        UsageError: one line: not NAME=VALUE, a value :func:`validate_define` refuses,
            division by zero, or a value below what the family's macro may take (with the rule).
    """

    rules = _rules(spec)
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--define {item!r} must be NAME=VALUE (example: -D UNROLL=8)")
        for part in value.split(","):
            part = part.strip()
            validate_define(name, part)
            n = _value(name, part)
            if n is not None and name in rules and n < rules[name][0]:
                least, why = rules[name]
                raise UsageError(f"-D {name}={part}: {why}; it must be at least {least}")
        out.append((name, value))
    return tuple(out)
