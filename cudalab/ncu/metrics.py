"""ncu metric sets, the expected shared-memory figures and the ✓/✗ window around them (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.errors import UsageError
from cudalab.families import Family, Problem

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
# Tensor pipe: the share of active cycles the HMMA pipe (mma.sync, wmma) was busy, and the warp
# instructions of HMMA and of Hopper's warp-group MMA (wgmma, GMMA), so a tensor-core ladder shows
# why each rung is faster. Names as `ncu --query-metrics --chip gh100` lists them (H100, ncu 2025.3).
TENSOR_HMMA_PCT = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_HMMA_INST = "sm__inst_executed_pipe_tensor_op_hmma.sum"
TENSOR_GMMA_INST = "sm__inst_executed_pipe_tensor_op_gmma.sum"


@dataclass(frozen=True)
class MetricSet:
    """A named list of ncu metrics (``custom`` for a user's list of names)."""

    name: str
    metrics: tuple[str, ...]
    description: str = ""


METRIC_SETS: dict[str, MetricSet] = {
    "smem": MetricSet("smem", (SMEM_LD_REQ, SMEM_ST_REQ, SMEM_LD_WF, SMEM_ST_WF, SMEM_LD_CONF, SMEM_ST_CONF, DURATION),
                      "shared-memory requests, wavefronts, wavefronts per request, bank conflicts, duration"),
    "memory": MetricSet("memory", (DRAM_PCT, GLD_EFF, GST_EFF, L2_HIT, DURATION),
                        "DRAM throughput, global load/store efficiency, L2 hit rate, duration"),
    "time": MetricSet("time", (DURATION,), "kernel duration"),
    "tensor": MetricSet("tensor", (TENSOR_HMMA_PCT, TENSOR_HMMA_INST, TENSOR_GMMA_INST, DRAM_PCT, DURATION),
                        "tensor pipe utilisation (HMMA: mma.sync, wmma), HMMA and GMMA (wgmma) instructions, "
                        "DRAM throughput, duration"),
}
_METRIC_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*$")


def has_smem_expectations(spec: FamilySpec, fam: Family, problem: Problem | None = None) -> bool:
    """Whether a family declares expected wavefronts per request (then ``smem`` is its default set)."""
    return any(expectations(fam, problem, v) for v in spec.variants if v.kind == "kernel")


def resolve_metrics(text: str | None, spec: FamilySpec | None = None, fam: Family | None = None,
                    problem: Problem | None = None) -> MetricSet:
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
    """The metric set a file was collected with: smem, memory, tensor or time when it holds theirs, else custom."""
    for key in ("smem", "memory", "tensor"):
        core = set(METRIC_SETS[key].metrics) - {DURATION}
        if len(core & names) >= 2:
            return METRIC_SETS[key]
    if names <= {DURATION}:
        return METRIC_SETS["time"]
    return MetricSet("custom", tuple(sorted(names - {DURATION})) + (DURATION,), "metrics found in the file")


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


def matches(measured: float | None, expected: float | None) -> bool | None:
    """Whether a measured wavefronts/request meets the expected n-way figure (None: nothing to check)."""
    if expected is None:
        return None
    if measured is None:
        return False
    return expected * (1 - BELOW) <= measured <= expected + ABOVE


def expectations(fam: Family | None, problem: Problem | None, variant: VariantSpec) -> dict[str, float]:
    """Expected wavefronts per request ``{"ld": .., "st": ..}`` from the family's ``smem_expect`` hook
    (family.toml's ``params.smem_expect`` unless the family computes it, e.g. from ``--ipad``)."""
    if fam is not None and problem is not None:
        exp = fam.smem_expect(problem, variant)
    else:
        exp = variant.param("smem_expect")
    return {k: float(v) for k, v in (exp or {}).items() if k in ("ld", "st")}
