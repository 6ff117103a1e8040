"""ncu metric sets: what each collects and how its figures show; the expected shared-memory figures and the
✓/✗ window around them (pure).

A :class:`MetricSet` is the instrument contract of ``cudalab ncu``: besides its metrics it declares its
columns (:class:`Figure`: header, value, decimals, where a run keeps it) and its legend. ``cudalab ncu``'s
table, the run-table columns of ``cudalab FAMILY --ncu`` and ``cudalab report`` of either's saved record all
read them from here; nothing else names a set. Adding a set is one entry of :data:`METRIC_SETS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.errors import UsageError
from cudalab.families import Family, Size
from cudalab.instruments import Column, Instrument

DURATION = "gpu__time_duration.sum"
SMEM_LD_REQ = "smsp__inst_executed_op_shared_ld.sum"
SMEM_ST_REQ = "smsp__inst_executed_op_shared_st.sum"
SMEM_LD_WF = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
SMEM_ST_WF = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
SMEM_LD_CONF = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
SMEM_ST_CONF = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
GLD_EFF = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"
GST_EFF = "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct"
L2_HIT = "lts__t_sector_hit_rate.pct"
#: Bytes the DRAM read and wrote for the kernel: with its FLOPs, a rung's own arithmetic intensity on a
#: roofline chart (``cudalab roofline``), where the declared work puts every rung of a problem at one x.
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
# Tensor pipe: the share of active cycles the HMMA pipe (mma.sync, wmma) was busy, and the warp
# instructions of HMMA and of Hopper's warp-group MMA (wgmma, GMMA), so a tensor-core ladder shows
# why each rung is faster. Names as `ncu --query-metrics --chip gh100` lists them (H100, ncu 2025.3).
TENSOR_HMMA_PCT = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_HMMA_INST = "sm__inst_executed_pipe_tensor_op_hmma.sum"
TENSOR_GMMA_INST = "sm__inst_executed_pipe_tensor_op_gmma.sum"
OCC_THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
OCC_ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
OCC_LIMIT_BLOCKS = "launch__occupancy_limit_blocks"
OCC_LIMIT_REGISTERS = "launch__occupancy_limit_registers"
OCC_LIMIT_SHARED = "launch__occupancy_limit_shared_mem"
OCC_LIMIT_WARPS = "launch__occupancy_limit_warps"

#: Tolerance of the ✓/✗ check on wavefronts per request: measured must lie within
#: [expected × (1 − BELOW), expected + ABOVE].
#: Why: the counters are exact for the access pattern (a single-block demo measures exactly 1.00 or
#: 32.00), but with many blocks in flight the L1 adds wavefronts for arbitration between warps, and
#: only ever adds: on an H200 at 4096² the conflict-free transpose_block PAD=1 showed 1.06 / 1.08,
#: transpose_tiled 1.12 / 1.04, the 32-way PAD=0 load 32.16. A real conflict moves the figure by whole
#: ways (1 → 2 → 4 ... 32), so +0.25 keeps every real conflict a ✗; 2 % below allows for edge warps
#: with fewer active threads on sizes that are not a multiple of the tile.
BELOW = 0.02
ABOVE = 0.25


#: A row's value of a figure: the :class:`cudalab.ncu.rows.NcuRow` in, a number (base unit) or None out.
Value = Callable[[Any], "float | None"]
#: A row's ✓/✗ of a figure: (True / False / None for nothing to check, the expected figure or None).
Check = Callable[[Any], "tuple[bool | None, float | None]"]


@dataclass(frozen=True)
class Figure:
    """One column of a metric set: how ``cudalab ncu`` shows it, and whether and how a run keeps it.

    Attributes:
        header: its header in ``cudalab ncu``'s table.
        value: an ncu metric name (its value, base unit), or a function of the
            :class:`cudalab.ncu.rows.NcuRow` (derived figures: wavefronts per request).
        digits: decimals in ``cudalab ncu``'s table.
        key: where ``cudalab FAMILY --ncu`` and ``cudalab ncu --json`` keep it in each row's ``extra``
            ('' : only in ``cudalab ncu``'s table); a key of its own, ``ncu_`` first.
        run_header: its header in run tables and ``cudalab report`` (default: ``header``).
        run_digits: decimals there.
        divisor: the kept figure is the value divided by this (ns → ms: 1e6).
        check: ✓/✗ against an expectation (the row's verdict and the expected figure), shown after the
            figure; a run keeps the verdict under ``check_key``.
    """

    header: str
    value: str | Value
    digits: int = 0
    key: str = ""
    run_header: str = ""
    run_digits: int = 2
    divisor: float = 1.0
    check: Check | None = None
    check_key: str = ""

    def of(self, row: Any) -> float | None:
        """The figure of one row."""
        return row.value(self.value) if isinstance(self.value, str) else self.value(row)

    def column(self) -> Column:
        """How a run table shows the kept figure (what a saved point carries)."""
        return Column(self.key, self.run_header or self.header, self.run_digits, self.check_key if self.check else "")


def _per_request(op: str) -> Value:
    return lambda r: r.per_request(op)


def _smem_check(op: str) -> Check:
    return lambda r: (r.verdict(op), r.expected(op))


def dram_bytes(row: Any) -> float | None:
    """The DRAM bytes read and written (None unless ncu counted both)."""
    rd, wr = row.value(DRAM_READ), row.value(DRAM_WRITE)
    return rd + wr if rd is not None and wr is not None else None


#: ncu's duration: nanoseconds in ``cudalab ncu``'s table, milliseconds (full precision) where a run keeps it.
TIME = Figure("ncu ns", lambda r: r.duration_ns, 0, key="ncu_ms", run_header="ncu ms", run_digits=6, divisor=1e6)
SMEM_LD_WPR = Figure("ld wf/req", _per_request("ld"), 2, key="ncu_ld_wpr", run_header="smem ld wf/req",
                     check=_smem_check("ld"), check_key="ncu_ld_ok")
SMEM_ST_WPR = Figure("st wf/req", _per_request("st"), 2, key="ncu_st_wpr", run_header="smem st wf/req",
                     check=_smem_check("st"), check_key="ncu_st_ok")
SMEM_LD_CONFLICTS = Figure("ld conflicts", SMEM_LD_CONF, key="ncu_ld_conflicts")
SMEM_ST_CONFLICTS = Figure("st conflicts", SMEM_ST_CONF, key="ncu_st_conflicts")
#: The key is what the roofline chart reads (:mod:`cudalab.inspect.rooflinechart`).
DRAM_BYTES = Figure("DRAM bytes", dram_bytes, 0, key="ncu_dram_bytes", run_digits=0)

#: Under every set's table: what the duration column is.
TIME_LEGEND = "ncu ns = gpu__time_duration in nanoseconds, summed over a variant's launches; ncu ms in run tables."
#: Under a run table with ncu's columns.
RUN_LEGEND = ("ncu ms is from a second process under ncu, where some kernels run at another speed "
              "(docs/ncu.md): it can differ from the median by more than the timing error.")


@dataclass(frozen=True)
class MetricSet:
    """A named list of ncu metrics and how their figures show: the instrument contract of ``cudalab ncu``.

    This is the extension axis: a new set is one entry of :data:`METRIC_SETS` (``--metrics NAME`` takes it,
    ``--import`` recognises a file collected with it); its columns and legend reach ``cudalab ncu``'s table,
    the run table of ``cudalab FAMILY --ncu`` and ``cudalab report`` with no edit elsewhere (a saved point
    carries them: :meth:`instrument`).

    Attributes:
        name: what ``--metrics`` takes (``custom`` for a user's list of names).
        metrics: the ncu metric names to collect (the duration among them).
        description: one line.
        columns: ``cudalab ncu``'s table, in order (empty: one column per metric under its ncu name, then
            :data:`TIME`; a run then keeps the duration only).
        kept: the figures a run keeps in each row and shows in run tables, in that order (None: the columns
            that have a key, in table order).
        legend: lines under ``cudalab ncu``'s table and under a run table that shows the kept figures.
    """

    name: str
    metrics: tuple[str, ...]
    description: str = ""
    columns: tuple[Figure, ...] = ()
    kept: tuple[Figure, ...] | None = None
    legend: tuple[str, ...] = (TIME_LEGEND,)

    def table(self) -> tuple[Figure, ...]:
        """The columns of ``cudalab ncu``'s table."""
        if self.columns:
            return self.columns
        return tuple(Figure(m, m, 2) for m in self.metrics if m != DURATION) + (TIME,)

    def keeps(self) -> tuple[Figure, ...]:
        """The figures a run keeps, in run-table order."""
        return self.kept if self.kept is not None else tuple(f for f in self.table() if f.key)

    def values(self, row: Any) -> dict[str, Any]:
        """What a run keeps of one profiled row (``Result.extra`` entries): each kept figure, scaled, and
        the ✓/✗ of those with a check (when there is something to check)."""
        out: dict[str, Any] = {}
        verdicts = {}
        for f in self.keeps():
            v = f.of(row)
            out[f.key] = v / f.divisor if v is not None and f.divisor != 1.0 else v
            ok = f.check(row)[0] if f.check is not None else None
            if ok is not None:
                verdicts[f.check_key] = ok
        return out | verdicts

    def instrument(self) -> Instrument:
        """The kept figures' columns and the legend, as a run point carries them."""
        return Instrument("ncu", tuple(f.column() for f in self.keeps()), tuple(self.legend) + (RUN_LEGEND,),
                          status="ncu_status", note="ncu_note")


SMEM_LEGEND = (
    "wf/req = shared-memory wavefronts per request (one request per warp instruction): the n-way figure (1 = "
    "conflict-free, 32 = all 32 threads of a warp in one bank at different words); ✓/✗ against the variant's "
    f"expected value (accepted: expected −{BELOW:.0%} … +{ABOVE:g}).",
    "conflicts = ncu's bank-conflict counter: the extra wavefronts beyond one per request (not ways); on "
    "Ampere/Hopper it can also count arbitration between warps, so both figures are shown.",
)
MEMORY_LEGEND = ("global ld / st eff % = bytes a warp's global loads / stores use per 32-byte sector they touch "
                 "(100 = fully coalesced); DRAM % peak = DRAM throughput against its sustained peak; DRAM bytes = "
                 "bytes the DRAM read and wrote for the kernel (a rung's own intensity on cudalab roofline's chart).",)

TENSOR_LEGEND = ("tensor pipe % = the cycles the tensor pipe was busy against its peak, over the active cycles "
                 "(ncu's HMMA pipe figure; on an H100 wgmma's work shows in it too); HMMA inst / GMMA inst = warp "
                 "instructions of mma.sync and wmma / of Hopper's warp-group wgmma; DRAM % peak = DRAM "
                 "throughput against its sustained peak; DRAM bytes = bytes the DRAM read and wrote.",)

OCCUPANCY_LEGEND = ("theor. occ % = the most warps an SM can hold for this launch, of its maximum (ncu's figure; "
                    "cudalab compile and sass compute it without a GPU); achieved occ % = the warps active on "
                    "average over the active cycles; limit blocks / regs / smem / warps = the blocks an SM holds "
                    "by each limit (the smallest binds).",)

METRIC_SETS: dict[str, MetricSet] = {
    "smem": MetricSet(
        "smem", (SMEM_LD_REQ, SMEM_ST_REQ, SMEM_LD_WF, SMEM_ST_WF, SMEM_LD_CONF, SMEM_ST_CONF, DURATION),
        "shared-memory requests, wavefronts, wavefronts per request, bank conflicts, duration",
        columns=(Figure("ld req", SMEM_LD_REQ), Figure("ld wf", SMEM_LD_WF), SMEM_LD_WPR, SMEM_LD_CONFLICTS,
                 Figure("st req", SMEM_ST_REQ), Figure("st wf", SMEM_ST_WF), SMEM_ST_WPR, SMEM_ST_CONFLICTS, TIME),
        kept=(SMEM_LD_WPR, SMEM_ST_WPR, SMEM_LD_CONFLICTS, SMEM_ST_CONFLICTS, TIME),
        legend=SMEM_LEGEND + (TIME_LEGEND,)),
    "memory": MetricSet(
        "memory", (DRAM_PCT, GLD_EFF, GST_EFF, L2_HIT, DRAM_READ, DRAM_WRITE, DURATION),
        "DRAM throughput, global load/store efficiency, L2 hit rate, DRAM bytes, duration",
        columns=(Figure("DRAM % peak", DRAM_PCT, 1, key="ncu_dram"), DRAM_BYTES,
                 Figure("global ld eff %", GLD_EFF, 1, key="ncu_gld", run_header="gld eff %"),
                 Figure("global st eff %", GST_EFF, 1, key="ncu_gst", run_header="gst eff %"),
                 Figure("L2 hit %", L2_HIT, 1, key="ncu_l2"), TIME),
        legend=MEMORY_LEGEND + (TIME_LEGEND,)),
    "time": MetricSet("time", (DURATION,), "kernel duration"),
    "tensor": MetricSet(
        "tensor", (TENSOR_HMMA_PCT, TENSOR_HMMA_INST, TENSOR_GMMA_INST, DRAM_PCT, DRAM_READ, DRAM_WRITE, DURATION),
        "tensor pipe utilisation (HMMA: mma.sync, wmma), HMMA and GMMA (wgmma) instructions, DRAM throughput, DRAM "
        "bytes, duration",
        columns=(Figure("tensor pipe %", TENSOR_HMMA_PCT, 1, key="ncu_tensor", run_header="tensor %", run_digits=1),
                 Figure("HMMA inst", TENSOR_HMMA_INST, key="ncu_hmma", run_digits=0),
                 Figure("GMMA inst", TENSOR_GMMA_INST, key="ncu_gmma", run_digits=0),
                 Figure("DRAM % peak", DRAM_PCT, 1, key="ncu_dram"), DRAM_BYTES, TIME),
        legend=TENSOR_LEGEND + (TIME_LEGEND,)),
    "occupancy": MetricSet(
        "occupancy", (OCC_THEORETICAL, OCC_ACHIEVED, OCC_LIMIT_BLOCKS, OCC_LIMIT_REGISTERS, OCC_LIMIT_SHARED,
                      OCC_LIMIT_WARPS, DURATION),
        "theoretical and achieved occupancy, the blocks per SM each limit allows, duration",
        columns=(Figure("theor. occ %", OCC_THEORETICAL, 1, key="ncu_occ_theoretical", run_header="theor. occ %",
                        run_digits=1),
                 Figure("achieved occ %", OCC_ACHIEVED, 1, key="ncu_occ_achieved", run_header="achieved occ %",
                        run_digits=1),
                 Figure("limit blocks", OCC_LIMIT_BLOCKS), Figure("limit regs", OCC_LIMIT_REGISTERS),
                 Figure("limit smem", OCC_LIMIT_SHARED), Figure("limit warps", OCC_LIMIT_WARPS), TIME),
        legend=OCCUPANCY_LEGEND + (TIME_LEGEND,)),
}
_METRIC_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*$")


def has_smem_expectations(spec: FamilySpec, fam: Family, problem: Size | None = None) -> bool:
    """Whether a family declares expected wavefronts per request (then ``smem`` is its default set)."""
    return any(expectations(fam, problem, v) for v in spec.variants if v.kind == "kernel")


def resolve_metrics(text: str | None, spec: FamilySpec | None = None, fam: Family | None = None,
                    problem: Size | None = None) -> MetricSet:
    """Turn ``--metrics`` into a MetricSet: a set name, or a comma list of raw metric names.

    Default: ``smem`` for families that declare smem expectations, ``memory`` otherwise. A custom
    list always gets the duration added.

    Raises:
        UsageError: a name that is not a metric name.
    """
    if not text:
        smem = spec is not None and fam is not None and has_smem_expectations(spec, fam, problem)
        return METRIC_SETS["smem" if smem else "memory"]
    if text in METRIC_SETS:
        return METRIC_SETS[text]
    names = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in names if not _METRIC_NAME.match(m)]
    if bad or not names:
        raise UsageError(f"--metrics takes {', '.join(METRIC_SETS)} or a comma list of ncu metric names "
                         f"(e.g. {DRAM_PCT}); not {', '.join(bad) or repr(text)}")
    if DURATION not in names:
        names.append(DURATION)
    return MetricSet("custom", tuple(dict.fromkeys(names)), "metrics named on the command line")


def infer_metric_set(names: set[str]) -> MetricSet:
    """The metric set a file was collected with: the one of :data:`METRIC_SETS` it holds most metrics of (two at
    least, besides the duration; sets share some, the DRAM figures: the first on a tie), time when it holds only
    that, else custom."""
    held = {k: len((set(m.metrics) - {DURATION}) & names) for k, m in METRIC_SETS.items()}
    best = max(held, key=lambda k: held[k])  # max keeps the first of equals: the table's order
    if held[best] >= 2:
        return METRIC_SETS[best]
    if names <= {DURATION}:
        return METRIC_SETS["time"]
    return MetricSet("custom", tuple(sorted(names - {DURATION})) + (DURATION,), "metrics found in the file")


def matches(measured: float | None, expected: float | None) -> bool | None:
    """Whether a measured wavefronts/request meets the expected n-way figure (None: nothing to check)."""
    if expected is None:
        return None
    if measured is None:
        return False
    return expected * (1 - BELOW) <= measured <= expected + ABOVE


def expectations(fam: Family | None, problem: Size | None, variant: VariantSpec) -> dict[str, float]:
    """Expected wavefronts per request ``{"ld": .., "st": ..}`` from the family's ``smem_expect`` hook
    (family.toml's ``params.smem_expect`` unless the family computes it, e.g. from ``--ipad``)."""
    if fam is not None and problem is not None:
        exp = fam.smem_expect(problem, variant)
    else:
        exp = variant.param("smem_expect")
    return {k: float(v) for k, v in (exp or {}).items() if k in ("ld", "st")}
