"""The ncu driver: one ncu process per command profiles the verified launch of every selected variant.

``ncu --csv --print-units base --log-file LOG --clock-control none --kernel-name regex:^(k1|k2)$ --metrics ...
python -m cudalab.worker.child PLAN RESULT`` runs every selected variant once (profile mode: one poisoned,
verified launch each) on the child protocol (:mod:`cudalab.worker.child`); ncu's CSV goes to its log file, apart
from the program's own output (base units keep durations in ns at full precision). Where the report
itself is wanted (``--export FILE.ncu-rep``, ``--source``), ``-o REPORT`` replaces the log and ``ncu
--import REPORT --csv --print-units base`` reads the report back. ``--clock-control none`` keeps the
GPU's own clocks so durations match CUDA events. The child's rows give each variant's verdict and launch
log; :mod:`cudalab.ncu.match` pairs ncu's launches with them.

``--export FILE.csv`` writes cudalab's marker lines (the request and each child row's launch log) and
then ncu's CSV, so ``--import`` matches exactly; ``--export FILE.ncu-rep`` copies ncu's report and writes
the marker lines beside it (``FILE.ncu-rep.cudalab``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from cudalab.execute import toolchild as child
from cudalab.plan import RunRequest, precheck
from cudalab.errors import KernelNotProfiledError, ToolFailedError, ToolMissingError
from cudalab.files import atomic_write
from cudalab.ncu.metrics import resolve_metrics
from cudalab.ncu.parse import MARKER, check_output, parse_csv, tail
from cudalab.ncu.rows import NcuReport, attach_source, build_rows
from cudalab.ncu.source import PAGE_MARKER, parse_source, source_page_argv
from cudalab.records.results import Result, RunPoint
from cudalab.build.toolkit import find_cuda_tool

Runner = Callable[..., subprocess.CompletedProcess]

NCU_HINT = ("install Nsight Compute: it comes with the CUDA toolkit (cuda-nsight-compute package, "
            "https://developer.nvidia.com/cuda-downloads) or alone from https://developer.nvidia.com/nsight-compute")
#: Where --export FILE.ncu-rep keeps the marker lines ncu's binary report cannot hold.
SIDECAR = ".cudalab"


def find_ncu() -> str:
    """Path of ncu: ``$CUDALAB_NCU``, else as :func:`cudalab.build.toolkit.find_cuda_tool` looks.

    Raises:
        ToolMissingError: naming where cudalab looked and how to get ncu.
    """
    env = os.environ.get("CUDALAB_NCU")
    if env:
        if not Path(env).is_file():
            raise ToolMissingError(f"CUDALAB_NCU={env} is not a file; {NCU_HINT}")
        if not os.access(env, os.X_OK):  # said now, not as an OSError from the first run
            raise ToolMissingError(f"CUDALAB_NCU={env} is not executable (chmod +x it, or point it at ncu)")
        return env
    return find_cuda_tool("ncu", "ncu (Nsight Compute)", NCU_HINT)


def kernel_filter(symbols: Sequence[str]) -> str:
    """ncu's ``--kernel-name`` value that matches exactly these symbols."""
    names = list(dict.fromkeys(symbols))
    return f"regex:^({'|'.join(re.escape(s) for s in names)})$"


#: What ``--source``/``--advice`` add to ncu's argv: every section (the source counters give the per-line
#: figures, the sections' rules the advice) and the CUDA files copied into the report, so it stands alone.
SOURCE_ARGS = ("--set", "full", "--import-source", "yes")


def profile_argv(ncu: str, report: str | os.PathLike, kernels: Sequence[str], metrics: Sequence[str],
                 extra: Sequence[str] = (), log: str | os.PathLike | None = None) -> list[str]:
    """ncu's argv prefix for one child run: every launch of the given kernels, into ``report`` (.ncu-rep added),
    or with ``log``, no report: ncu's own output, the CSV in base units included, into that file (one ncu
    process instead of a second one to read a report back: 0.6 s less on an H100)."""
    out = ["--csv", "--print-units", "base", "--log-file", str(log)] if log is not None else ["-o", str(report), "-f"]
    return [ncu, *out, "--clock-control", "none", *extra, "--kernel-name", kernel_filter(kernels),
            "--metrics", ",".join(metrics)]


def import_argv(ncu: str, report: str | os.PathLike) -> list[str]:
    """ncu's argv that prints a saved report as CSV in base units."""
    return [ncu, "--import", str(report), "--csv", "--print-units", "base"]


