"""A finished campaign as the user sees it: its trials, its best configurations, the race's verdict,
the command that reruns the winner, and the run record ``report`` and ``compare`` read (pure)."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from cudalab import __version__
from cudalab.bench import summarize
from cudalab.records.results import RunRecord
from cudalab.tuning import campaign as C
from cudalab.tuning.space import point_key

__all__ = ["TuneResult", "point_key"]


@dataclass(frozen=True)
class TuneResult:
    """What ``cudalab.tuning`` returns.

    Attributes:
        family, variant, name, url: the campaign and its storage.
        objectives: what was minimised.
        trials: every measured trial (this run's and earlier ones').
        race: the racing result (None: not raced).
        pareto: for two objectives, the trials on the Pareto front.
        default_key: the family's own configuration (the speedup's baseline).
        record: the run record of the raced configurations (None when nothing was raced).
        command: the ``cudalab`` command that reruns the winner.
        incomplete, exit_code: interrupted (130) or not (0).
        space: the search space as :meth:`~cudalab.tuning.space.Space.describe` gives it.
        gpu_busy_pct: the GPU's mean utilization (NVML) while the trials ran, before the race (None: not
            known, as on a cluster or without NVML).
        time_account: seconds in the trials, waiting for builds, the search and the race, and the wall time
            (:mod:`cudalab.tuning.account`).
        reference: for a FLOP-rate or item-rate family with a library variant, its row measured once in the
            campaign (:class:`~cudalab.tuning.reference.Reference`: variant, rate, unit, or why none), which
            :meth:`pct` is over; None for a bandwidth family (its % is of the roofline each trial measured).
    """

    family: str
    variant: str
    name: str
    url: str
    objectives: tuple[str, ...]
    trials: tuple[C.Measured, ...]
    race: Any = None
    pareto: tuple[C.Measured, ...] = ()
    default_key: str = ""
    record: RunRecord | None = None
    command: str = ""
    incomplete: bool = False
    exit_code: int = 0
    space: dict[str, Any] = field(default_factory=dict)
    gpu_busy_pct: float | None = None
    time_account: dict[str, float] = field(default_factory=dict)
    reference: Any = None

    @property
    def pct_header(self) -> str:
        """The title of the table's % column: ``% roof``, or ``% of cublas`` where a library row is the 100%."""
        return self.reference.header if self.reference is not None else "% roof"

    def pct(self, m: C.Measured) -> float | None:
        """A trial's % column: its rate as % of the library row's (:attr:`reference`), else % of the roofline
        its own run measured (bandwidth families); None when there is nothing to divide by."""
        if self.reference is None:
            return m.attrs.get("pct")
        return self.reference.pct(m.attrs.get(self.reference.key))

    @property
    def feasible(self) -> list[C.Measured]:
        """The trials that passed, best first."""
        return sorted((m for m in self.trials if m.values is not None), key=lambda m: m.values)

    @property
    def winner(self) -> str:
        """The winner's key: the race's, else the best trial's ('' when none passed)."""
        if self.race is not None and self.race.winner:
            return self.race.winner
        best = self.feasible
        return point_key(best[0].point) if best else ""

    @property
    def best_params(self) -> dict[str, str]:
        """The winner's configuration, name -> value ({} when nothing passed)."""
        return next((dict(m.point) for m in self.trials if point_key(m.point) == self.winner), {})

    def write_header(self, path: str) -> str:
        """Write the winner as a C header of ``#define``\\ s (the block as ``TUNED_BLOCK_X/Y/Z``) and JSON beside it
        (``PATH.json``), both naming the GPU and the campaign; returns the path.

        Raises:
            UsageError: nothing passed, or the path is refused.
        """
        from cudalab.errors import UsageError  # noqa: PLC0415
        from cudalab.tuning.interchange import write_header  # noqa: PLC0415

        point = self.best_params
        if not point:
            raise UsageError("--header: no configuration passed: no winner to write")
        kinds = {d["name"]: d["kind"] for d in self.space.get("dims", [])}
        winner = next(m for m in self.trials if point_key(m.point) == self.winner)
        race = self.race.samples.get(self.winner) if self.race is not None else None
        facts = {"campaign": self.name, "storage": self.url, "family": self.family, "variant": self.variant,
                 "gpu": winner.attrs.get("gpu", ""), "median_ms": float(np.median(race)) if race else winner.attrs.get("median_ms"),
                 "raced": bool(race), "command": self.command, "when": time.strftime("%Y-%m-%d %H:%M")}
        defines = {k: v for k, v in point.items() if kinds.get(k, "define") == "define"}
        return str(write_header(path, defines, point.get("block"), facts))

    @property
    def unraced(self) -> bool:
        """An interrupted campaign whose race did not finish (or never ran): its best trial is not a winner."""
        return self.incomplete and not (self.race is not None and self.race.winner)

    def speedup(self, key: str) -> float | None:
        """The default configuration's median over ``key``'s, from the race (None: not both raced)."""
        if self.race is None:
            return None
        a, b = self.race.samples.get(self.default_key), self.race.samples.get(key)
        return float(np.median(a) / np.median(b)) if a and b else None

    def to_pandas(self) -> Any:
        """One row per measured trial: its parameters, status, objectives and figures (``pct``: the table's %
        column, :meth:`pct`; ``rate``: items per second in 1e9 for an item-rate family)."""
        import pandas as pd  # noqa: PLC0415

        rows = []
        for m in self.trials:
            row = {"trial": m.number, **m.point, "status": m.status, "reason": m.reason}
            for i, o in enumerate(self.objectives):
                row[o] = m.values[i] if m.values is not None else None
            row.update({k: m.attrs.get(k) for k in ("median_ms", "iqr_ms", "gflops", "gbs", "rate", "energy_mj")})
            row["pct"] = self.pct(m)
            rows.append(row)
        return pd.DataFrame(rows)

    def to_dict(self) -> dict[str, Any]:
        """The record (a run record with a ``tune`` section) for ``--json``."""
        out = self.record.to_dict() if self.record is not None else {}
        r = self.race
        out["tune"] = {
            "family": self.family, "variant": self.variant, "campaign": self.name, "storage": self.url,
            # an interrupted campaign's best trial was not raced: it is no winner, only the best trial
            "objectives": list(self.objectives), "winner": "" if self.unraced else self.winner,
            "best_trial": self.winner, "default": self.default_key,
            "command": self.command,
            "space": self.space, "incomplete": self.incomplete, "gpu_busy_pct": self.gpu_busy_pct,
            "time": self.time_account,
            # the library row the trials' % is over (its row is in the record's points too, where it ran)
            "reference": self.reference.to_dict() if self.reference is not None else None,
            "trials": [{"number": m.number, "point": m.point, "status": m.status, "reason": m.reason,
                        "values": list(m.values) if m.values is not None else None} for m in self.trials],
            "race": None if r is None else {
                "rounds": r.rounds, "winner": r.winner, "ties": r.ties, "dropped": r.dropped,
                "verdicts": {k: {"verdict": v.verdict, "ratio": v.ratio, "low": v.low, "high": v.high, "note": v.note}
                             for k, v in r.verdicts.items()}},
            "pareto": [m.point for m in self.pareto],
        }
        return out

    @classmethod
    def build(cls, p: Any, study: Any, fruns: dict[str, Any], race: Any, device: dict[str, Any],
              incomplete: bool, exit_code: int, default_key: str, gpu_busy_pct: float | None = None,
              time_account: dict[str, float] | None = None, reference: Any = None) -> "TuneResult":
        """The result of plan ``p`` from its study and what this process ran."""
        trials = tuple(C.measured(study))
        pareto: tuple[C.Measured, ...] = ()
        if len(p.opts.objectives) > 1:
            front = {t.number for t in study.best_trials}
            pareto = tuple(m for m in trials if m.number in front)
        best = race.winner if race is not None and race.winner else ""
        if not best:
            ok = sorted((m for m in trials if m.values is not None), key=lambda m: m.values)
            best = point_key(ok[0].point) if ok else ""
        point = next((m.point for m in trials if point_key(m.point) == best), None)
        command = rerun_command(p, point) if point is not None else ""
        record = (_record(p, race, device, incomplete, command, reference) if race is not None and race.runs
                  else None)
        return cls(p.spec.name, p.variant.name, p.name, p.url, tuple(p.opts.objectives), trials, race, pareto,
                   default_key, record, command, incomplete, exit_code, p.space.describe(), gpu_busy_pct,
                   dict(time_account or {}), reference)


