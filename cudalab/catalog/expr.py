"""A tiny arithmetic evaluator for family.toml fields such as ``shared = "threads * itemsize"`` and for
``-D`` values (pure).

Safe on any text: division by zero, a negative or huge exponent and results beyond 64 bits are refused
in one line instead of raising Python's own errors or computing for minutes (``2**2**40``).
"""

from __future__ import annotations

import ast
import operator

from cudalab.errors import CatalogError

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,  # integer arithmetic only: sizes and counts
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
#: Results (and every step) must fit a 64-bit integer: they become C macros and launch sizes.
LIMIT = 2**63
_CMP = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
    ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}


def evaluate(text: str | int, names: dict[str, int]) -> int:
    """Evaluate an integer expression over ``names``: + - * / // % **, parentheses, comparisons
    (true is 1) and ``and`` / ``or``.

    Raises:
        CatalogError: the expression uses anything else or an unknown name, divides by zero, or leaves
            64 bits.
    """
    if isinstance(text, int):
        return text
    shown = repr(str(text)) if len(str(text)) <= 60 else repr(str(text)[:40]) + "..."
    if len(str(text)) > 1000:  # a macro or a size, never a program: and the parser recurses
        raise CatalogError(f"expression {shown} is longer than 1000 characters")
    try:
        tree = ast.parse(str(text), mode="eval")
    except SyntaxError as exc:
        raise CatalogError(f"expression {shown} is not valid: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # a 5,000-digit literal, deep parentheses
        raise CatalogError(f"expression {shown} is not valid: {type(exc).__name__}") from None

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return _bounded(node.value)
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise CatalogError(f"expression {shown}: unknown name {node.id!r} (known: {', '.join(sorted(names))})")
            return int(names[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
                raise CatalogError(f"expression {shown}: division by zero")
            if isinstance(node.op, ast.Pow) and not 0 <= right <= 64:
                raise CatalogError(f"expression {shown}: exponent {right} is outside 0..64")
            return _bounded(_OPS[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.Compare) and all(type(op) in _CMP for op in node.ops):
            left = walk(node.left)
            for op, comp in zip(node.ops, node.comparators):
                right = walk(comp)
                if not _CMP[type(op)](left, right):
                    return 0
                left = right
            return 1
        if isinstance(node, ast.BoolOp):
            vals = [walk(v) for v in node.values]
            return int(all(vals) if isinstance(node.op, ast.And) else any(vals))
        raise CatalogError(f"expression {shown}: only integers, names, + - * / % **, comparisons, and/or are allowed")

    return walk(tree)


def _bounded(value: int) -> int:
    if not -LIMIT <= value < LIMIT:
        raise CatalogError(f"expression result {value:.3g} does not fit 64 bits")
    return value


def names_in(text: str | int) -> set[str]:
    """The names an expression reads (none for an int); one that does not parse reads none here (its
    evaluation says why)."""
    if isinstance(text, int) or len(str(text)) > 1000:
        return set()
    try:
        tree = ast.parse(str(text), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
