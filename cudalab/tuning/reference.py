"""The library row a campaign's "% of" column is over, for FLOP-rate and item-rate families.

A run of matmul or sort fills its "% of ref" column against the run's own library row (cuBLAS, CuPy's sort:
:func:`cudalab.report.pct_column`); a trial runs the tuned variant alone, so a campaign measures that row
itself, once, as one more run point: the base request with the library variant, the trials' protocol.
Bandwidth families need none (the worker measures their roofline beside each trial).

The row is an extra: one that is refused, fails, is skipped (no CuPy) or never runs leaves the column's
cells "–" with the reason kept here, and never fails the campaign.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from cudalab.errors import ClusterLost, LaunchConfigError, UsageError
from cudalab.records.results import PASSED

__all__ = ["Reference", "library_of", "measure", "planned", "reading", "unmeasured"]

#: The trial attribute holding a row's figure, and its unit, per family metric that is judged by a library row.
_KEY = {"flops": ("gflops", "GFLOP/s"), "rate": ("rate", "G items/s")}


@dataclass(frozen=True)
class Reference:
    """The library row of a campaign: what the table's "% of <variant>" column is over.

    Attributes:
        variant: the library variant's name (``cublas``).
        metric: the family's metric (``flops`` or ``rate``).
        rate: its figure in ``unit`` (None: no row passed; ``reason`` says why).
        unit: ``GFLOP/s`` or ``G items/s``.
        reason: why there is no rate ('' when there is one).
        run: the run point that measured it (a run record's point; None when nothing ran).
    """

    variant: str
    metric: str
    rate: float | None = None
    unit: str = ""
    reason: str = ""
    run: Any = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> str:
        """The trial attribute that holds a trial's figure in this unit (``gflops``, ``rate``)."""
        return _KEY[self.metric][0]

    @property
    def header(self) -> str:
        """The table's column title: ``% of cublas``."""
        return f"% of {self.variant}"

    def pct(self, rate: float | None) -> float | None:
        """``rate`` as a percentage of the library row's (None when either is missing)."""
        if not rate or not self.rate:
            return None
        return 100.0 * float(rate) / self.rate

    def to_dict(self) -> dict[str, Any]:
        """The ``tune.reference`` section of ``--json``."""
        return {"variant": self.variant, "rate": self.rate, "unit": self.unit, "reason": self.reason}


def library_of(p: Any) -> Reference | None:
    """The campaign's library row, not yet measured: the family's first library variant that takes the
    campaign's dtype, for a FLOP-rate or item-rate family (None: a bandwidth family, or one without one)."""
    if p.spec.metric not in _KEY:
        return None
    libs = [v for v in p.spec.variants if v.kind == "library"]
    if not libs:
        return None
    dtype = p.base.dtype or p.spec.default_dtype
    fits = [v for v in libs if not v.dtypes or dtype in v.dtypes]
    lib = (fits or libs)[0]
    ref = Reference(lib.name, p.spec.metric, unit=_KEY[p.spec.metric][1])
    return ref if fits else replace(ref, reason=f"{lib.name} supports dtype {'|'.join(lib.dtypes)} only")


def unmeasured(p: Any, why: str = "not measured: the campaign ended before it") -> Reference | None:
    """The campaign's library row when it was never run (its column keeps its title, its cells "–")."""
    ref = library_of(p)
    return replace(ref, reason=ref.reason or why) if ref is not None else None


def planned(p: Any, runs: Any) -> tuple[Reference | None, Any]:
    """The campaign's library row and its planned request (the base request, the library variant, the trials'
    protocol), or no request where there is nothing to run: a bandwidth family (None, None), a dtype the library
    does not take, a request the CPU refuses (the size, the host's memory; the reference says why, no GPU work).

    Args:
        p: the campaign's plan (:class:`~cudalab.tuning.prepare.CampaignPlan`).
        runs: its workers (:class:`~cudalab.tuning.runs.Runs`): the request's one plan is theirs.
    """
    ref = library_of(p)
    if ref is None or ref.reason:
        return ref, None
    req = replace(p.base, variants=ref.variant, add=())  # the library row alone (a tuned --add kernel is a trial's)
    try:
        runs.plan(req)
    except (UsageError, LaunchConfigError) as exc:
        return replace(ref, reason=f"refused: {exc}"), None
    return ref, req


def reading(ref: Reference, got: Any) -> Reference:
    """The library row's figure from its run: ``got`` the run's points (an interrupted run: none), or the exception
    its engine gave up with (a worker that cannot start again, a bug: the column's loss, not the campaign's)."""
    if isinstance(got, BaseException):
        text = str(got).splitlines()[0][:300] if str(got) else ""
        return replace(ref, reason=f"{type(got).__name__}: {text}")
    fr = got[0] if got else None
    row = next((r for r in (fr.results if fr is not None else ()) if r.variant == ref.variant), None)
    if row is None:
        return replace(ref, reason="it did not run (interrupted, or the cluster could not run it)")
    rate = row.gflops if ref.metric == "flops" else row.extra.get("rate")
    if row.status != PASSED or not rate:
        return replace(ref, reason=f"{row.status}: {row.reason}" if row.reason else str(row.status), run=fr)
    return replace(ref, rate=float(rate), run=fr)


def measure(p: Any, runs: Any, account: Any) -> Reference | None:
    """Run the campaign's library row once on the campaign's workers, on whichever engine runs them
    (:meth:`~cudalab.tuning.runs.Runs.run`), after its trials: where its GPU waited for no build, the trial loop did
    not run it (:class:`~cudalab.tuning.loops.TrialLoops`).

    Where the GPU would wait for the first trials' builds the loop runs it then, in the time the GPU would idle
    (a cold campaign's first build took the H200 about a second longer than its worker took to open). Otherwise it
    runs here, after the trials and before the race: the first trial and ``--time``'s deadline start with the
    campaign, a campaign resumed with its trials all done still gets it, and it is measured on a GPU as warm as the
    trials' and the race's. Its seconds are the trials' in the time account (a run in the worker like theirs), and
    GPU busy covers it too.

    Args:
        p: the campaign's plan (:class:`~cudalab.tuning.prepare.CampaignPlan`).
        runs: its workers (:class:`~cudalab.tuning.runs.Runs`).
        account: its time account (:class:`~cudalab.tuning.account.TimeAccount`).

    Returns:
        The row's figure, or its reason for having none; None for a family judged by a roofline.

    Raises:
        ClusterLost: the scheduler went away (the campaign's own end, not the row's).
    """
    ref, req = planned(p, runs)
    if req is None:
        return ref
    try:
        with account.timed("trials"):
            got, _ = runs.run([req])
    except ClusterLost:
        raise
    except Exception as exc:  # noqa: BLE001  (a worker that cannot start again, a bug: the column's, not the campaign's)
        got = exc
    return reading(ref, got)
