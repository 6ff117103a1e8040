"""One ncu row per variant, and the report the command renders (pure).

:func:`build_rows` is shared by the live profile and ``--import``: it takes the child's rows (its
verdicts and launch logs), ncu's launches and the family, and gives one :class:`NcuRow` per selected
variant with a :class:`cudalab.records.results.Status`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from cudalab.execute import toolchild as child
from cudalab.catalog import VariantSpec
from cudalab.families import Family, Size
from cudalab.ncu.match import COMBINED_NOTE, combine, match_launches
from cudalab.ncu.metrics import SMEM_LD_REQ, SMEM_LD_WF, SMEM_ST_REQ, SMEM_ST_WF, MetricSet, expectations, matches
from cudalab.ncu.parse import KernelLaunch, Rule
from cudalab.ncu.source import SourceBlock, SourceLine, assign_blocks, merge_lines
from cudalab.records.results import FAILED, MISSING, PASSED, SKIPPED, Result, Status


@dataclass(frozen=True)
class NcuRow:
    """One variant's profile: its (combined) launch or why there is none, and its expectations."""

    variant: str
    kernel: str = ""
    status: Status = PASSED
    note: str = ""
    launch: KernelLaunch | None = None
    expect: tuple[tuple[str, float], ...] = ()
    launches: int = 0
    #: ncu's IDs of the variant's launches (what the source page and the rules are keyed by).
    launch_ids: tuple[int, ...] = ()
    #: Per CUDA line, ncu's figures (``--source``), summed over the variant's launches, in file order.
    lines: tuple[SourceLine, ...] = ()
    #: ncu's guided-analysis rules that fired (``--advice``), over the variant's launches.
    rules: tuple[Rule, ...] = ()
    #: Each matched launch's gpu__time_duration in ns, in launch order (None where ncu gave none).
    durations_ns: tuple[float | None, ...] = ()

    def value(self, name: str) -> float | None:
        """A metric's value (base unit), or None."""
        return self.launch.value(name) if self.launch else None

    @property
    def duration_ns(self) -> float | None:
        """ncu's gpu__time_duration in ns (summed over the variant's launches)."""
        return self.launch.duration_ns if self.launch else None

    def per_request(self, op: str) -> float | None:
        """Shared-memory wavefronts per request for ``ld`` or ``st`` (None: no requests or not measured)."""
        req = self.value(SMEM_LD_REQ if op == "ld" else SMEM_ST_REQ)
        wf = self.value(SMEM_LD_WF if op == "ld" else SMEM_ST_WF)
        return None if not req or wf is None else wf / req

    def expected(self, op: str) -> float | None:
        """The expected wavefronts per request for ``ld`` or ``st``, or None."""
        return dict(self.expect).get(op)

    def verdict(self, op: str) -> bool | None:
        """✓ (True) / ✗ (False) against the expectation; None when there is none or nothing was measured."""
        if self.launch is None:
            return None
        return matches(self.per_request(op), self.expected(op))


@dataclass(frozen=True)
class NcuReport:
    """What ``cudalab ncu`` shows: rows per variant, the metric set, where the numbers and the size came from."""

    family: str
    metric_set: MetricSet
    rows: tuple[NcuRow, ...]
    source: str
    problem: str = ""
    notes: tuple[str, ...] = ()
    incomplete: str = ""
    #: Whether the data held ncu's source page (per-line figures) and its rules (a --set full profile).
    has_source: bool = False
    has_rules: bool = False
    #: The problem as a run record holds it (:meth:`cudalab.families.Size.to_dict`).
    problem_data: tuple[tuple[str, Any], ...] = ()

    def failed_expectations(self) -> list[str]:
        """``variant ld`` for every ✗."""
        return [f"{r.variant} {op}" for r in self.rows for op in ("ld", "st") if r.verdict(op) is False]

    @property
    def bad(self) -> bool:
        """Whether a row fails the command (incorrect, failed)."""
        return any(r.status.bad for r in self.rows)


