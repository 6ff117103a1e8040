"""The CI gate of ``cudalab compare --fail-on``: its options and when it fails (pure).

A gate fails on a row judged slower by more than the threshold, with confidence (:mod:`cudalab.records.compare`
judges), and on a row of the base run that the new run lacks; it never fails on faster or unsure rows,
and it cannot pass on nothing.
"""

from __future__ import annotations

import re
from typing import Sequence

from cudalab.records.compare import SLOWER, Comparison, Row
from cudalab.errors import UsageError


def parse_percent(text: str, what: str) -> float:
    """``2%`` or ``2`` -> 0.02.

    Raises:
        UsageError: not a non-negative number of percent.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*%?\s*", text)
    if not m:
        raise UsageError(f"{what} {text!r} must be a percentage, e.g. 2%")
    return float(m.group(1)) / 100.0


def parse_fail_on(text: str, calibrated: float | None = None) -> float:
    """``slower:5%`` -> 0.05 (the gate fails on rows slower by more than this, with confidence); plain ``slower``
    -> ``calibrated``, the GPU's noise floor (:mod:`cudalab.records.noise`).

    Raises:
        UsageError: anything else (only ``slower`` can fail a gate), or ``slower`` on a GPU never calibrated.
    """
    kind, sep, amount = text.partition(":")
    if kind.strip() == "slower" and not sep:
        if calibrated is None:
            raise UsageError(f"--fail-on slower needs a percentage (slower:5%) or a calibrated GPU (cudalab calibrate)")
        return calibrated
    if kind.strip() != "slower" or not sep:
        raise UsageError(f"--fail-on {text!r} must be slower:PERCENT, e.g. slower:5% (or slower: the calibrated floor)")
    return parse_percent(amount, "--fail-on")


def gate(comparisons: Sequence[Comparison], threshold: float, allow_missing: bool = False) -> list[str]:
    """The CI gate: one line per reason it fails (empty: it passed).

    A row slower than A by more than ``threshold`` with confidence fails it, and so does a row of A that
    found no partner (it could hide a variant that stopped running) unless ``allow_missing``.

    Raises:
        UsageError: no row of any comparison got a verdict: a gate cannot pass on nothing.
    """
    if not any(c.judged for c in comparisons):
        names = ", ".join(c.new_name for c in comparisons)
        raise UsageError(f"--fail-on: nothing was compared ({names} against {comparisons[0].base_name}: no row "
                         "matched by family, problem and variant got a verdict)")
    lines = []
    for c in comparisons:
        for row in gate_failures(c, threshold):
            how = f"{c.word(SLOWER)} by {row.verdict.ratio - 1:.1%} in % of roofline" if c.by_roofline else \
                f"slower by {row.verdict.ratio - 1:.1%}"
            lines.append(f"- {c.new_name}: {row.family} {row.problem} {row.variant} {how} (p={row.verdict.p:.2g})")
        if not allow_missing:
            lines += [f"- {c.new_name}: {row.family} {row.problem} {row.variant} missing (in {c.base_name} only; "
                      "--allow-missing accepts it)" for row in c.missing()]
    return lines


def gate_failures(comparison: Comparison, threshold: float) -> list[Row]:
    """Rows judged ``slower`` whose ratio exceeds ``1 + threshold`` (never faster, unsure or –)."""
    return [r for r in comparison.rows
            if r.verdict.verdict == SLOWER and r.verdict.ratio is not None and r.verdict.ratio > 1.0 + threshold]
