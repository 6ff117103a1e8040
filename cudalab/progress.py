"""What a run reports as it goes: :class:`Observer`, the callback set (points, variant stages, finished rows).

The run's side (the session, the engines, tune, watch) reports to one; what shows it on stderr (a rich bar on
a terminal, one line a row in logs) is the report side's (:mod:`cudalab.report.progress`), which imports this
module, not the other way round.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Observer"]


class Observer:
    """What a run reports as it goes; every method is optional (this base ignores everything).

    The order is: :meth:`start` once with the total number of rows, then per point :meth:`point`,
    and per variant :meth:`stage` (``compiling``, ``running``) and :meth:`result` with its finished
    row; :meth:`close` at the end, also after an interrupt.
    """

    def start(self, total: int, family: str = "") -> None:
        """The run will produce ``total`` rows."""

    def point(self, index: int, count: int, label: str) -> None:
        """Point ``index`` (0-based) of ``count`` starts; ``label`` names its size and settings."""

    def stage(self, variant: str, stage: str) -> None:
        """A variant enters a stage: ``compiling`` or ``running`` (a tool may add its own)."""

    def result(self, row: Any) -> None:
        """A row is finished (a :class:`cudalab.records.results.Result`, or a tool's row with ``variant``/``status``)."""

    def close(self) -> None:
        """The run is over."""