def build_rows(selected: Sequence[VariantSpec], child_rows: Sequence[Result], launches: Sequence[KernelLaunch],
               fam: Family | None, problem: Size | None, doubled_ok: bool = False) -> tuple[tuple[NcuRow, ...], list[str]]:
    """One row per selected variant: the child's verdict, its matched ncu launches, expectations.

    Args:
        selected: the variants asked for, in order (non-kernel rows become ``skipped``).
        child_rows: the child's rows (their ``extra["launches"]``), in run order.
        launches: ncu's launches.
        fam, problem: for the expected wavefronts per request.
        doubled_ok: see :func:`cudalab.ncu.match.match_launches`.

    Returns:
        (rows, notes).
    """
    kernels = {v.kernel for v in selected if v.kind == "kernel"}
    logs = [(r.variant, child.launches(r)) for r in child_rows]
    found, notes = match_launches(logs, launches, kernels, doubled_ok)
    by_name = {r.variant: r for r in child_rows}
    rows = []
    for v in selected:
        if v.kind != "kernel":
            rows.append(NcuRow(v.name, status=SKIPPED, note=f"{v.kind} row, not profiled"))
            continue
        base = NcuRow(v.name, v.kernel, expect=tuple(expectations(fam, problem, v).items()))
        r = by_name.get(v.name)
        if r is None:
            rows.append(_r(base, MISSING, "the run has no row for this variant"))
            continue
        if r.status in (SKIPPED, FAILED):
            rows.append(_r(base, r.status, r.reason))
            continue
        m = found.get(v.name)
        if m is None or m.problem:
            rows.append(_r(base, MISSING, m.problem if m else "not matched"))
            continue
        if not m.launches:
            rows.append(_r(base, MISSING, f"ncu saw no launch of {v.kernel} for this variant"))
            continue
        ln = combine(m.launches)
        kern = ln.kernel if len(m.launches) > 1 else v.kernel
        row = NcuRow(v.name, kern, r.status, r.reason if r.status != PASSED else "", ln, base.expect, len(m.launches),
                     tuple(x.launch_id for x in m.launches), durations_ns=tuple(x.duration_ns for x in m.launches))
        if r.status != PASSED:
            row = _r(row, r.status, f"the profiled launch was {r.status}: {r.reason}".rstrip(": "))
        if len(m.launches) > 1:
            row = _r(row, row.status, "; ".join(filter(None, [row.note, COMBINED_NOTE.format(n=len(m.launches))])))
        if ln.missing:
            row = _r(row, FAILED, f"the file is cut off: this launch lacks {len(ln.missing)} metric(s)")
        rows.append(row)
    return tuple(rows), notes


def attach_source(rows: Sequence[NcuRow], launches: Sequence[KernelLaunch], blocks: Sequence[SourceBlock],
                  rules: Sequence[Rule]) -> tuple[NcuRow, ...]:
    """Rows with their per-line figures (from the source page's ``blocks``) and the rules that fired.

    Blocks follow the report's launches in ID order (:func:`cudalab.ncu.source.assign_blocks`); a
    variant of several launches gets their lines summed and their rules once each (the largest speedup)."""
    from dataclasses import replace  # noqa: PLC0415

    per = assign_blocks(blocks, [(ln.launch_id, ln.kernel) for ln in sorted(launches, key=lambda x: x.launch_id)])
    out = []
    for row in rows:
        groups = [ln for lid in row.launch_ids for b in per.get(lid, ()) for ln in (b.lines,)]
        lines = merge_lines(groups) if groups else ()
        fired: dict[tuple[str, str], Rule] = {}
        for rule in rules:
            if rule.launch_id in row.launch_ids:
                k = (rule.name, rule.description if len(row.launch_ids) == 1 else rule.kind)
                old = fired.get(k)
                if old is None or (rule.speedup or 0.0) > (old.speedup or 0.0):
                    fired[k] = rule
        out.append(replace(row, lines=lines, rules=tuple(fired.values())))
    return tuple(out)


def _r(row: NcuRow, status: Status, note: str) -> NcuRow:
    from dataclasses import replace

    return replace(row, status=status, note=note)
