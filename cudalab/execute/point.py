"""One planned point as the parent holds it while an engine runs it: the rows that came back.

An engine owns these (:mod:`cudalab.execute`): the local one adds each row, output and roofline as its worker
sends them; the Dask one reads a point back whole from what a Dask worker's own local engine assembled
(:meth:`Point.to_data`, :meth:`Point.from_data`). Either way a point's rows are assembled here, one way. Nothing
here runs on a GPU or plans anything: the plan was made once, before the run (:func:`cudalab.plan.precheck`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from cudalab.catalog import FamilySpec, VariantSpec
from cudalab.families import Family, Size
from cudalab.plan import Plan, RunRequest
from cudalab.records.results import FAILED, Result, Roofline, Status
from cudalab.roofline import with_roofline
from cudalab.worker.protocol import unpack_array

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

    def add(self, row: Result, output: str | None = None) -> None:
        """A row as its worker sent it (``output``: its result array, packed by the protocol)."""
        self.results.append(row)
        if output:
            self.outputs[row.variant] = unpack_array(output)

    def not_run(self, names: Sequence[str], why: str, status: Status = FAILED) -> list[Result]:
        """The rows of variants ``names`` that will not run, each saying why (not added: the engine adds them)."""
        by = {v.name: v for v in self.variants}
        return [Result(variant=n, kind=by[n].kind, status=status, reason=why, legacy=by[n].legacy) for n in names]

    def missing(self) -> list[str]:
        """The variants without a row yet, in the plan's order."""
        done = {r.variant for r in self.results}
        return [v.name for v in self.variants if v.name not in done]

    def rate(self, roof: Roofline | None, why: str = "") -> None:
        """The point's roofline (None: ``why`` not, "not measured" when nothing says), its rows rated against it."""
        self.roofline = roof
        self.roofline_note = "" if roof is not None else (why or "not measured")
        if roof is not None:
            self.results = [with_roofline(r, roof) for r in self.results]

    def to_data(self) -> dict[str, Any]:
        """The point's rows and what came with them, as plain data (a Dask task's result: :meth:`from_data`)."""
        return {"rows": [r.to_dict() for r in self.results],
                "roofline": self.roofline.to_dict() if self.roofline is not None else None,
                "roofline_note": self.roofline_note, "refused": self.refused, "outputs": self.outputs,
                "inputs": self.inputs}

    @classmethod
    def from_data(cls, plan: Plan, data: dict[str, Any], where: dict[str, Any]) -> "Point":
        """The point :meth:`to_data` sent from ``where`` (a Dask worker: its host, GPU name and visible GPU),
        every row saying the GPU and host that ran it."""
        pt = cls(plan)
        tag = {"gpu_name": where.get("gpu", ""), "host": where.get("host", "")}
        for d in data["rows"]:
            r = Result.from_dict(d)
            pt.add(replace(r, extra={**r.extra, **tag}))
        pt.roofline = Roofline.from_dict(data.get("roofline"))
        pt.roofline_note = str(data.get("roofline_note") or "")
        pt.refused = tuple(data["refused"]) if data.get("refused") else None  # type: ignore[assignment]
        pt.outputs, pt.inputs = dict(data.get("outputs") or {}), dict(data.get("inputs") or {})
        visible = str(where.get("visible", ""))
        pt.gpu = int(visible) if visible.isdigit() else 0
        pt.host, pt.gpu_name = tag["host"], tag["gpu_name"]
        return pt
