"""The edit–run loop behind ``cudalab watch``: versions of one family run, re-running what changed.

Each version plans the run again from the files as they are now (the family's ``family.toml`` and
module, the kernels its rows use, the ``--add`` files), gives every row a fingerprint (sha256 of the
texts it is built from: its source and the local files that source includes, and the family's own
files) and re-runs only the rows whose fingerprint changed (every row with ``rerun_all``), on fresh GPU
workers (:mod:`cudalab.session`): a kernel that crashes or hangs is a row, as in any run. The rows that
did not change are kept from the version that measured them. Each re-run row that passed is judged
against the last version of it that passed, from the raw samples, by :func:`cudalab.records.compare.compare`
(the same verdict ``cudalab compare`` gives: faster, slower, same or unsure).

No click and no rich here: the command (:mod:`cudalab.cli.watch`) parses, :mod:`cudalab.watch.screen`
draws, and the tests drive :class:`Watcher` with a fake GPU and fake file events.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from cudalab.records import compare
from cudalab.plan import RunRequest
from cudalab.roofline import with_roofline
from cudalab.session import sweep
from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.errors import CudalabError, GpuUnavailableError
from cudalab.families import Family
from cudalab.execute.executor import Executor
from cudalab.records.results import PASSED, Result, RunPoint, RunRecord
from cudalab.watch.sources import digest, family_files, forget_module, row_sources, selected

__all__ = ["Judged", "Version", "Watcher", "Watched"]

#: How long a changed file must stay the same before it is read (seconds): editors write in steps.
SETTLE_S = 0.1
#: ... but never wait longer than this for it to settle.
SETTLE_MAX_S = 2.0


@dataclass(frozen=True)
class Watched:
    """What one version runs: the family as its files are now, and the points of the command line."""

    spec: FamilySpec
    family: Family
    requests: list[RunRequest]


@dataclass(frozen=True)
class Judged:
    """A re-run row's verdict against the last version of it that passed (``against``)."""

    verdict: compare.Verdict
    against: int


@dataclass
class Version:
    """One version of the session: the table as shown after it, and what it re-ran.

    Attributes:
        number: 1 for the first run.
        at: when it finished (seconds since the epoch).
        changed: the files whose text changed since the version before (empty for the first).
        record: the whole table (kept rows and re-run rows), or None when nothing has run yet.
        rerun: (point label, variant) of every row this version ran.
        verdicts: (point label, variant) -> the verdict of a re-run row that passed against its last
            passed version.
        measured: (point label, variant) -> the version whose run the row shows.
        error: why this version could not run (bad input, a signature that does not fit); the table
            is the one before.
        exit_code: 130 / 143 when a signal interrupted its run, else 0.
    """

    number: int
    at: float
    changed: tuple[str, ...] = ()
    record: RunRecord | None = None
    rerun: frozenset[tuple[str, str]] = frozenset()
    verdicts: dict[tuple[str, str], Judged] = field(default_factory=dict)
    measured: dict[tuple[str, str], int] = field(default_factory=dict)
    error: str = ""
    exit_code: int = 0

    @property
    def incomplete(self) -> bool:
        """Its run was interrupted."""
        return bool(self.exit_code)

    def to_dict(self) -> dict[str, Any]:
        """What ``--json`` keeps of this version (the whole table, raw samples included)."""
        return {
            "version": self.number, "time": self.at, "changed": list(self.changed), "error": self.error,
            "incomplete": self.incomplete,
            "rerun": [{"point": p, "variant": v} for p, v in sorted(self.rerun)],
            "verdicts": [{"point": p, "variant": v, "against": j.against, "verdict": j.verdict.verdict,
                          "ratio": j.verdict.ratio, "p": j.verdict.p, "low": j.verdict.low, "high": j.verdict.high,
                          "note": j.verdict.note} for (p, v), j in sorted(self.verdicts.items())],
            "record": self.record.to_dict() if self.record is not None else None,
        }


