"""Helpers for the GPU tests: run a family quickly (few samples, no roofline) and index the rows."""

from __future__ import annotations

from cudalab import plan as planning
from cudalab.worker import executor as runner
from cudalab.bench import Protocol

FAST = Protocol(warmup=1, min_samples=2, max_samples=3, budget_s=0.01, flush_l2=False)


def run_rows(device, family: str, **kw) -> dict[str, runner.Result]:
    """Run a family with a fast protocol and return its rows by variant name."""
    req = planning.RunRequest(family=family, roofline=False, protocol=FAST, **kw)
    return {r.variant: r for r in runner.FamilyRun(planning.precheck(req), device).run()}


def assert_all_passed(rows: dict[str, runner.Result], allow_skipped: bool = False) -> None:
    """Every row passed (or, where allowed, was skipped for a stated reason)."""
    bad = {n: f"{r.status}: {r.reason}" for n, r in rows.items()
           if r.status != runner.PASSED and not (allow_skipped and r.status == runner.SKIPPED and r.reason)}
    assert not bad, bad
