"""One planned point as the parent holds it while GPU workers run it: the rows that came back.

The session owns these (:class:`cudalab.execute.local.drive.Session`): it adds each row, output and roofline as
its worker sends them. Nothing here runs on a GPU or plans anything: the plan was made once, before the
run (:func:`cudalab.plan.precheck`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.families import Family, Size
from cudalab.plan import Plan, RunRequest
from cudalab.records.results import Result, Roofline

__all__ = ["Point"]


@dataclass(eq=False)
class Point:
    """A point's plan and what its worker(s) sent back.

    Attributes:
        plan: the planned point (what the worker was sent).
        results: one row per variant, as they arrived.
        outputs: variant -> result array (``--show``, ``--example``).
        inputs: the inputs the worker drew (``--show``).
        roofline: the copy roofline its rates are rated against (None: none measured).
        roofline_note: why no roofline was measured, when one was wanted.
        gpu: the GPU index that ran it.
        refused: (why, exit code) when the point could not run at all (its memory plan did not fit).
        host, gpu_name: where a cluster ran it (``--cluster``; None on this host's own workers).
    """

    plan: Plan
    results: list[Result] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    roofline: Roofline | None = None
    roofline_note: str = ""
    gpu: int | None = None
    refused: tuple[str, int] | None = None
    host: str | None = None
    gpu_name: str | None = None

    @property
    def req(self) -> RunRequest:
        """The point's request."""
        return self.plan.request

    @property
    def spec(self) -> FamilySpec:
        """The family's catalog entry."""
        return self.plan.spec

    @property
    def family(self) -> Family:
        """The family's module."""
        return self.plan.family

    @property
    def problem(self) -> Size:
        """The point's sizes, dtype and options."""
        return self.plan.problem

    @property
    def variants(self) -> tuple[VariantSpec, ...]:
        """The rows the point runs."""
        return self.plan.variants
