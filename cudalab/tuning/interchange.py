"""kernel_tuner's words in cudalab's, and a winner out to a build (pure: no GPU).

- :func:`space_of`: ``tune_params`` and ``restrictions`` as kernel_tuner's ``tune_kernel`` takes them become
  a :class:`~cudalab.tuning.space.Space`'s dimensions and constraints (``block_size_x`` is the block's x, every
  other name a ``-D``), and ``grid_div_x/y/z`` the tile expressions (the grid is the problem over the tile).
- :func:`load_kt_cache`: a finished kernel_tuner campaign's cache file (``cache=`` of ``tune_kernel``) as replay
  data: its space and each configuration's time (None where kernel_tuner recorded a failure).
- :func:`side_by_side`: cudalab's and kernel_tuner's measurements of one space, row by row.
- :func:`write_header`: the winner as a C header of ``#define``\\ s and a JSON file beside it.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from cudalab.errors import UsageError
from cudalab.tuning.space import BLOCK, Dim, Space, parse_values, point_key

__all__ = ["KT_BLOCK_NAMES", "KtSpace", "space_of", "load_kt_cache", "side_by_side", "write_header"]

#: kernel_tuner's default names of the block's sizes (``block_size_names`` renames them).
KT_BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")
_LAUNCH = ("block_x", "block_y", "block_z")
_FAILED = ("InvalidConfig", "CompilationFailedConfig", "RuntimeFailedConfig")


class KtSpace:
    """A kernel_tuner space in cudalab's terms.

    Attributes:
        space: the dimensions (a ``block`` dimension of the block sizes' cross product, a ``-D`` for each other
            parameter) and the constraints, kernel_tuner's block names written as cudalab's (``block_x``).
        defines: the dimensions given as ``-D NAME=VALUES`` pairs; block: the ``--block`` values (None: no block
            parameter).
        require: the constraints as cudalab writes them.
        tile: the tile expressions from ``grid_div_x/y/z``.
        block_names: kernel_tuner's names of the block's sizes the space sets (x, then y, then z).
    """

    def __init__(self, space: Space, defines: tuple[tuple[str, str], ...], block: str | None,
                 require: tuple[str, ...], tile: tuple[str, ...], block_names: tuple[str, ...]):
        self.space, self.defines, self.block, self.require = space, defines, block, require
        self.tile, self.block_names = tile, block_names

    def point_of(self, params: Mapping[str, Any]) -> dict[str, str]:
        """A kernel_tuner configuration (name -> value) as a point of :attr:`space`."""
        out = {}
        for d in self.space.dims:
            if d.kind == BLOCK:
                out[d.name] = "x".join(_text(params.get(n, 1)) for n in self.block_names)
            else:
                out[d.name] = _text(params.get(d.name))
        return out


def _text(v: Any) -> str:
    return str(int(v)) if isinstance(v, bool) is False and isinstance(v, float) and v.is_integer() else str(v)


def _rename(expr: str, names: Sequence[str]) -> str:
    """``expr`` with kernel_tuner's block names written as cudalab's launch names."""
    for kt, ours in zip(names, _LAUNCH):
        expr = re.sub(rf"\b{re.escape(kt)}\b", ours, expr)
    return expr


def space_of(tune_params: Mapping[str, Sequence[Any]], restrictions: Sequence[str] | str | None = None,
             grid_div: Sequence[Sequence[str] | str | None] = (None, None, None),
             block_size_names: Sequence[str] | None = None) -> KtSpace:
    """kernel_tuner's ``tune_params``, ``restrictions`` and ``grid_div_x/y/z`` in cudalab's terms.

    Raises:
        UsageError: an empty or non-list parameter, a restriction that is not text (cudalab's constraints are
            expressions it can check before any build), a value with a comma.
    """
    names = tuple(block_size_names or KT_BLOCK_NAMES)
    if not isinstance(tune_params, Mapping) or not tune_params:
        raise UsageError("tune_params must be a dict of parameter name -> list of values")
    block_vals: list[list[str]] = []
    defines: list[tuple[str, str]] = []
    for name, values in tune_params.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise UsageError(f"tune_params[{name!r}] must be a non-empty list of values")
        texts = [_text(v) for v in values]
        if any("," in t or not t.strip() for t in texts):
            raise UsageError(f"tune_params[{name!r}]: a value may not be empty or hold a comma")
        if name in names:
            block_vals.append(texts)
        else:
            defines.append((name, ",".join(texts)))
    block = None
    given = [n for n in names if n in tune_params]
    if given:
        if given != list(names[:len(given)]):
            raise UsageError(f"tune_params names {', '.join(given)} but not {names[0]}: the block's sizes go x, y, z")
        block = ",".join("x".join(c) for c in itertools.product(*block_vals))
    if restrictions is not None and not isinstance(restrictions, (str, Sequence)):  # 5 is no list of rules
        restrictions = [restrictions]  # refused below as a rule that is not text
    rules = [restrictions] if isinstance(restrictions, str) else list(restrictions or ())
    require = []
    for r in rules:
        if not isinstance(r, str):
            raise UsageError("restrictions must be expressions as text (\"block_size_x * TX <= 128\"): cudalab checks "
                             "them before any build")
        require.append(_rename(r, names))
    tile = []
    for axis, div in enumerate(grid_div):
        if div is None:
            div = [names[axis]]
        elif isinstance(div, str):
            div = [div]
        factors = [_rename(str(f), names) for f in div] or ["1"]
        tile.append(" * ".join(f"({f})" if not re.fullmatch(r"\w+", f) else f for f in factors))
    dims = [Dim(name=n, kind="define", values=parse_values(v, f"-D {n}")[0], text=v) for n, v in defines]
    if block is not None:
        dims.append(Dim(name=BLOCK, kind=BLOCK, values=tuple(block.split(",")), text=block))
    space = Space(dims=tuple(dims), require=tuple(require))
    space.check()
    return KtSpace(space, tuple(defines), block, tuple(require), tuple(tile), tuple(given))


def load_kt_cache(path: str | Path) -> tuple[KtSpace, dict[str, float | None], dict[str, Any]]:
    """A kernel_tuner cache file as replay data: (its space, point key -> time in ms or None, its facts).

    kernel_tuner keeps every configuration it ran under ``cache``, keyed by the values joined with commas, with
    its ``time`` (ms) or a failure's name (``InvalidConfig``...); the parameters under ``tune_params``.

    Raises:
        UsageError: not a kernel_tuner cache (one line; the file is left as it is).
    """
    from cudalab.files import parse_json, read_bytes  # noqa: PLC0415

    try:
        text = read_bytes(Path(path), f"{path}:").decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not a kernel_tuner cache file ({type(exc).__name__})") from None
    if text and text[-3:] not in ("}\n}", "}}}"):  # kernel_tuner writes as it goes: an open one ends in ','
        text = text.rstrip(",") + "}\n}"
    data = parse_json(text, f"{path} is not a kernel_tuner cache file")  # the nesting and size rules of every file read
    if not isinstance(data, dict) or not isinstance(data.get("cache"), dict) or not isinstance(data.get("tune_params"), dict):
        raise UsageError(f"{path} is not a kernel_tuner cache file (no 'cache' and 'tune_params')")
    kt = space_of(data["tune_params"])
    table: dict[str, float | None] = {}
    objective = data.get("objective") or "time"
    if isinstance(objective, list):  # kernel_tuner 1.5 writes its objectives as a list
        objective = objective[0] if objective else "time"
    objective = str(objective)
    for entry in data["cache"].values():
        if not isinstance(entry, dict):
            continue
        value = entry.get(objective)
        # a measurement is positive: kernel_tuner writes none <= 0, so such a value is no time to rank first
        ok = isinstance(value, (int, float)) and math.isfinite(value) and 0 < value < 1e19 and value not in _FAILED
        table[point_key(kt.point_of(entry))] = float(value) if ok else None
    facts = {"device": data.get("device_name"), "kernel": data.get("kernel_name"),
             "problem_size": data.get("problem_size"), "objective": objective, "tool": "kernel_tuner"}
    return kt, table, facts


def side_by_side(ours: Mapping[str, float | None], theirs: Mapping[str, float | None],
                 top: int = 10) -> tuple[list[list[str]], list[str]]:
    """Rows comparing two measurements of one space: cudalab's best ``top`` and kernel_tuner's winner, each with
    both times and both ranks; then lines on how the two agree.

    Returns:
        (rows of [configuration, cudalab ms, rank, kernel_tuner ms, rank], closing lines).
    """
    def ranks(t: Mapping[str, float | None]) -> dict[str, int]:
        ok = sorted((k for k, v in t.items() if v is not None), key=lambda k: t[k])
        return {k: i + 1 for i, k in enumerate(ok)}

    def same_order(t: Mapping[str, float | None]) -> dict[str, float | None]:  # keys of either tool's name order
        return {" ".join(sorted(k.split())): v for k, v in t.items()}

    ours, theirs = same_order(ours), same_order(theirs)
    ro, rt = ranks(ours), ranks(theirs)
    shown = sorted(ro, key=ro.get)[:top]
    kt_best = min(rt, key=rt.get) if rt else None
    if kt_best is not None and kt_best not in shown:
        shown.append(kt_best)

    def cell(t: Mapping[str, float | None], k: str) -> str:
        v = t.get(k)
        return f"{v:.4f}" if v is not None else ("failed" if k in t else "–")

    rows = [[k, cell(ours, k), str(ro.get(k, "–")), cell(theirs, k), str(rt.get(k, "–"))] for k in shown]
    both = [k for k in ro if k in rt]
    lines = [f"{len(ours)} configurations measured by cudalab, {len(theirs)} by kernel_tuner, {len(both)} passed in both"]
    if both and kt_best is not None:
        best = min(ro, key=ro.get)
        lines.append(f"cudalab's best {best} is kernel_tuner's #{rt.get(best, '–')}; kernel_tuner's best {kt_best} is "
                     f"cudalab's #{ro.get(kt_best, '–')}"
                     + (f" ({ours[kt_best] / ours[best]:.3f}x cudalab's best's time)" if ours.get(kt_best) else ""))
    return rows, lines


def write_header(path: str | Path, defines: Mapping[str, str], block: str | None, facts: Mapping[str, Any]) -> Path:
    """Write the winner as a C header (``#define NAME VALUE`` each, guarded by ``#ifndef`` so a build's own
    ``-D`` wins; the block as ``TUNED_BLOCK_X/Y/Z``) and the same as JSON beside it (``PATH.json``); both name the
    GPU and the campaign. Returns the header's path.

    Raises:
        UsageError: the path is refused (a folder, a missing folder) or a name is not a C identifier.
    """
    from cudalab import files  # noqa: PLC0415

    path = Path(path)
    files.check_output_path(str(path), "--header")
    lines = [f"// cudalab tune: the winner of campaign {facts.get('campaign', '?')} on {facts.get('gpu', 'a GPU')}",
             f"// {facts.get('when') or time.strftime('%Y-%m-%d')}; median {facts.get('median_ms', '?')} ms; "
             f"rerun: {facts.get('command', '')}".rstrip(),
             "#pragma once", f"#define CUDALAB_TUNED_GPU {json.dumps(str(facts.get('gpu', '')))}"]
    for name, value in defines.items():
        if not re.fullmatch(r"[A-Za-z_]\w*", name) or "\n" in str(value):
            raise UsageError(f"--header: {name!r} = {value!r} cannot be written as a C macro")
        lines += [f"#ifndef {name}", f"#define {name} {value}", "#endif"]
    if block:
        for axis, size in zip("XYZ", (block.split("x") + ["1", "1"])[:3]):
            lines.append(f"#define TUNED_BLOCK_{axis} {int(size)}")
    files.atomic_write(str(path), "\n".join(lines) + "\n")
    data = {**{k: v for k, v in facts.items()}, "defines": dict(defines), "block": block}
    files.atomic_write(str(path) + ".json", json.dumps(data, indent=1, default=str) + "\n")
    return path
