"""``cudalab ncu FAMILY --import FILE``: render a saved ncu file (CSV on any machine; ``.ncu-rep`` needs ncu).

A file cudalab exported starts with marker lines (the request and each variant's launch log): it is
matched exactly and its size, options and verdicts come from the file. A plain ncu CSV has none: the
file's kernels are checked against the family (another family's file is refused), the size is read
from the launch grids where one size explains every launch, each variant's launch is planned at that
size and matched by kernel name and launch shape like a live run.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

from cudalab import catalog, files
from cudalab.plan import RunRequest, make_problem, plan_launch
from cudalab import launch as L
from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.errors import CudalabError, ForeignProfileError, KernelNotProfiledError
from cudalab.families import Family, Size
from cudalab.ncu.match import Key
from cudalab.ncu.metrics import infer_metric_set, resolve_metrics
from cudalab.ncu.parse import KernelLaunch, ParsedCsv, parse_csv
from cudalab.ncu.profile import SIDECAR, Runner, find_ncu, problem_label, read_report, read_source_page
from cudalab.ncu.rows import NcuReport, attach_source, build_rows
from cudalab.ncu.source import parse_source, split_pages
from cudalab.records.results import PASSED, Result, Status

_PROBLEM_FIELDS = ("n", "shape", "dtype", "block", "grid", "options", "defines")


def load_import(path: str | os.PathLike, req: RunRequest, metrics: str | None = None,
                ncu: str | None = None, run: Runner = subprocess.run, source: bool = False) -> NcuReport:
    """Build the report from a saved file.

    Args:
        path: ``*.ncu-rep`` (read with ncu, no GPU needed) or a CSV (ncu's, or a cudalab export).
        req: the family and variants asked for; its size counts only when the user gave one (n/shape).
        metrics: the metric set to show (None: the one the file was collected with).
        source: read a ``.ncu-rep``'s source page too (one more ncu call); a CSV's is read when it holds one.

    Raises:
        UsageError: no such file; ForeignProfileError: another family's file or contradicting shapes;
        NcuParseError, KernelNotProfiledError: nothing usable in it.
    """
    path = Path(path)
    files.check_input(path, "--import")  # /dev/null, a folder: said as such, not "no such file"
    spec = catalog.family(req.family)
    if path.name.endswith(".ncu-rep"):
        exe = ncu or find_ncu()
        text = read_report(exe, path, run)
        side = Path(str(path) + SIDECAR)
        if side.is_file():  # the launch log --export wrote beside the report
            text = files.read_text(side, "--import") + text
        page = read_source_page(exe, path, run) if source else None
    else:  # bounded, and binary bytes are refused by offset, never echoed to the terminal
        text, page = split_pages(files.read_text(path, "--import"))
    parsed = parse_csv(text, str(path))
    request = next((p for k, p in parsed.markers if k == "request" and isinstance(p, dict)), None)
    if request is not None:
        req, child_rows, source, doubled = _from_markers(path, spec, req, request, parsed)
    else:
        req, child_rows, source = _from_shapes(path, spec, req, parsed)
        doubled = True
    prob_req = replace(req, variants=None, profile=True)
    fam, problem = _family(spec), make_problem(spec, _family(spec), prob_req)
    # as a live profile: kernels only, the --add kernels the file's request names among them
    from cudalab.catalog import user  # noqa: PLC0415

    chosen = [] if req.add and (req.variants or "").strip() == "none" else spec.select(req.variants)
    selected = [v for v in chosen + user.variants(req.add, spec) if v.kind == "kernel"]
    rows, notes = build_rows(selected, child_rows, parsed.launches, fam, problem, doubled_ok=doubled)
    if request is None and any(r.status == Status.MISSING for r in rows):
        # the file may hold only the selected variants' run: shared keys then count only those
        names = {v.name for v in selected}
        alt, alt_notes = build_rows(selected, [r for r in child_rows if r.variant in names], parsed.launches, fam,
                                    problem, doubled_ok=doubled)
        if sum(r.status == Status.MISSING for r in alt) < sum(r.status == Status.MISSING for r in rows):
            rows, notes = alt, alt_notes
    blocks = parse_source(page) if page else ()
    if blocks or parsed.rules:
        rows = attach_source(rows, parsed.launches, blocks, parsed.rules)
    if parsed.truncated:
        notes.insert(0, f"the file is cut off or incomplete: {parsed.truncated}")
    if request is None:
        notes.append("verdicts: the file holds no cudalab markers, so whether each launch verified is not known")
    mset = resolve_metrics(metrics, spec, fam, problem) if metrics else infer_metric_set(set(parsed.metric_names))
    return NcuReport(spec.name, mset, rows, f"imported from {path}", problem_label(problem, source), tuple(notes),
                     parsed.truncated, has_source=bool(blocks), has_rules=bool(parsed.rules),
                     problem_data=tuple(problem.to_dict().items()))


def _family(spec: FamilySpec) -> Family:
    from cudalab.families import load  # noqa: PLC0415

    return load(spec.module)


def _from_markers(path: Path, spec: FamilySpec, req: RunRequest, request: dict[str, Any],
                  parsed: ParsedCsv) -> tuple[RunRequest, list[Result], str, bool]:
    """A cudalab export: its request sets the problem, its variant lines the launch logs and verdicts."""
    try:
        saved = RunRequest.from_dict(request)
    except (CudalabError, TypeError, ValueError) as exc:
        raise ForeignProfileError(f"{path}: its cudalab request line is unreadable ({exc})") from None
    if saved.family != spec.name:
        raise ForeignProfileError(f"{path} was exported by `cudalab ncu {saved.family}`, not {spec.name}")
    for f in ("n", "shape"):
        mine, theirs = getattr(req, f), getattr(saved, f)
        if mine is not None and mine != theirs:
            raise ForeignProfileError(f"{path} was profiled with --{f} {theirs}, not {mine}: drop --{f} to read it")
    req = replace(saved, variants=req.variants or saved.variants)
    rows = []
    for kind, p in parsed.markers:
        if kind == "variant" and isinstance(p, dict) and "variant" in p:
            rows.append(Result(variant=str(p["variant"]), kind="kernel", status=Status(p.get("status", "passed")),
                               reason=str(p.get("reason", "")), extra={"launches": p.get("launches", [])}))
    return req, rows, "size and launch log from the file's cudalab markers", False


def _from_shapes(path: Path, spec: FamilySpec, req: RunRequest,
                 parsed: ParsedCsv) -> tuple[RunRequest, list[Result], str]:
    """A plain ncu CSV: check its kernels belong to the family, read the size from the launch shapes."""
    fam = _family(spec)
    kernels = [v for v in spec.variants if v.kind == "kernel"]
    mine = {v.kernel for v in kernels}
    held = sorted({ln.kernel for ln in parsed.launches})
    if not held:
        raise KernelNotProfiledError(f"{path} holds no profiled launch")
    if not mine & set(held):
        others = sorted({f.name for f in catalog.load_catalog().values() for v in f.variants if v.kernel in held})
        hint = f" (they are {', '.join(others)}'s)" if others else ""
        raise ForeignProfileError(f"{path} holds no launch of {spec.name}'s kernels; it holds {', '.join(held)}{hint}")
    keys = {ln.key for ln in parsed.launches if ln.kernel in mine}
    given = req.n is not None or req.shape is not None
    candidates = [req] if given else [req] + [replace(req, **c) for c in _size_guesses(spec, fam, req, parsed.launches)]
    for cand in candidates:
        planned = _plan(spec, fam, cand, kernels, parsed.launches)
        if planned is not None and keys <= {k for ks in planned.values() for k in ks}:
            how = "size as given" if given else ("size read from the file's launch shapes" if cand is not req
                                                 else "the default size, which the file's launch shapes match")
            return cand, _planned_rows(planned, kernels), how
    planned = _plan(spec, fam, req, kernels, parsed.launches) or {}
    wanted = {k for ks in planned.values() for k in ks}
    odd = sorted(keys - wanted)[:3]
    shown = "; ".join(f"{k} grid {g} block {b}" for k, g, b in odd)
    same = sorted({f.name for f in catalog.load_catalog().values() if f.name != spec.name
                   and odd and any(v.kernel == odd[0][0] for v in f.variants)})
    hint = f"; is it a file of {' or '.join(same)}?" if same else "; give the size it was profiled at (--n/--shape)"
    raise ForeignProfileError(f"{path}: launch shapes contradict {spec.name} at any size cudalab can read from "
                              f"the file ({shown}){hint}")


def _plan(spec: FamilySpec, fam: Family, req: RunRequest, kernels: list[VariantSpec],
          launches: tuple[KernelLaunch, ...] = ()) -> dict[str, list[Key]] | None:
    """Each kernel variant's planned launch at the request's size (None: the size itself is refused)."""
    try:
        problem = make_problem(spec, fam, req)
    except CudalabError:
        return None
    out: dict[str, list[Key]] = {}
    for v in kernels:
        try:
            lau = plan_launch(v, fam, problem, req.block, req.grid, L.DeviceLimits(), req.defines)
        except CudalabError:
            continue  # a variant this size refuses ran in no file at this size
        key = (v.kernel, L.fmt_dims(lau.grid), L.fmt_dims(lau.block))
        if (v.grid.startswith("sm:") or v.grid_stride) and req.grid is None:
            # the grid follows the SM count of the GPU that ran it: take the file's, at this block
            key = next((ln.key for ln in launches if ln.kernel == key[0] and ln.block == key[2]), key)
        out[v.name] = [key]
    return out


def _planned_rows(planned: dict[str, list[Key]], kernels: list[VariantSpec]) -> list[Result]:
    return [Result(variant=v.name, kind="kernel", status=PASSED, extra={"launches": [list(k) for k in planned[v.name]]})
            for v in kernels if v.name in planned]


def _size_guesses(spec: FamilySpec, fam: Family, req: RunRequest,
                  launches: tuple[KernelLaunch, ...]) -> list[dict[str, str]]:
    """Sizes that could have produced the file's grids: grid × tile of each family kernel's launch."""
    guesses: list[dict[str, str]] = []
    default = _plan(spec, fam, req, [v for v in spec.variants if v.kind == "kernel"]) or {}
    tiles: dict[str, L.Dim3] = {}
    try:
        problem: Size = make_problem(spec, fam, req)
        for v in spec.variants:
            if v.kind == "kernel" and v.name in default:
                tiles.setdefault(v.kernel, plan_launch(v, fam, problem).tile)
    except CudalabError:
        return guesses
    for ln in launches:
        if ln.kernel not in tiles:
            continue
        g = [int(x) for x in ln.grid.split("x")] + [1, 1]
        t = tiles[ln.kernel]
        ex, ey = g[0] * t[0], g[1] * t[1]
        for c in ({"n": str(ex)}, {"n": str(g[0])}, {"shape": f"{ey}x{ex}"}, {"shape": f"{ex}x{ey}"},
                  {"n": str(g[0] * g[1])}):
            if c not in guesses:
                guesses.append(c)
    return guesses
