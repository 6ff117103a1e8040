"""Nsight Compute over a family's kernels: metric sets, their columns and legends, and expectations
(:mod:`.metrics`), a pure CSV parser (:mod:`.parse`), the launch matcher (:mod:`.match`), rows (:mod:`.rows`),
the command's table (:mod:`.table`), the profile driver (:mod:`.profile`), ``--import`` of saved files
(:mod:`.imports`), the source page's per-line figures (:mod:`.source`; rules: :class:`.parse.Rule`) and
reports as run records (:mod:`.saved`). Nothing here imports :mod:`cudalab.report`: it prints what the
instrument contract hands it (:mod:`cudalab.instruments`; the saved views: :mod:`cudalab.report.instruments`)."""

from __future__ import annotations

from cudalab.errors import CounterPermissionError, ForeignProfileError, KernelNotProfiledError, NcuParseError
from cudalab.ncu.imports import load_import
from cudalab.ncu.match import Match, combine, match_launches
from cudalab.ncu.metrics import (
    ABOVE,
    BELOW,
    DRAM_PCT,
    DURATION,
    GLD_EFF,
    GST_EFF,
    L2_HIT,
    METRIC_SETS,
    SMEM_LD_CONF,
    SMEM_LD_REQ,
    SMEM_LD_WF,
    SMEM_ST_CONF,
    SMEM_ST_REQ,
    SMEM_ST_WF,
    TIME,
    Figure,
    MetricSet,
    expectations,
    matches,
    resolve_metrics,
)
from cudalab.ncu.parse import MARKER, KernelLaunch, Metric, ParsedCsv, Rule, dims, parse_csv, parse_number
from cudalab.ncu.profile import add_ncu, find_ncu, import_argv, kernel_filter, profile, profile_argv
from cudalab.ncu.rows import NcuReport, NcuRow, attach_source, build_rows
from cudalab.ncu.source import SourceBlock, SourceLine, parse_source
from cudalab.ncu.table import table

__all__ = [
    "ABOVE", "BELOW", "DRAM_PCT", "DURATION", "GLD_EFF", "GST_EFF", "L2_HIT", "MARKER", "METRIC_SETS", "SMEM_LD_CONF",
    "SMEM_LD_REQ", "SMEM_LD_WF", "SMEM_ST_CONF", "SMEM_ST_REQ", "SMEM_ST_WF", "TIME", "CounterPermissionError",
    "Figure",
    "ForeignProfileError", "KernelLaunch", "KernelNotProfiledError", "Match", "Metric", "MetricSet", "NcuParseError",
    "NcuReport", "NcuRow", "ParsedCsv", "add_ncu", "build_rows", "combine", "dims", "expectations", "find_ncu",
    "import_argv", "kernel_filter", "load_import", "match_launches", "matches", "parse_csv", "parse_number",
    "profile", "profile_argv", "resolve_metrics", "Rule", "SourceBlock", "SourceLine", "attach_source", "parse_source",
    "table",
]
