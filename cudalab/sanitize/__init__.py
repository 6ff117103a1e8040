"""compute-sanitizer over a family's kernels: a pure output parser (:mod:`.parse`) and the driver on the
child protocol (:mod:`.driver`). Tables live in :mod:`cudalab.report`."""

from __future__ import annotations

from cudalab.records.results import FAILED, FINDINGS, PASSED, SKIPPED
from cudalab.sanitize.driver import (
    DEFAULT_PRINT_LIMIT,
    DEFAULT_TIMEOUT_S,
    ERROR_EXITCODE,
    TOOLS,
    Job,
    Row,
    failing,
    find_sanitizer,
    judge,
    never_ran,
    plan,
    prefix_argv,
    run_job,
    sanitize,
    sizes_for,
    tools_for,
)
from cudalab.sanitize.parse import Parsed, parse_output

__all__ = ["DEFAULT_PRINT_LIMIT", "DEFAULT_TIMEOUT_S", "ERROR_EXITCODE", "FAILED", "FINDINGS", "PASSED", "SKIPPED",
           "TOOLS", "Job", "Parsed", "Row", "failing", "find_sanitizer", "judge", "never_ran", "parse_output", "plan",
           "prefix_argv", "run_job", "sanitize", "sizes_for", "tools_for"]
