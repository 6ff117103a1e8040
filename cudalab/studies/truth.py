"""``cudalab truth FAMILY``: each variant timed by every method side by side, against CUPTI's spans and ncu.

The methods are the family run's own (``--launch``): ``events`` (one launch per event pair), ``batch`` (N launches
between two events, the L2 flushed once a batch: the throughput a stream of launches reaches), ``graph`` (CUDA
graph replay; cold: each launch between two event nodes, an empty kernel's windows taken out) and ``cupti`` (N
launches, each timed by its own GPU start and end from CUPTI's activity records; cold: a flush before each
launch, not counted). Each method is one :class:`~cudalab.session.options.RunOptions` (``launch=METHOD``, cold or
``hot``); every point of every method is planned once and all of them run in one GPU worker session, with the
same inputs (one seed). ``--methods`` picks them; ``auto`` is the tables' own run.

**CUPTI is the reference** (issue 59): the truth for a kernel's duration is its own span on the GPU as CUPTI's
activity records give it (what Nsight Systems shows). Each method's distance from it is shown, and the tables'
(``--launch auto``: CUPTI where cupti-python loads, graph replay otherwise, events for a kernel of 20 µs or more).
Beside them, ncu's ``gpu__time_duration`` (each variant launched :data:`NCU_LAUNCHES` times in one process under
ncu; cold: ``--cache-control all``, hot: ``none``; the median of those launches but the first): it reads a fixed
amount above CUPTI's span, measured here as the median of (ncu - CUPTI) over the rows (:func:`ncu_offset`). No
pycuda here: the timing runs in the GPU worker, ncu in its own child (:mod:`cudalab.ncu`, imported when asked).
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from cudalab.bench import summarize
from cudalab.catalog import FamilySpec
from cudalab.errors import CudalabError, UsageError
from cudalab.families import Family
from cudalab.plan import Plan
from cudalab.progress import Observer
from cudalab.records.results import PASSED, Result, Status
from cudalab.session import sweep
from cudalab.session.options import RunOptions

__all__ = ["METHODS", "ALL_METHODS", "REFERENCE", "COMPARED", "TEMPS", "NCU", "NCU_LAUNCHES", "SCHEMA", "Figure",
           "Row", "Truth", "agrees", "ncu_offset", "plan_methods", "truth"]

#: The timing methods a truth runs by default, in the order the table shows them (each a ``--launch`` value).
METHODS = ("events", "batch", "graph", "cupti")
#: What ``--methods`` may name: the default's and ``auto`` (the tables' own run: cupti where it loads, graph
#: otherwise, events for a kernel of 20 µs or more), which a benchmark runs without cupti-python
#: (``CUDALAB_NO_CUPTI=1``) to measure the fallback against CUPTI's spans of the same rows.
ALL_METHODS = METHODS + ("auto",)
#: The reference column: each launch's own span on the GPU from CUPTI's activity records (issue 59).
REFERENCE = "cupti"
#: The methods whose distance from the reference the tables show (the JSON has every method's).
COMPARED = ("events", "batch", "graph")
#: Cold (an L2 flush before each sample, or each launch of a graph) and hot (``--hot``).
TEMPS = ("cold", "hot")
#: The column of ncu's figure.
NCU = "ncu"
#: Launches of each variant under ncu (the first left out of the median).
NCU_LAUNCHES = 10
#: ncu's ``--cache-control`` per temperature.
NCU_CACHE = {"cold": "all", "hot": "none"}
#: The JSON's schema name (``--json``).
SCHEMA = "cudalab-truth/2"
#: What "agrees with CUPTI" means (issue 59): within this fraction of CUPTI's span, or within :data:`WITHIN_MS`.
WITHIN = 0.05
WITHIN_MS = 0.1e-3


def agrees(ms: float | None, ref_ms: float | None) -> bool | None:
    """Whether ``ms`` is within 5% (or 0.1 µs) of the reference ``ref_ms`` (None: one of them is missing)."""
    if ms is None or ref_ms is None or ref_ms <= 0:
        return None
    return abs(ms - ref_ms) <= max(WITHIN * ref_ms, WITHIN_MS)


def ncu_offset(diffs_ms: Sequence[float | None]) -> float | None:
    """ncu's fixed offset on a GPU: the median of (ncu - CUPTI) over rows that have both (ms; None: no row has).

    ncu's ``gpu__time_duration`` reads a near-constant amount above a kernel's CUPTI span whatever its length
    (its own start and end points); the median over the rows is that amount, robust to a row that strays.
    """
    got = [d for d in diffs_ms if d is not None]
    return float(np.median(got)) if got else None


@dataclass(frozen=True)
class Figure:
    """One method's time of one row (ms), or why there is none.

    Attributes:
        median_ms, iqr_ms, n: the samples' median, interquartile range and count (per launch).
        timed_by: what actually timed it (``events`` where a short-kernel method did not apply: the kernel
            is over 20 µs, or cannot be repeated; ``ncu`` for ncu's figure).
        batch: launches per sample (1: unbatched).
        note: why there is no figure, or why another method timed it.
    """

    median_ms: float | None = None
    iqr_ms: float | None = None
    n: int = 0
    timed_by: str = ""
    batch: int = 1
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


def figure_of(row: Result) -> Figure:
    """A run row's figure: its median, IQR, sample count and the method its worker says timed it."""
    if row.status != PASSED or row.stats is None:
        return Figure(note=f"{row.status}: {row.reason}".rstrip(": "))
    ex = row.extra
    return Figure(row.stats.median, row.stats.iqr, row.stats.n, str(ex.get("timed_by") or "events"),
                  int(ex.get("batch") or 1), str(ex.get("timed_by_note") or ""))


def ncu_figure(status: Status, note: str, durations_ns: Sequence[float | None], launches: int) -> Figure:
    """ncu's figure of one row from its launches' durations (ns): per run of the variant (its kernels' launches
    summed: a variant may launch several), the median over the runs but the first (which follows the poison fill)."""
    if status != PASSED or not durations_ns:
        return Figure(timed_by=NCU, note=f"{status}: {note}".rstrip(": ") if status != PASSED else note or "no launch")
    if any(d is None for d in durations_ns):
        return Figure(timed_by=NCU, note="ncu gave no gpu__time_duration for a launch")
    if launches < 1 or len(durations_ns) % launches:
        return Figure(timed_by=NCU, note=f"ncu saw {len(durations_ns)} launches for {launches} runs: cannot tell "
                                         "the runs apart")
    per = len(durations_ns) // launches
    runs = [sum(durations_ns[i * per:(i + 1) * per]) for i in range(launches)]  # type: ignore[arg-type]
    kept = runs[1:] if len(runs) > 2 else runs
    s = summarize([x / 1e6 for x in kept])
    return Figure(s.median, s.iqr, s.n, NCU, 1, f"{per} kernels a run, summed" if per > 1 else "")


@dataclass(frozen=True)
class Row:
    """One variant at one point: every method's figure, cold and hot.

    Attributes:
        point: the point's label (its size, block, defines).
        variant, kind: the variant and its kind (``kernel``, ``driver``, ``library``, ``host``).
        figures: (temperature, method, figure) for each method run and :data:`NCU`.
        status: the worst status among the method runs; reason: its reason.
    """

    point: str
    variant: str
    kind: str
    figures: tuple[tuple[str, str, Figure], ...]
    status: str = "passed"
    reason: str = ""

    def get(self, temp: str, method: str) -> Figure | None:
        """The figure of ``method`` (one of :data:`ALL_METHODS`, or ``ncu``) at ``temp`` (None: not measured)."""
        return next((f for t, m, f in self.figures if t == temp and m == method), None)

    def reference(self, temp: str) -> Figure | None:
        """CUPTI's figure, when CUPTI itself timed the row (None: not run, or another method stood in for it)."""
        f = self.get(temp, REFERENCE)
        return f if f is not None and f.median_ms is not None and f.timed_by == REFERENCE else None

    def table(self, temp: str) -> Figure | None:
        """What cudalab's tables report for this row (``--launch auto``): the ``auto`` run's figure where one ran;
        else what auto would pick: the cupti run's for a short kernel (cupti, or what stood in for it: graph
        where cupti-python is missing), one launch per event pair for a kernel of 20 µs or more."""
        auto = self.get(temp, "auto")
        if auto is not None:
            return auto
        c = self.get(temp, REFERENCE)
        if c is not None and c.median_ms is not None and c.batch > 1:
            return c
        return self.get(temp, "events")

    def table_method(self, temp: str) -> str:
        """The method cudalab's tables use for this row ('' when its run had no figure)."""
        f = self.table(temp)
        return f.timed_by if f is not None and f.median_ms is not None else ""

    def _fig(self, temp: str, method: str | None) -> Figure | None:
        return self.table(temp) if method is None else self.get(temp, method)

    def vs_ref(self, temp: str, method: str | None = None) -> float | None:
        """(figure - CUPTI's) / CUPTI's of ``method``'s figure, the tables' by default (None: either is missing)."""
        mine, ref = self._fig(temp, method), self.reference(temp)
        if mine is None or ref is None or mine.median_ms is None or not ref.median_ms:
            return None
        return (mine.median_ms - ref.median_ms) / ref.median_ms

    def agrees(self, temp: str, method: str | None = None) -> bool | None:
        """Whether ``method``'s figure (the tables' by default) is within 5% (or 0.1 µs) of CUPTI's span (None:
        either is missing)."""
        mine, ref = self._fig(temp, method), self.reference(temp)
        return agrees(mine.median_ms if mine else None, ref.median_ms if ref else None)

    def ncu_minus_ref(self, temp: str) -> float | None:
        """ncu's figure less CUPTI's (ms; None: either is missing): one row's share of ncu's offset."""
        theirs, ref = self.get(temp, NCU), self.reference(temp)
        if theirs is None or ref is None or theirs.median_ms is None:
            return None
        return theirs.median_ms - ref.median_ms  # type: ignore[operator]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON: per temperature, each method's figure with its distance from CUPTI, ncu's with its
        difference, and the tables' (``auto``) with its distance."""
        out: dict[str, Any] = {"point": self.point, "variant": self.variant, "kind": self.kind, "status": self.status,
                               "reason": self.reason}
        for temp in TEMPS:
            per = {m: dict(f.to_dict(), minus_cupti_ms=self.ncu_minus_ref(temp)) if m == NCU else
                   dict(f.to_dict(), vs_cupti=self.vs_ref(temp, m), agrees=self.agrees(temp, m))
                   for t, m, f in self.figures if t == temp and m != "auto"}
            mine = self.table(temp)
            per["auto"] = {"launch": "auto", "method": self.table_method(temp), "ran": self.get(temp, "auto") is not None,
                           "median_ms": mine.median_ms if mine is not None else None,
                           "iqr_ms": mine.iqr_ms if mine is not None else None,
                           "batch": mine.batch if mine is not None else 1,
                           "note": mine.note if mine is not None else "",
                           "vs_cupti": self.vs_ref(temp), "agrees": self.agrees(temp)}
            out[temp] = per
        return out


@dataclass(frozen=True)
class Truth:
    """What :func:`truth` found: the rows, the GPU, whether ncu ran (and why not)."""

    family: str
    rows: tuple[Row, ...]
    gpu: dict[str, Any]
    ncu_launches: int
    ncu_note: str = ""
    notes: tuple[str, ...] = ()
    #: What the tables (:mod:`cudalab.report.truth`) show, so they need not import this module (it imports ncu).
    methods: tuple[str, ...] = METHODS
    compared: tuple[str, ...] = COMPARED
    temps: tuple[str, ...] = TEMPS
    within: tuple[float, float] = (WITHIN, WITHIN_MS)
    reference: str = REFERENCE

    @property
    def bad(self) -> bool:
        """Whether a row failed or was incorrect in some method's run."""
        return any(Status(r.status).bad for r in self.rows)

    def ncu_offset(self, temp: str) -> tuple[float | None, int]:
        """ncu's offset at ``temp`` (:func:`ncu_offset` over the kernel rows) and how many rows it is over."""
        diffs = [r.ncu_minus_ref(temp) for r in self.rows if r.kind == "kernel"]
        return ncu_offset(diffs), sum(d is not None for d in diffs)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document (:data:`SCHEMA`)."""
        return {"schema": SCHEMA, "family": self.family, "gpu": self.gpu, "reference": REFERENCE,
                "methods": list(self.methods) + [NCU], "compared": list(COMPARED), "temps": list(TEMPS),
                "within": {"fraction": WITHIN, "ms": WITHIN_MS},
                "ncu": {"ran": not self.ncu_note, "note": self.ncu_note, "launches": self.ncu_launches,
                        "cache_control": NCU_CACHE,
                        "offset_ms": {t: self.ncu_offset(t)[0] for t in TEMPS},
                        "offset_rows": {t: self.ncu_offset(t)[1] for t in TEMPS}},
                "notes": list(self.notes), "rows": [r.to_dict() for r in self.rows]}


def plan_methods(spec: FamilySpec, fam: Family, opts: RunOptions,
                 methods: Sequence[str] = METHODS) -> list[tuple[str, str, list[Plan]]]:
    """(temperature, method, the planned points) for every method, cold and hot: one RunOptions each, the same
    seed (the same inputs) for all, no roofline.

    Raises:
        UsageError, LaunchConfigError: bad options, an unknown method, or no point can run (before any GPU work).
    """
    bad = [m for m in methods if m not in ALL_METHODS]
    if bad or not methods:
        raise UsageError(f"--methods: {', '.join(bad) or 'none given'}: pick from {', '.join(ALL_METHODS)}")
    from cudalab.session.run import requests_from  # noqa: PLC0415  (the run's modules: only when one is planned)

    seed = opts.seed if opts.seed is not None else secrets.randbits(63)
    out = []
    for temp in TEMPS:
        for method in methods:
            o = replace(opts, launch=method, hot=temp == "hot", roofline=False, seed=seed)
            out.append((temp, method, sweep.plan_points(requests_from(spec, fam, o))))
    return out


def point_label(plan: Plan) -> str:
    """A point's size, block and defines (``4096x4096 · block 32x8 · -D UNROLL=4``)."""
    req = plan.request
    parts = [plan.problem.label] + [f"{k} {v}" for k, v in plan.problem.options]
    if req.block:
        parts.append(f"block {req.block}")
    parts += [f"-D {k}={v}" for k, v in req.defines]
    return " · ".join(parts)


#: ``profile(request, launches, cache)`` -> the ncu report (tests pass a stand-in).
NcuProfile = Callable[[Any, int, str], Any]


def ncu_profiler(timeout: float, run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> NcuProfile:
    """Profile one point's request under ncu (:func:`cudalab.ncu.profile`, the ``time`` set).

    Raises:
        ToolMissingError: ncu is not found (said before the timing runs).
    """
    from cudalab import ncu  # noqa: PLC0415  (the tool: only when it runs)

    exe = ncu.find_ncu()

    def profile(req: Any, launches: int, cache: str) -> Any:
        return ncu.profile(req, "time", None, exe, run, timeout, launches=launches, cache=cache)

    return profile


def truth(spec: FamilySpec, fam: Family, opts: RunOptions, ncu: NcuProfile | None = None, ncu_note: str = "",
          launches: int = NCU_LAUNCHES, observer: Observer | None = None,
          execute: Callable[..., sweep.Executed] = sweep.execute, methods: Sequence[str] = METHODS,
          timeout: float | None = None) -> Truth:
    """Time every selected variant by each method, cold and hot, and by ncu when ``ncu`` is given.

    Args:
        spec, fam, opts: the family run (its ``launch`` and ``hot`` are the methods': ignored).
        ncu: profiles a request under ncu (:func:`ncu_profiler`); None: no ncu column (``ncu_note`` says why).
        launches: each variant's launches under ncu.
        observer: progress of the timing runs.
        methods: the ``--launch`` values to run (:data:`ALL_METHODS`).
        execute: :func:`cudalab.session.sweep.execute` (tests pass a stand-in).
        timeout: seconds a kernel may run before its worker is killed (None: the default rule).

    Raises:
        UsageError, LaunchConfigError: bad options (before any GPU work).
        WorkerError: no worker could open the GPU.
    """
    if launches < 1:
        raise UsageError(f"--ncu-launches must be at least 1 (got {launches})")
    groups = plan_methods(spec, fam, opts, methods)
    count = len(groups[0][2])
    ordered = [(temp, method, i, plans[i]) for i in range(count) for temp, method, plans in groups]  # point by point
    from cudalab.execute import open_executor  # noqa: PLC0415  (the engines: only when points run)
    from cudalab.session.run import on_its_device  # noqa: PLC0415

    ex = execute([p for *_, p in ordered], sum(len(p.variants) for *_, p in ordered),
                 open_executor(on_its_device(opts, timeout), observer))
    refused = ex.refusal()
    if refused is not None:
        raise refused
    by_plan = {id(pt.plan): pt for pt in ex.runs}
    notes: list[str] = []
    if ex.incomplete:
        notes.append("interrupted: the rows measured so far")
    rows: list[Row] = []
    for i in range(count):
        mine = [(t, m, by_plan.get(id(p))) for t, m, j, p in ordered if j == i]
        plan = groups[0][2][i]
        profiled = _ncu_rows(plan, ncu, launches, notes) if ncu is not None else {}
        for v in plan.variants:
            figs: list[tuple[str, str, Figure]] = []
            worst: Result | None = None
            for t, m, pt in mine:
                r = next((x for x in (pt.results if pt is not None else ()) if x.variant == v.name), None)
                if r is None:
                    figs.append((t, m, Figure(note="no row (the run ended before it)")))
                    continue
                figs.append((t, m, figure_of(r)))
                if worst is None or (r.status.bad and not worst.status.bad):
                    worst = r
            for t in TEMPS:
                got = profiled.get((t, v.name))
                figs.append((t, NCU, got if got is not None else Figure(timed_by=NCU, note=ncu_note or "not profiled")))
            status, reason = (str(worst.status), worst.reason) if worst is not None else ("missing", "no row")
            rows.append(Row(point_label(plan), v.name, v.kind, tuple(figs), status, reason))
    gpu = {k: v for k, v in (ex.info or {}).items() if k != "telemetry"}
    return Truth(spec.name, tuple(rows), gpu, launches, ncu_note if ncu is None else "", tuple(notes), tuple(methods))


def _ncu_rows(plan: Plan, profile: NcuProfile, launches: int, notes: list[str]) -> dict[tuple[str, str], Figure]:
    """(temperature, variant) -> ncu's figure at one point; a profile that fails leaves a note and its rows out."""
    out: dict[tuple[str, str], Figure] = {}
    kernels = [v for v in plan.variants if v.kind == "kernel"]
    if not kernels:
        return out
    for temp in TEMPS:
        try:
            rep = profile(plan.request, launches, NCU_CACHE[temp])  # the same seed: the inputs the runs timed
        except CudalabError as exc:
            why = str(exc).splitlines()[0]
            notes.append(f"ncu ({temp}, {point_label(plan)}): {why}")
            for v in kernels:
                out[(temp, v.name)] = Figure(timed_by=NCU, note=why)
            continue
        for nr in rep.rows:
            out[(temp, nr.variant)] = ncu_figure(nr.status, nr.note, nr.durations_ns, launches)
    return out