def read_report(ncu: str, report: str | os.PathLike, run: Runner, timeout: float | None = None) -> str:
    """ncu's CSV of a saved report.

    Raises:
        ToolFailedError: ncu could not read it.
    """
    argv = import_argv(ncu, report)
    try:
        proc = run(argv, capture_output=True, text=True, encoding="utf-8", errors="replace", env=child.child_env(),
                   timeout=timeout)
    except OSError as exc:
        raise ToolMissingError(f"could not start {ncu}: {exc}; {NCU_HINT}") from None
    out = (proc.stdout or "") + "\n" + (proc.stderr or "")
    if proc.returncode != 0 and "print-units" in out:  # an ncu without --print-units: the parser scales units
        proc = run(argv[:-2], capture_output=True, text=True, encoding="utf-8", errors="replace",
                   env=child.child_env(), timeout=timeout)
        out = (proc.stdout or "") + "\n" + (proc.stderr or "")
    check_output(out)
    if proc.returncode != 0:
        raise ToolFailedError(f"ncu could not read the report {Path(report).name} (exit {proc.returncode})", tail(out))
    return proc.stdout or ""


def _read_log(log: Path | None) -> str:
    """ncu's log file ('' when there is none, or ncu never wrote it)."""
    if log is None:
        return ""
    try:
        return log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def marker_lines(req: RunRequest, rows: Sequence[Result]) -> str:
    """The lines an export starts with: the request, then each child row's status and launch log."""
    lines = [f"{MARKER} request {json.dumps(req.to_dict())}"]
    for r in rows:
        lines.append(f"{MARKER} variant " + json.dumps({"variant": r.variant, "status": str(r.status),
                                                        "reason": r.reason, "launches": child.launches(r)}))
    return "\n".join(lines) + "\n"


def problem_label(problem, source: str = "") -> str:
    """``size 4096x4096 · dtype float32 · ipad 1`` and where the size came from."""
    opts = "".join(f" · {k} {v}" for k, v in problem.options)
    return f"size {problem.label} · dtype {problem.dtype}{opts}" + (f" ({source})" if source else "")


def profile(req: RunRequest, metrics: str | None = None, export: str | os.PathLike | None = None,
            ncu: str | None = None, run: Runner = subprocess.run, timeout: float = 600.0,
            source: bool = False, launches: int = 1, cache: str | None = None) -> NcuReport:
    """Profile every selected kernel variant of ``req`` in one child run under one ncu process.

    Args:
        req: the run (from the CLI's option set); profile mode is forced.
        metrics: ``smem``, ``memory``, ``time`` or a comma list (None: the family's default).
        export: keep the raw result: ``*.ncu-rep`` (ncu's report + marker sidecar) or CSV with markers.
        ncu: path of ncu (default: :func:`find_ncu`).
        run: ``subprocess.run`` (a fake in tests).
        timeout: seconds the profiled run may take.
        source: also collect ncu's full set with the CUDA source imported (per-line figures and advice).
        launches: each variant's launches under ncu (the verified one, then repeats: ``cudalab truth``'s median);
            every one is profiled, and a row's ``durations_ns`` lists them.
        cache: ncu's ``--cache-control`` (``all``: caches flushed before each profiled launch, ncu's default;
            ``none``: hot), None: ncu's default.

    Raises:
        ToolMissingError, CounterPermissionError, ToolFailedError, KernelNotProfiledError, UsageError.
    """
    req = replace(req, profile=True, roofline=False, profile_launches=max(1, int(launches)))
    plan = precheck(req)  # the one plan of this point: the child runs it as it is
    spec, fam, problem, selected = plan.spec, plan.family, plan.problem, plan.variants
    mset = resolve_metrics(metrics, spec, fam, problem)
    kernels = [v.kernel for v in selected if v.kind == "kernel"]
    if not kernels:
        raise KernelNotProfiledError(f"{spec.name}: no kernel variant selected (host, driver and library rows "
                                     "have no kernel of cudalab's)")
    exe = ncu or find_ncu()
    # a report file only where one is kept or its source page is read; else the CSV comes in ncu's log
    keep = source or (export is not None and str(export).endswith(".ncu-rep"))
    with tempfile.TemporaryDirectory(prefix="cudalab-ncu-") as tmp:
        base = Path(tmp) / "report"
        log = None if keep else Path(tmp) / "ncu.log"
        extra = (SOURCE_ARGS if source else ()) + (("--cache-control", cache) if cache else ())
        prefix = profile_argv(exe, base, kernels, mset.metrics, extra, log)
        try:
            done = child.run_child(plan, prefix, timeout, workdir=tmp, run=run)
        except subprocess.TimeoutExpired:
            raise ToolFailedError(f"ncu profiling {spec.name} ran past {timeout:g} s") from None
        except OSError as exc:
            raise ToolMissingError(f"could not start {exe}: {exc}; {NCU_HINT}") from None
        logged = _read_log(log)
        check_output(done.output + "\n" + logged)
        if done.result is None:
            raise ToolFailedError(f"the profiled run of {spec.name} wrote no result (ncu exit {done.returncode}); "
                                  "its output ends:", tail(done.output + "\n" + logged))
        if done.result.error:
            raise ToolFailedError(f"the profiled run of {spec.name} refused: {done.result.error}")
        rep = base.with_name(base.name + ".ncu-rep")
        if not (rep.is_file() if log is None else '"Metric Value"' in logged):
            what = "no report" if log is None else "no metrics"
            raise KernelNotProfiledError(f"ncu wrote {what}: it saw no launch of {', '.join(sorted(set(kernels)))} "
                                         f"(ncu exit {done.returncode}); its output ends:",
                                         tail(done.output + "\n" + logged))
        text = read_report(exe, rep, run, timeout) if log is None else logged
        parsed = parse_csv(text, f"ncu --import {rep.name}" if log is None else "ncu's log")
        rows, notes = build_rows(selected, done.result.rows, parsed.launches, fam, problem)
        page = read_source_page(exe, rep, run, timeout) if source else None
        if source:
            rows = attach_source(rows, parsed.launches, parse_source(page or ""), parsed.rules)
        if parsed.truncated:
            notes.append(f"ncu's report is incomplete: {parsed.truncated}")
        if export:
            notes.append(_export(Path(export), marker_lines(req, done.result.rows), text, rep, page))
    source = f"ncu ({Path(exe).name}), --clock-control none, one process for {len(kernels)} variant(s) " \
             f"({done.seconds:.1f} s)"
    if source:
        source += "; --set full --import-source yes (kernels built with -lineinfo, as every cudalab build)"
    return NcuReport(spec.name, mset, rows, source, problem_label(problem), tuple(notes), parsed.truncated,
                     has_source=page is not None, has_rules=bool(page is not None or parsed.rules),
                     problem_data=tuple(problem.to_dict().items()))