# --- what a row is built from -------------------------------------------------------------------------

class Watcher:
    """Runs versions of one family command and keeps the table between them.

    Args:
        plan: reads the family and the command line's points as the files are now (called every version).
        start_session: starts a run's executor, its GPU workers opening (:func:`cudalab.session.run.start_session`);
            the next version's is started as soon as a version ends, so a save finds it ready.
        rerun_all: re-run every row on every change, not only the rows whose files changed.
        command: the command line, for the records.
        session: the executor already started for the first version.
    """

    def __init__(self, plan: Callable[[], Watched], start_session: Callable[[], Executor], rerun_all: bool = False,
                 command: Sequence[str] = ("cudalab", "watch"), session: Executor | None = None):
        self.plan = plan
        self.start_session = start_session
        self.rerun_all = rerun_all
        self.command = tuple(command)
        self.started = time.time()
        self.versions: list[Version] = []
        self.device: dict[str, Any] = {}
        self.spec: FamilySpec | None = None
        self.files: dict[Path, str] = {}      # every watched file -> its sha256 when last read
        self._prints: dict[tuple[int, str], str] = {}    # row -> fingerprint of the run it shows
        self._points: dict[int, RunPoint] = {}          # point index -> the table's point
        self._measured: dict[tuple[int, str], int] = {}  # row -> the version that measured it
        self._passed: dict[tuple[int, str], tuple[int, Result]] = {}  # row -> its last passed (version, row)
        self._session: Executor | None = session
        self._warm_modules: set[Path] = set()  # Python files the warm workers may have imported

    # --- files -----------------------------------------------------------------------------------------
    def watched(self) -> list[Path]:
        """The files to watch, in a stable order."""
        return sorted(self.files)

    def changed_files(self) -> list[Path]:
        """The watched files whose text differs from the last read."""
        return [p for p, h in self.files.items() if digest(p) != h]

    def settle(self, paths: Iterable[Path], sleep: Callable[[float], None] = time.sleep) -> None:
        """Wait until the changed files stop changing (an editor writing in steps), at most :data:`SETTLE_MAX_S`."""
        paths = list(paths)
        deadline = time.monotonic() + SETTLE_MAX_S
        last = [digest(p) for p in paths]
        while time.monotonic() < deadline:
            sleep(SETTLE_S)
            now = [digest(p) for p in paths]
            if now == last and all(now):
                return
            last = now

    # --- versions --------------------------------------------------------------------------------------
    def run_version(self, changed: Sequence[Path] = ()) -> Version:
        """Watched, run what changed, merge it into the table and judge it; one version.

        A plan that cannot run (bad input the edit introduced, a kernel whose signature does not fit) is a
        version with ``error`` set and the table as it was: the next save tries again.

        Raises:
            GpuUnavailableError: no worker could open a GPU (no pycuda, driver or GPU): no edit fixes that.
        """
        number = len(self.versions) + 1
        shown = tuple(str(p) for p in changed)
        previous = self.versions[-1].record if self.versions else None
        try:
            if any(p.suffix == ".py" for p in changed) and self.spec is not None:
                forget_module(self.spec)
            plan = self.plan()
        except CudalabError as exc:
            return self._keep(self._failed(number, shown, previous, exc))
        self.spec = plan.spec
        prints, points_rows = self._fingerprints(plan)
        todo = self._todo(plan, prints, points_rows)
        if not todo:  # a save that changed no row's files (a comment in a header no row includes, say)
            kept = self.versions[-1].measured if self.versions else {}
            return self._keep(Version(number, time.time(), shown, previous, measured=dict(kept)))
        sub = [(i, req) for i, req in enumerate(plan.requests) if todo.get(i)]
        reqs = [self._subrequest(plan, req, points_rows[i], todo[i]) for i, req in sub]
        session = self._take_session(changed)
        try:
            plans = sweep.plan_points(reqs)
            ex = sweep.execute(plans, sum(len(p.variants) for p in plans), session)
            session = None  # execute ended it
        except GpuUnavailableError:  # no save can fix a missing GPU: the watch ends, in one line
            raise
        except CudalabError as exc:
            return self._keep(self._failed(number, shown, previous, exc))
        finally:
            if session is not None:
                session.cancel()
        refused = ex.refusal()
        if refused is not None:
            return self._keep(Version(number, time.time(), shown, previous, error=str(refused),
                                      exit_code=ex.exit_code))
        if ex.info:
            self.device = {**self.device, **ex.info}
        new = {i: sweep.point_of(run, plan.spec) for (i, _), run in zip(sub, ex.runs)}
        version = self._merge(number, shown, plan, points_rows, prints, new, ex.exit_code)
        return self._keep(version)

    def _failed(self, number: int, shown: tuple[str, ...], previous: RunRecord | None, exc: CudalabError) -> Version:
        kept = self.versions[-1].measured if self.versions else {}
        self.files = {p: digest(p) for p in self.files}  # seen: the next save tries again, not this one
        return Version(number, time.time(), shown, previous, measured=dict(kept), error=str(exc))

    def _keep(self, version: Version) -> Version:
        self.versions.append(version)
        return version

    def _fingerprints(self, plan: Watched) -> tuple[dict[tuple[int, str], str], dict[int, list[VariantSpec]]]:
        """Every row's fingerprint, and each point's rows; reads (and starts watching) every file."""
        fam_files = family_files(plan.spec)
        files: dict[Path, str] = {}
        for p in fam_files:
            files[p] = digest(p)
        base = hashlib.sha256("".join(f"{p}:{files[p]};" for p in fam_files).encode()).hexdigest()
        prints: dict[tuple[int, str], str] = {}
        rows: dict[int, list[VariantSpec]] = {}
        for i, req in enumerate(plan.requests):
            rows[i] = selected(plan.spec, req)
            for v in rows[i]:
                h = hashlib.sha256(base.encode())
                for p in row_sources(plan.spec, v):
                    if p not in files:
                        files[p] = digest(p)
                    h.update(f"{p}:{files[p]};".encode())
                prints[(i, v.name)] = h.hexdigest()
        self.files = files
        return prints, rows

    def _todo(self, plan: Watched, prints: dict[tuple[int, str], str],
              rows: dict[int, list[VariantSpec]]) -> dict[int, list[str]]:
        """Point index -> the rows to run now: those whose files changed (every row with ``rerun_all``)."""
        first = not self.versions or not self._points
        out: dict[int, list[str]] = {}
        for i, vs in rows.items():
            names = [v.name for v in vs if first or self.rerun_all or self._prints.get((i, v.name)) != prints[(i, v.name)]]
            if names:
                out[i] = names
        return out

    def _subrequest(self, plan: Watched, req: RunRequest, rows: list[VariantSpec], names: list[str]) -> RunRequest:
        """The point's request narrowed to ``names`` (the roofline is measured again only with every row)."""
        if len(names) == len(rows):
            return req
        adds = tuple(k for k in req.add if k.name in names)
        builtin = [n for n in names if n not in {k.name for k in req.add}]
        variants = ",".join(builtin) if builtin else "none"
        return replace(req, variants=variants, add=adds, roofline=False)

    def _take_session(self, changed: Sequence[Path]) -> Executor:
        """The warm session, unless a Python file it may have imported changed (then a fresh one)."""
        session, self._session = self._session, None
        if session is not None and any(p.suffix == ".py" for p in changed):
            session.cancel()
            session = None
        return session if session is not None else self.start_session()

    def warm(self) -> None:
        """Start the next version's workers now (they open the GPU while the user edits)."""
        if self._session is None:
            try:
                self._session = self.start_session()
            except CudalabError:
                self._session = None

    def close(self) -> None:
        """End the warm workers."""
        session, self._session = self._session, None
        if session is not None:
            session.cancel()

    def _merge(self, number: int, shown: tuple[str, ...], plan: Watched, rows: dict[int, list[VariantSpec]],
               prints: dict[tuple[int, str], str], new: dict[int, RunPoint], exit_code: int) -> Version:
        """The table after this version: each row from this run where it ran, else kept; verdicts."""
        from cudalab.report import pct_column  # noqa: PLC0415  (rates as % of the library row)

        metric = plan.spec.metric
        rerun: set[tuple[int, str]] = set()
        for i in range(len(plan.requests)):
            old, fresh = self._points.get(i), new.get(i)
            base = fresh if fresh is not None else old
            if base is None:  # never ran (an interrupted first version)
                continue
            got = {r.variant: r for r in fresh.results} if fresh is not None else {}
            had = {r.variant: r for r in old.results} if old is not None else {}
            roof = fresh.roofline if fresh is not None and fresh.roofline is not None else (old.roofline if old else None)
            out: list[Result] = []
            for v in rows[i]:
                if v.name in got:
                    out.append(with_roofline(got[v.name], roof))
                    rerun.add((i, v.name))
                    self._prints[(i, v.name)] = prints[(i, v.name)]
                    self._measured[(i, v.name)] = number
                elif v.name in had:
                    out.append(had[v.name])
            note = base.roofline_note if roof is None else ""
            self._points[i] = replace(base, results=tuple(pct_column(out, metric)), roofline=roof, roofline_note=note)
        shown_points = [(i, self._points[i]) for i in range(len(plan.requests)) if i in self._points]
        record = sweep.record(plan.spec, [], bool(exit_code), self.device, self.command, self.started,
                              [p for _, p in shown_points])
        label = {i: p.label for i, p in shown_points}
        verdicts = self._judge(number, shown_points, rerun)
        return Version(number, time.time(), shown, record, frozenset((label[i], v) for i, v in rerun),
                       {(label[i], v): j for (i, v), j in verdicts.items()},
                       {(label[i], v): n for (i, v), n in self._measured.items() if i in label}, exit_code=exit_code)

    def _judge(self, number: int, points: list[tuple[int, RunPoint]],
               rerun: set[tuple[int, str]]) -> dict[tuple[int, str], Judged]:
        """Each re-run row that passed against its last passed version (:func:`cudalab.records.compare.compare`)."""
        pairs = []
        for i, point in points:
            for r in point.results:
                key = (i, r.variant)
                if key not in rerun or r.status != PASSED:
                    continue
                before = self._passed.get(key)
                if before is not None:
                    pairs.append((key, point, before, r))
                self._passed[key] = (number, r)
        out: dict[tuple[int, str], Judged] = {}
        if not pairs:
            return out
        # one record per side, each judged row under its own point: rows match by point and variant
        stub = sweep.record(self.spec, [], False, self.device, self.command, self.started, [])
        base = replace(stub, points=tuple(replace(p, results=(b[1],)) for _, p, b, _ in pairs))
        new = replace(stub, points=tuple(replace(p, results=(r,)) for _, p, _, r in pairs))
        by_key = {(row.problem, row.variant): row.verdict for row in compare.compare(base, new).rows}
        for key, point, before, r in pairs:
            v = by_key.get((point.label, r.variant))
            if v is not None:
                out[key] = Judged(v, before[0])
        return out

    # --- the session file --------------------------------------------------------------------------------
    def session_record(self) -> dict[str, Any]:
        """What ``--json`` holds: the latest table as a run record (``cudalab report`` and ``compare`` read
        it), and under ``watch`` every version of the session."""
        last = next((v.record for v in reversed(self.versions) if v.record is not None), None)
        head = last.to_dict() if last is not None else {
            "schema_version": 2, "command": list(self.command), "started": self.started, "device": self.device,
            "points": [], "incomplete": True}
        head["watch"] = {"files": [str(p) for p in self.watched()], "versions": [v.to_dict() for v in self.versions]}
        return head
