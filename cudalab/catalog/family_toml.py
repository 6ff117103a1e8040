"""The rules of a ``family.toml``: its tables checked and turned into frozen specs (pure: no I/O but
whether a variant's source file exists). :mod:`cudalab.catalog` reads the files and keeps the results."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cudalab.errors import CatalogError, UsageError
from cudalab.launch import Dim3, parse_dims
from cudalab.catalog.specs import KINDS, FamilySpec, TuneTable, VariantSpec

__all__ = ["METRICS", "validated"]

METRICS = ("bandwidth", "flops", "rate", "none")
"""bandwidth: GB/s and % of the copy roofline; flops: GFLOP/s and % of the library row; rate: items
(keys sorted, queries answered: ``Case.items``) per second and % of the library row; none: times only."""

_VARIANT_KEYS = {
    "name", "kind", "description", "source", "kernel", "block", "per_thread", "grid", "divisible",
    "block_pow2", "fixed_block", "defines", "shared", "legacy", "params", "dtypes", "tile", "require",
    "grid_stride",
}
_FAMILY_KEYS = {"name", "description", "module", "metric", "dtypes", "default_dtype"}
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
def check_per_sm(expr: str, where: str, known: dict[str, int] | None = None) -> int | None:
    """The one rule for ``sm:K``: K blocks an SM is at least 1 (``sm:-1`` or ``sm:0`` launches nothing, or a
    negative grid). A K naming the launch's names is checked when they are known (``known``: at planning);
    returns K when it could be evaluated.

    Raises:
        CatalogError: K is below 1, or does not evaluate.
    """
    from cudalab.catalog.expr import evaluate, names_in  # noqa: PLC0415

    if known is None and names_in(expr):
        return None
    k = evaluate(expr, known or {})
    if k < 1:
        raise CatalogError(f"{where}: K blocks an SM must be at least 1 (got {k})")
    return k


_GRID = re.compile(r"^(tiles|sm:[A-Za-z0-9_ ()+*/%-]+|\d+(x\d+){0,2})$")  # sm:EXPR: K blocks an SM, K over the launch names

def _dims(value: Any, where: str) -> Dim3:
    try:
        return parse_dims(str(value), where)
    except UsageError as exc:
        raise CatalogError(str(exc)) from None


def _variant(raw: dict[str, Any], family_dir: Path, where: str) -> VariantSpec:
    unknown = set(raw) - _VARIANT_KEYS
    if unknown:
        raise CatalogError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_VARIANT_KEYS)})")
    name = raw.get("name", "")
    if not isinstance(name, str) or not _NAME.match(name):
        raise CatalogError(f"{where}: variant name {name!r} must be lower-case letters, digits, '-' and '_'")
    where = f"{where} ({name})"
    kind = raw.get("kind", "kernel")
    if kind not in KINDS:
        raise CatalogError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    source, kernel = raw.get("source", ""), raw.get("kernel", "")
    if kind == "kernel":
        if not source or not kernel:
            raise CatalogError(f"{where}: a kernel variant needs 'source' and 'kernel'")
        if not (family_dir / source).is_file():
            raise CatalogError(f"{where}: source {source!r} not found in {family_dir}")
        if not _SYMBOL.match(kernel):
            raise CatalogError(f"{where}: kernel {kernel!r} is not a C identifier")
    grid = str(raw.get("grid", "tiles"))
    if not _GRID.match(grid):
        raise CatalogError(f"{where}: grid {grid!r} must be 'tiles', 'sm:K' (K a number or an expression) or dims such as '1' or '4x4'")
    if grid.startswith("sm:"):
        check_per_sm(grid[3:], f"{where}: grid {grid!r}")
    defines = raw.get("defines", {})
    params = raw.get("params", {})
    if not isinstance(defines, dict) or not isinstance(params, dict):
        raise CatalogError(f"{where}: 'defines' and 'params' must be tables")
    lists = {key: raw.get(key, []) for key in ("dtypes", "tile", "require")}
    for key, value in lists.items():
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise CatalogError(f"{where}: '{key}' must be a list of strings")
    if lists["tile"] and not 1 <= len(lists["tile"]) <= 3:
        raise CatalogError(f"{where}: 'tile' takes 1 to 3 expressions")
    return VariantSpec(
        name=name,
        kind=kind,
        description=str(raw.get("description", "")),
        source=source,
        kernel=kernel,
        block=_dims(raw.get("block", "1"), f"{where}: block"),
        per_thread=_dims(raw.get("per_thread", "1"), f"{where}: per_thread"),
        grid=grid,
        divisible=bool(raw.get("divisible", False)),
        block_pow2=bool(raw.get("block_pow2", False)),
        fixed_block=bool(raw.get("fixed_block", False)),
        defines=tuple((str(k), str(v)) for k, v in defines.items()),
        shared=str(raw.get("shared", "0")),
        legacy=str(raw.get("legacy", "")),
        params=tuple(sorted(params.items())),
        dtypes=tuple(lists["dtypes"]),
        tile=tuple(lists["tile"]),
        require=tuple(lists["require"]),
        grid_stride=bool(raw.get("grid_stride", grid.startswith("sm:"))),
    )


_TUNE_KEYS = {"variant", "params", "require", "n", "shape", "description"}


def _tune_tables(raw: Any, variants: set[str], path: Path) -> tuple[TuneTable, ...]:
    """The ``[[tune]]`` tables, their shapes checked (their values are read by :mod:`cudalab.tuning.space`)."""
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise CatalogError(f"{path}: 'tune' must be an array of tables ([[tune]])")
    out = []
    for i, t in enumerate(raw):
        where = f"{path}: tune #{i + 1}"
        unknown = set(t) - _TUNE_KEYS
        if unknown:
            raise CatalogError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_TUNE_KEYS)})")
        if t.get("variant") not in variants:
            raise CatalogError(f"{where}: variant {t.get('variant')!r} is not one of the family's")
        params, require = t.get("params", {}), t.get("require", [])
        if not isinstance(params, dict) or not params or not all(isinstance(v, (str, int)) for v in params.values()):
            raise CatalogError(f"{where}: 'params' must be a non-empty table of NAME = \"values\"")
        if not isinstance(require, list) or not all(isinstance(r, str) for r in require):
            raise CatalogError(f"{where}: 'require' must be a list of strings")
        if any(t.get("variant") == o.variant for o in out):
            raise CatalogError(f"{where}: variant {t['variant']!r} has two [[tune]] tables")
        out.append(TuneTable(variant=t["variant"], params=tuple((str(k), str(v)) for k, v in params.items()),
                             require=tuple(require), n=None if t.get("n") is None else str(t["n"]),
                             shape=None if t.get("shape") is None else str(t["shape"]),
                             description=str(t.get("description", ""))))
    return tuple(out)


def validated(directory: Path, path: Path, data: dict[str, Any]) -> FamilySpec:
    """The spec of one family.toml's tables, every rule checked."""
    fam = data.get("family", {})
    raw_variants = data.get("variant", [])
    # Shapes first: a value of the wrong type would otherwise fail later as a TypeError.
    if not isinstance(fam, dict):
        raise CatalogError(f"{path}: 'family' must be a table ([family])")
    if not isinstance(raw_variants, list) or not all(isinstance(v, dict) for v in raw_variants):
        raise CatalogError(f"{path}: 'variant' must be an array of tables ([[variant]])")
    unknown = set(fam) - _FAMILY_KEYS
    if unknown:
        raise CatalogError(f"{path}: unknown [family] keys {sorted(unknown)}")
    extra_top = set(data) - {"family", "variant", "tune"}
    if extra_top:
        raise CatalogError(f"{path}: unknown tables {sorted(extra_top)}")
    name = fam.get("name", directory.name)
    if name != directory.name:
        raise CatalogError(f"{path}: family name {name!r} must match its folder {directory.name!r}")
    metric = fam.get("metric", "bandwidth")
    if metric not in METRICS:
        raise CatalogError(f"{path}: metric {metric!r} must be one of {', '.join(METRICS)}")
    dtypes = fam.get("dtypes", ["float32"])
    if not isinstance(dtypes, list) or not dtypes or not all(isinstance(d, str) for d in dtypes):
        raise CatalogError(f"{path}: 'dtypes' must be a non-empty list of strings")
    dtypes = tuple(dtypes)
    default_dtype = str(fam.get("default_dtype", dtypes[0]))
    if default_dtype not in dtypes:
        raise CatalogError(f"{path}: default_dtype {default_dtype!r} is not one of the family's dtypes {list(dtypes)}")
    module = fam.get("module", name.replace("-", "_"))
    if not isinstance(module, str) or not _SYMBOL.match(module):
        raise CatalogError(f"{path}: module {module!r} must be a Python module name (cudalab/families/<module>.py)")
    variants = tuple(_variant(v, directory, f"{path}: variant #{i + 1}") for i, v in enumerate(raw_variants))
    if not variants:
        raise CatalogError(f"{path}: no [[variant]] tables")
    seen: set[str] = set()
    for v in variants:
        if v.name in seen:
            raise CatalogError(f"{path}: variant {v.name!r} is declared twice")
        seen.add(v.name)
        bad = set(v.dtypes) - set(dtypes)
        if bad:
            raise CatalogError(f"{path}: variant {v.name!r} lists dtypes {sorted(bad)} the family does not have")
    tune = _tune_tables(data.get("tune", []), {v.name for v in variants}, path)
    return FamilySpec(
        tune=tune,
        name=name,
        description=str(fam.get("description", "")),
        directory=directory,
        module=module,
        metric=metric,
        dtypes=dtypes,
        default_dtype=default_dtype,
        variants=variants,
    )