def read_source_page(ncu: str, report: str | os.PathLike, run: Runner, timeout: float | None = None) -> str | None:
    """The report's source page as CSV (CUDA lines and their SASS), or None when ncu prints none
    (a report profiled without the source counters, or an ncu without ``--print-source``)."""
    proc = run(source_page_argv(ncu, str(report)), capture_output=True, text=True, encoding="utf-8",
               errors="replace", env=child.child_env(), timeout=timeout)
    out = proc.stdout or ""
    if proc.returncode != 0 or '"Line No"' not in out:
        return None
    return out


def _export(path: Path, markers: str, text: str, rep: Path, page: str | None = None) -> str:
    """Write the raw result; return a line saying where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".ncu-rep"):
        shutil.copyfile(rep, path)
        atomic_write(str(path) + SIDECAR, markers)
        return f"ncu report written to {path} (cudalab's launch log beside it: {path.name}{SIDECAR})"
    body = markers + text.strip() + "\n"
    if page is not None:  # the source page after the details page, behind a marker line
        body += PAGE_MARKER + "\n" + page.strip() + "\n"
    atomic_write(path, body)
    return f"raw ncu CSV written to {path} (read it back with --import)"



def source_extra(row) -> dict:
    """A row's per-line figures and rules as a saved run keeps them (``ncu_lines``, ``ncu_rules``; none: {})."""
    out: dict = {}
    if row.lines:
        out["ncu_lines"] = [ln.to_dict() for ln in row.lines]
    if row.rules:
        out["ncu_rules"] = [r.to_dict() for r in row.rules]
    return out


def add_ncu(point: RunPoint, req: RunRequest, metrics: str | None = None, ncu: str | None = None,
            run: Runner = subprocess.run, timeout: float = 600.0, source: bool = False) -> RunPoint:
    """``cudalab <family> --ncu``: profile the point's request and merge the figures its metric set keeps into
    each row's ``extra`` (:meth:`cudalab.ncu.metrics.MetricSet.values`; smem set when the family declares
    smem expectations, else memory), and the set's columns and legend into the point's instruments; a row ncu
    could not match gets ``ncu_status``/``ncu_note`` instead.
    ``source``: also the per-line figures and the rules (``extra["ncu_lines"]``, ``extra["ncu_rules"]``)."""
    rep = profile(req, metrics, None, ncu, run, timeout, source=source)
    by = {r.variant: r for r in rep.rows}
    rows = []
    for r in point.results:
        nr = by.get(r.variant)
        if nr is None:
            rows.append(r)
            continue
        extra = dict(r.extra)
        if nr.launch is not None:
            extra.update(rep.metric_set.values(nr))
            extra.update(source_extra(nr))
        elif nr.status != r.status:
            extra.update(ncu_status=str(nr.status), ncu_note=nr.note)
        rows.append(replace(r, extra=extra))
    inst = rep.metric_set.instrument()
    others = tuple(i for i in point.instruments if i.name != inst.name)
    return replace(point, results=tuple(rows), instruments=others + (inst,))