def rerun_command(p: Any, point: Mapping[str, str]) -> str:
    """The ordinary ``cudalab`` run of one configuration (the problem and protocol of the race)."""
    own = getattr(p, "add", None)  # an --add kernel: its tuned defines go in its --add text, not on -D
    argv = ["cudalab", p.spec.name] + (["--variant", p.variant.name] if own is None else [])
    for flag, value in (("--n", p.base.n), ("--shape", p.base.shape), ("--dtype", p.base.dtype)):
        if value:
            argv += [flag, str(value)]
    for d in p.space.dims:
        v = point[d.name]
        if d.kind == "define" and own is not None:
            continue
        argv += ["--block", v] if d.kind == "block" else [f"--{d.name}", v] if d.kind == "option" else ["-D", f"{d.name}={v}"]
    if own is not None:
        from cudalab.tuning.own import rerun_add  # noqa: PLC0415

        argv += ["--add", rerun_add(own, point, p.space.dims)]
    return shlex.join(argv)


def _record(p: Any, race: Any, device: dict[str, Any], incomplete: bool, command: str,
            reference: Any = None) -> RunRecord:
    """The raced configurations as a run record: one point each, its rows from its last round with the
    samples of every round (``compare`` judges those); then the library row's point where the campaign ran
    one (the base request: no block, no -D), its rate the 100% of every raced row's % of ref, as in a run."""
    from cudalab.records import machine  # noqa: PLC0415
    from cudalab.report import pct_column  # noqa: PLC0415
    from cudalab.session import sweep  # noqa: PLC0415

    lib = sweep.point_of(reference.run, p.spec) if reference is not None and reference.run is not None else None
    points = []
    for key, fr in race.runs.items():
        pt = sweep.point_of(fr, p.spec)
        samples = race.samples.get(key) or []
        rows = tuple(replace(r, stats=summarize(samples)) if r.variant == p.variant.name and samples else r
                     for r in pt.results)
        if lib is not None:  # % of the library row measured beside the trials (pct_column's rule, its row once)
            rows = tuple(pct_column(rows + lib.results, p.spec.metric))[:len(rows)]
        points.append(replace(pt, results=rows))
    if lib is not None:
        points.append(lib)
    return RunRecord(cudalab=__version__, command=tuple(shlex.split(command)),
                     started=time.time(), device=device, points=tuple(points), incomplete=incomplete,
                     machine=machine.facts())
