"""``cudalab truth FAMILY``: each variant timed by every method side by side, and against Nsight Compute.

The methods are the family run's own (``--launch``): ``events`` (one launch per event pair), ``batch`` (N launches
between two events, the L2 flushed once a batch), ``graph`` (the N launches replayed as a CUDA graph; cold: a
flush node before each launch, the flush's own time taken out) and ``cupti`` (N launches, each timed by its own
GPU start and end from CUPTI's activity records; cold: a flush before each launch, not counted). Each method is one
:class:`~cudalab.session.options.RunOptions` (``launch=METHOD``, cold or ``hot``); every point of every method is
planned once and all of them run in one GPU worker session, with the same inputs (one seed). Beside them,
ncu's ``gpu__time_duration``: each variant launched :data:`NCU_LAUNCHES` times in one process under ncu
(cold: ``--cache-control all``, ncu's default; hot: ``none``), the median of those launches but the first
(it follows the poison fill).

The method cudalab's tables use for a row is what ``--launch auto`` picks (:data:`cudalab.bench.AUTO_LAUNCH`
for a kernel under 20 µs, one launch per event pair otherwise): the row of the ``AUTO_LAUNCH`` run says which
timed it (``timed_by``). Its distance from ncu is the figure this command exists for; beside it, the distance of
each method of :data:`COMPARED` (a candidate for ``auto`` that no record has measured yet). No pycuda here: the
timing runs in the GPU worker, ncu in its own child (:mod:`cudalab.ncu`, imported when ncu is asked).
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable, Sequence

from cudalab.bench import AUTO_LAUNCH, summarize
from cudalab.catalog import FamilySpec
from cudalab.errors import CudalabError, UsageError
from cudalab.families import Family
from cudalab.plan import Plan
from cudalab.progress import Observer
from cudalab.records.results import PASSED, Result, Status
from cudalab.session import sweep
from cudalab.session.options import RunOptions

__all__ = ["METHODS", "COMPARED", "TEMPS", "NCU", "NCU_LAUNCHES", "SCHEMA", "Figure", "Row", "Truth", "agrees",
           "plan_methods", "truth"]

#: The timing methods, in the order the table shows them (each a ``--launch`` value).
METHODS = ("events", "batch", "graph", "cupti")
#: The methods whose own distance from ncu the tables show beside the tables' (the JSON has every method's).
COMPARED = ("cupti",)
#: Cold (an L2 flush before each sample, or each launch of a graph) and hot (``--hot``).
TEMPS = ("cold", "hot")
#: The column of ncu's figure.
NCU = "ncu"
#: Launches of each variant under ncu (the first left out of the median).
NCU_LAUNCHES = 10
#: ncu's ``--cache-control`` per temperature.
NCU_CACHE = {"cold": "all", "hot": "none"}
#: The JSON's schema name (``--json``).
SCHEMA = "cudalab-truth/1"
#: What "agrees with ncu" means (issue 46): within this fraction of ncu's median, or within :data:`WITHIN_MS`.
WITHIN = 0.05
WITHIN_MS = 0.3e-3


def agrees(ms: float | None, ncu_ms: float | None) -> bool | None:
    """Whether ``ms`` is within 5% (or 0.3 µs) of ncu's ``ncu_ms`` (None: one of them is missing)."""
    if ms is None or ncu_ms is None or ncu_ms <= 0:
        return None
    return abs(ms - ncu_ms) <= max(WITHIN * ncu_ms, WITHIN_MS)


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
        figures: (temperature, method, figure) for each method of :data:`METHODS` and :data:`NCU`.
        status: the worst status among the method runs; reason: its reason.
    """

    point: str
    variant: str
    kind: str
    figures: tuple[tuple[str, str, Figure], ...]
    status: str = "passed"
    reason: str = ""

    def get(self, temp: str, method: str) -> Figure | None:
        """The figure of ``method`` (one of :data:`METHODS`, or ``ncu``) at ``temp`` (None: not measured)."""
        return next((f for t, m, f in self.figures if t == temp and m == method), None)

    def table(self, temp: str) -> Figure | None:
        """What cudalab's own tables report for this row (``--launch auto``)."""
        return self.get(temp, AUTO_LAUNCH)

    def table_method(self, temp: str) -> str:
        """The method cudalab's tables use for this row ('' when its run had no figure)."""
        f = self.table(temp)
        return f.timed_by if f is not None and f.median_ms is not None else ""

    def vs_ncu(self, temp: str, method: str | None = None) -> float | None:
        """(figure - ncu's) / ncu's of ``method``'s figure, the tables' by default (None: either is missing)."""
        mine = self.table(temp) if method is None else self.get(temp, method)
        theirs = self.get(temp, NCU)
        if mine is None or theirs is None or mine.median_ms is None or not theirs.median_ms:
            return None
        return (mine.median_ms - theirs.median_ms) / theirs.median_ms

    def agrees(self, temp: str, method: str | None = None) -> bool | None:
        """Whether ``method``'s figure (the tables' by default) is within 5% (or 0.3 µs) of ncu's (None: either
        is missing)."""
        mine = self.table(temp) if method is None else self.get(temp, method)
        theirs = self.get(temp, NCU)
        return agrees(mine.median_ms if mine else None, theirs.median_ms if theirs else None)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON: per temperature, each method's figure with its distance from ncu, and the tables'
        (``auto``) with its distance."""
        out: dict[str, Any] = {"point": self.point, "variant": self.variant, "kind": self.kind, "status": self.status,
                               "reason": self.reason}
        for temp in TEMPS:
            per = {m: f.to_dict() if m == NCU else dict(f.to_dict(), vs_ncu=self.vs_ncu(temp, m),
                                                        agrees=self.agrees(temp, m))
                   for t, m, f in self.figures if t == temp}
            mine = self.table(temp)
            per["auto"] = {"launch": AUTO_LAUNCH, "method": self.table_method(temp),
                           "median_ms": mine.median_ms if mine is not None else None, "vs_ncu": self.vs_ncu(temp),
                           "agrees": self.agrees(temp)}
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
    auto_launch: str = AUTO_LAUNCH
    #: What the tables (:mod:`cudalab.report.truth`) show, so they need not import this module (it imports ncu).
    methods: tuple[str, ...] = METHODS
    compared: tuple[str, ...] = COMPARED
    temps: tuple[str, ...] = TEMPS
    within: tuple[float, float] = (WITHIN, WITHIN_MS)

    @property
    def bad(self) -> bool:
        """Whether a row failed or was incorrect in some method's run."""
        return any(Status(r.status).bad for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document (:data:`SCHEMA`)."""
        return {"schema": SCHEMA, "family": self.family, "gpu": self.gpu, "auto_launch": self.auto_launch,
                "methods": list(METHODS) + [NCU], "compared": list(COMPARED),
                "temps": list(TEMPS),
                "within": {"fraction": WITHIN, "ms": WITHIN_MS},
                "ncu": {"ran": not self.ncu_note, "note": self.ncu_note, "launches": self.ncu_launches,
                        "cache_control": NCU_CACHE},
                "notes": list(self.notes), "rows": [r.to_dict() for r in self.rows]}


def plan_methods(spec: FamilySpec, fam: Family, opts: RunOptions) -> list[tuple[str, str, list[Plan]]]:
    """(temperature, method, the planned points) for every method, cold and hot: one RunOptions each, the same
    seed (the same inputs) for all, no roofline.

    Raises:
        UsageError, LaunchConfigError: bad options, or no point can run (before any GPU work).
    """
    from cudalab.session.run import requests_from  # noqa: PLC0415  (the run's modules: only when one is planned)

    if opts.cluster is not None or opts.devices is not None:
        raise UsageError("cudalab truth runs on one GPU: give --device N")
    seed = opts.seed if opts.seed is not None else secrets.randbits(63)
    out = []
    for temp in TEMPS:
        for method in METHODS:
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
          execute: Callable[..., sweep.Executed] = sweep.execute) -> Truth:
    """Time every selected variant by each method, cold and hot, and by ncu when ``ncu`` is given.

    Args:
        spec, fam, opts: the family run (its ``launch`` and ``hot`` are the methods': ignored).
        ncu: profiles a request under ncu (:func:`ncu_profiler`); None: no ncu column (``ncu_note`` says why).
        launches: each variant's launches under ncu.
        observer: progress of the timing runs.
        execute: :func:`cudalab.session.sweep.execute` (tests pass a stand-in).

    Raises:
        UsageError, LaunchConfigError: bad options (before any GPU work).
        WorkerError: no worker could open the GPU.
    """
    if launches < 1:
        raise UsageError(f"--ncu-launches must be at least 1 (got {launches})")
    groups = plan_methods(spec, fam, opts)
    count = len(groups[0][2])
    ordered = [(temp, method, i, plans[i]) for i in range(count) for temp, method, plans in groups]  # point by point
    from cudalab.execute import open_executor  # noqa: PLC0415  (the engines: only when points run)

    ex = execute([p for *_, p in ordered], sum(len(p.variants) for *_, p in ordered), open_executor(opts, observer))
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
    return Truth(spec.name, tuple(rows), gpu, launches, ncu_note if ncu is None else "", tuple(notes))


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
