"""A tuning campaign from start to end: check the input, open the study, run trials, race, return.

The order is the bad-input contract's: everything that can be refused (names, values, constraints,
an empty space, the budget, the storage, another campaign's file) is refused before a GPU worker
starts. A trial asks the strategy for a point, refuses on the CPU what the constraints or the launch
rules refuse (recorded, no build), and runs the rest as ordinary run points (:mod:`cudalab.tuning.runs`).

The first trial of every strategy is the family's own configuration when it is a valid point of the space
(:class:`~cudalab.tuning.propose.Proposer`): a tuner must not name a winner slower than what the user runs,
and a default it never sampled was only raced beside the best, never able to win. Measured as a trial it can
win the race; a default outside the space is still raced beside the best (the "vs default" column), not winning.
"""

from __future__ import annotations

import contextlib
import sys
from collections import deque
from dataclasses import replace
from typing import Any, Callable, Iterator

from cudalab.bench import Protocol
from cudalab.errors import ClusterLost, LaunchConfigError, UsageError
from cudalab.instruments.busy import BusyMeter
from cudalab.records import noise
from cudalab.records.results import PASSED, SKIPPED
from cudalab.tuning import campaign as C
from cudalab.tuning.account import TimeAccount
from cudalab.tuning import race as R
from cudalab.tuning import reference
from cudalab.tuning import strategy as S
from cudalab.tuning.loops import WALK_AHEAD, TrialLoops
from cudalab.tuning.prepare import CampaignPlan, first_requests, plan, trial_request  # noqa: F401  (plan: the command's)
from cudalab.tuning.result import TuneResult, point_key
from cudalab.tuning.runs import Runs, runs_for
from cudalab.tuning.space import BLOCK, Space
from cudalab.tuning.propose import WALKS, Proposer
from cudalab.tuning.spaces import default_point
from cudalab.tuning.trialwrite import add_trials

__all__ = ["CampaignPlan", "plan", "run_campaign"]

#: The interpreter's thread switch interval while a campaign's trials run (seconds; Python's default is 0.005).
SWITCH_S = 0.0005
#: Asks in a row that bring nothing new (a repeat, a refused point) before the strategy is deemed done.
STALE_ASKS = 500


class _Campaign(TrialLoops):
    """The running state of one campaign (its study, its trials, its GPU session)."""

    def __init__(self, p: CampaignPlan, study: Any, runs: Runs, on_event: Callable[[str, dict[str, Any]], None],
                 meter: BusyMeter | None = None):
        self.p, self.study, self.runs, self.emit, self.meter = p, study, runs, on_event, meter
        self.optuna = S.quiet_optuna()
        self.dists = S.distributions(p.space)
        self.prop = proposer(p)
        self.redo: deque = deque()  # parameters of interrupted trials (see _unfinished)
        self.opened = False  # the default configuration was offered to a model-based strategy (see ask)
        self.asked: dict[int, dict[str, str]] = {}  # trial number -> the proposal its repaired point replaced
        self.known: dict[str, C.Measured] = {}
        self.fruns: dict[str, Any] = {}
        for m in C.measured(study):
            if m.status != "interrupted":
                self.known[point_key(m.point)] = m
        self.resumed = self.evaluated()  # measured by an earlier run of the campaign (not in this one's account)
        self.lost: ClusterLost | None = None
        self.account = TimeAccount()  # its start is the campaign's (the deadline and the ETA count from it)
        # grid and random walk the valid points themselves: their trials are written once, when measured
        self.walking = self.prop.walk is not None
        self.added = len(study.get_trials(deepcopy=False)) if self.walking else 0  # the next added trial's number
        self.held: list[Any] | None = None  # a walk's finished trials not yet written (see writes_held)
        # the library row and its request, which the loop runs where the GPU would wait for builds (TrialLoops.loop);
        # what it measured there (None: it did not run it, measured after the trials: reference.measure)
        self.library = reference.planned(p, runs)
        self.ref: reference.Reference | None = None

    def evaluated(self) -> int:
        return sum(1 for m in self.known.values() if m.status not in ("refused", "skipped"))

    def best(self) -> C.Measured | None:
        ok = [m for m in self.known.values() if m.values is not None]
        return min(ok, key=lambda m: m.values) if ok else None

    def _record(self, trial: Any, point: dict[str, str], status: str, reason: str, values: Any,
                attrs: dict[str, Any]) -> None:
        # One attribute, one SQLite transaction (ten of their own cost ~20 ms a trial on the driver's clock).
        asked = self.asked.pop(trial.number, None) if trial is not None else None
        fact = {**attrs, **({"asked": asked} if asked else {}), "point": point, "status": status,
                "reason": reason[:500], "owner": C.owner()}
        if trial is None:  # a walk's trial: written once, finished (no ask: the walk chose it, no sampler needed)
            T = self.optuna.trial
            made = T.create_trial(params=S.encode(self.p.space, point), distributions=self.dists,
                                  values=list(values) if values is not None else None, user_attrs={C.ATTR: fact},
                                  state=T.TrialState.COMPLETE if values is not None else T.TrialState.FAIL)
            if self.held is not None:  # written with the others of its task (see writes_held)
                self.held.append(made)
            else:
                add_trials(self.study, [made])
            number, self.added = self.added, self.added + 1
        else:
            trial.set_user_attr(C.ATTR, fact)
            if values is None:
                self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            else:
                self.study.tell(trial, values)
            number = trial.number
        self.known[point_key(point)] = C.Measured(number, point, tuple(values) if values is not None else None,
                                                  status, reason, attrs)

    @contextlib.contextmanager
    def writes_held(self) -> Iterator[None]:
        """A walk's trials recorded inside are written together as it ends, in one transaction (a task's
        trials: :func:`~cudalab.tuning.trialwrite.add_trials`); report them after it."""
        self.held = []
        try:
            yield
        finally:
            held, self.held = self.held, None
            add_trials(self.study, held)

    def ask(self, pending: deque) -> bool:
        """Ask for the next point worth running and queue it (``pending``: the trials asked and not yet recorded,
        those on the GPUs too); False when the strategy has nothing new."""
        in_flight = {point_key(pt) for _, pt, _ in pending}
        for _ in range(STALE_ASKS):
            if len(self.known) + len(in_flight) >= self.prop.size:
                return False
            if self.walking:  # grid, random: the walk's next valid point, no ask (its trial is written when done)
                queued = len(pending)
                if not self._queue_walk(pending, in_flight):
                    return False
                if len(pending) > queued:
                    return True
                continue  # refused on the CPU (recorded) or measured already: the next point
            first = None
            if not self.redo and not self.opened:  # once: after it, the default is measured or in flight
                self.opened = True
                first = self.prop.opening(set(self.known) | in_flight)
            if self.redo:  # a killed campaign's trials in flight (or a repeat's neighbour): asked first
                self.study.enqueue_trial(self.redo.popleft())
            elif first is not None:  # the default configuration: a model-based strategy's first trial
                self.study.enqueue_trial(S.encode(self.p.space, first))
            elif self.prop.walk is not None:  # grid, random: the next valid point of the walk
                nxt = self.prop.next_walk(set(self.known) | in_flight)
                if nxt is None:
                    return False
                self.study.enqueue_trial(S.encode(self.p.space, nxt))
            trial = self.study.ask(self.dists)
            asked = S.decode(self.p.space, trial.params)
            point = self.prop.repair(asked)
            # a proposal that broke a constraint runs as its nearest valid point; the trial keeps what was asked
            extra = {} if point is asked else {"asked": asked}
            key = point_key(point)
            if key in self.known or key in in_flight:  # asked again: the same answer, at no cost
                old = self.known.get(key)
                trial.set_user_attr(C.ATTR, {"point": point, "repeat_of": old.number if old else -1, **extra})
                if old is not None and old.values is not None:
                    self.study.tell(trial, list(old.values))
                else:
                    self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
                if self.prop.walk is None and not self.redo:  # the nearest point not yet measured runs next
                    nxt = self.prop.nearest_unseen(point, set(self.known) | in_flight)
                    if nxt is not None:
                        self.redo.append(S.encode(self.p.space, nxt))
                continue
            # A killed campaign's trial says its point and who measured it (one write).
            trial.set_user_attr(C.ATTR, {"point": point, "owner": C.owner(), **extra})
            if extra:
                self.asked[trial.number] = asked  # its record keeps it too (one write, no read back)
            why = self.p.space.allows(point)
            if why:
                self._record(trial, point, "refused", f"constraint {why}", None, {})
                continue
            req = trial_request(self.p, point)
            try:
                self.runs.plan(req)  # its one plan: run_one runs it as planned
            except (UsageError, LaunchConfigError) as exc:
                self._record(trial, point, "refused", str(exc), None, {})
                continue
            pending.append((trial, point, req))
            self.runs.prebuild(req)  # its kernels built ahead: its worker finds them in the cache when its turn comes
            return True
        return False

    def _queue_walk(self, pending: deque, in_flight: set[str]) -> bool:
        """Queue the walk's next point (interrupted trials first) unless the constraints or the launch rules refuse
        it (recorded at once, no build); False when the walk is spent."""
        if self.redo:
            point = S.decode(self.p.space, self.redo.popleft())
            if point_key(point) in self.known or point_key(point) in in_flight:
                return True
        else:
            point = self.prop.next_walk(set(self.known) | in_flight)
            if point is None:
                return False
        why = self.p.space.allows(point)
        if why:
            self._record(None, point, "refused", f"constraint {why}", None, {})
            return True
        req = trial_request(self.p, point)
        try:
            self.runs.plan(req)
        except (UsageError, LaunchConfigError) as exc:
            self._record(None, point, "refused", str(exc), None, {})
            return True
        pending.append((None, point, req))
        self.runs.prebuild(req)
        return True

    def finish(self, trial: Any, point: dict[str, str], fr: Any) -> bool:
        """Record one trial's point (None: it did not run); returns True when it did not."""
        row = next((r for r in (fr.results if fr else ()) if r.variant == self.p.variant.name), None)
        if row is None:
            self._record(trial, point, "interrupted", "the campaign was interrupted while it ran", None, {})
            return True
        key = point_key(point)
        self.fruns[key] = fr
        attrs: dict[str, Any] = {"gpu": fr.gpu_name or str((self.runs.info() or {}).get("name", ""))}
        if fr.host:  # a cluster's: which host and GPU ran it
            attrs.update(host=fr.host, device=fr.gpu)
        if row.stats is not None:
            attrs.update(median_ms=row.stats.median, iqr_ms=row.stats.iqr, samples=row.stats.n)
        attrs.update({k: v for k, v in (("gflops", row.gflops), ("gbs", row.gbs), ("pct", row.pct_roofline),
                                        ("rate", row.extra.get("rate"))) if v is not None})
        energy = row.extra.get("energy_mj_per_launch")
        if energy is not None:
            attrs["energy_mj"] = float(energy)
        if row.status == SKIPPED:  # the device's own limits refused it: no build was made
            self._record(trial, point, "refused", row.reason, None, attrs)
        elif row.status != PASSED or row.stats is None:
            self._record(trial, point, row.status.value, row.reason or row.status.value, None, attrs)
        else:
            vals = []
            for o in self.p.opts.objectives:
                vals.append(row.stats.median if o == "time" else energy)
            if any(x is None for x in vals):
                self._record(trial, point, "failed", "no energy reading (--objective energy needs NVML)", None, attrs)
            else:
                self._record(trial, point, "passed", "", vals, attrs)
        return False


def proposer(p: CampaignPlan) -> Proposer:
    """The campaign's walk or repair over its valid points, the default configuration first
    (:mod:`cudalab.tuning.propose`)."""
    return Proposer(p.space, p.strategy, p.opts.seed, p.valid_points, first=_default_point(p))


def run_campaign(p: CampaignPlan, on_event: Callable[[str, dict[str, Any]], None] | None = None,
                 runs: Runs | None = None) -> TuneResult:
    """Open the study, run the trials, race the best, and return the result (the study holds every trial).

    Raises:
        UsageError: the storage cannot be opened or holds another campaign (before any GPU work).
        WorkerError: no worker could open the GPU.
    """
    from cudalab.execute.signals import interrupts  # noqa: PLC0415

    emit = on_event or (lambda what, data: None)
    opts = p.opts
    walks = p.strategy in WALKS and (p.valid_points is not None or p.strategy == "grid")
    # A walk (grid, random over the valid points) enqueues each trial's point: the sampler is never consulted.
    sampler = S.sampler("random" if walks else p.strategy, opts.seed, p.space, len(opts.objectives))
    runs = runs or runs_for(opts)  # the engine, chosen here once (a bad --cluster or --devices: refused now)
    C.check_campaign(p.url, p.name, p.meta)  # reading only: a file it must not write is refused before any GPU work
    runs.start()  # a cluster is checked here: before the campaign's first line
    try:  # the campaign's file is created (or changed) only once a GPU is there to run its first trial
        # the first trials' kernels built while the GPUs open (their turn finds them built: Executor.prebuild)
        for req in first_requests(p, proposer(p), WALK_AHEAD * runs.executor.ahead()):  # a walk's as its loop asks
            runs.prebuild(req)
        runs.ready()
        study = C.open_campaign(p.url, p.name, p.meta, ["minimize"] * len(opts.objectives), sampler)
        C.reap_interrupted(study)
        redo = _unfinished(study, p.space)
    except BaseException:
        runs.kill()
        raise
    if study.study_name != p.name:  # the kernel changed since the campaign of this name: a fresh one beside it
        emit("warning", {"text": f"{p.variant.name} is built from another source or defines than campaign {p.name} "
                                 f"measured: a fresh campaign {study.study_name} in the same file"})
        p = replace(p, name=study.study_name)
    emit("start", {"name": p.name, "url": p.url, "size": p.space.size(),
                   "valid": p.valid if p.valid_points is not None else None, "budget": p.budget,
                   "strategy": p.strategy, "resumed": len(C.measured(study)), "redo": len(redo)})
    where = runs.executor.describe()
    if where:  # a cluster's GPUs and hosts ('' for this host's GPU)
        emit("cluster", {"text": where})
    code, busy, ref = 0, None, None
    # GPU busy % for the live line and the result, where the GPU can be read from here (a cluster's cannot)
    meter: BusyMeter | None = runs.executor.busy_meter()
    try:
        with interrupts() as caught:
            camp = _Campaign(p, study, runs, emit, meter)
            camp.redo.extend(redo)
            switch = sys.getswitchinterval()
            # The trial's thread hands each worker event on while this thread runs the study's SQL: at the
            # default 5 ms a thread waiting for the GIL waited up to that long for every event of a trial.
            sys.setswitchinterval(min(switch, SWITCH_S))
            try:
                interrupted = camp.loop()
            finally:
                sys.setswitchinterval(switch)

            def going() -> bool:  # after an interrupt its workers are gone: nothing more is measured nor raced
                return camp.lost is None and not interrupted and caught.signum is None

            try:  # the "% of" column's library row (flops, rate), once: after the trials where the loop did not run it
                ref = camp.ref or (reference.measure(p, runs, camp.account) if going() else None)
                camp.account.in_workers = runs.executor.in_workers()  # the library row is GPU work too
            except ClusterLost as exc:
                ref, camp.lost = None, exc
            busy = meter.percent if meter is not None else None
            if meter is not None:
                meter.stop()
            race_result, default_key = None, point_key(_default_point(p))
            if len(opts.objectives) == 1 and opts.race > 0 and going():
                try:
                    with camp.account.timed("race"):
                        race_result = _race(camp, emit)
                except ClusterLost as exc:
                    camp.lost = exc
        if camp.lost is not None:
            emit("warning", {"text": str(camp.lost)})
            code = camp.lost.exit_code
        elif interrupted or caught.signum is not None or (race_result is not None and race_result.interrupted):
            code = 128 + (caught.signum or 2)
    except BaseException:
        C.settle(study)
        raise
    finally:
        if meter is not None:
            meter.stop()
        if code:
            runs.kill()
        else:
            runs.close()
    try:
        return TuneResult.build(p, study, camp.fruns, race_result, runs.info(), incomplete=bool(code), exit_code=code,
                                default_key=default_key, gpu_busy_pct=busy, time_account=camp.account.to_dict(),
                                reference=ref or reference.unmeasured(p))
    finally:
        C.settle(study)  # the file as SQLite leaves it by default (the campaign wrote it in WAL mode)


def _default_point(p: CampaignPlan) -> dict[str, str]:
    """The family's own configuration, as a point (its block, options and defines' defaults where they are values)."""
    return default_point(p.spec, p.fam, p.variant, p.space, dict(p.base.options))


def _unfinished(study: Any, space: Space) -> list[dict[str, Any]]:
    """Parameters of interrupted trials whose point was never measured since: asked again first."""
    done, redo = set(), {}
    for m in C.measured(study):
        if m.status == "interrupted":
            redo.setdefault(point_key(m.point), m.point)
        else:
            done.add(point_key(m.point))
    return [S.encode(space, pt) for k, pt in redo.items() if k not in done]


def _race(camp: _Campaign, emit: Callable[[str, dict[str, Any]], None]) -> R.RaceResult | None:
    """Race the best K measured configurations, and measure the default one beside them when it is not among
    them (outside the space, or a trial not in the best K): the speedup's baseline, which never wins."""
    p = camp.p
    ok = sorted((m for m in camp.known.values() if m.values is not None), key=lambda m: m.values)
    if not ok:
        return None
    top = [R.Contender(point_key(m.point), m.point, replace(trial_request(p, m.point), protocol=_race_protocol(p)))
           for m in ok[:p.opts.race]]
    extra = []
    dflt = _default_point(p)
    if all(d.kind == BLOCK or dflt[d.name] for d in p.space.dims) and not p.space.allows(dflt):
        extra = [R.Contender(point_key(dflt), dflt, replace(trial_request(p, dflt), protocol=_race_protocol(p)))]
    if len(top) + len(extra) < 2:
        return None
    emit("race", {"contenders": [c.key for c in top]})
    tolerance, said = p.opts.tolerance, ""
    if tolerance is None:  # the GPU's calibrated floor where there is one (cudalab calibrate)
        floor = noise.load(str((camp.runs.info() or {}).get("name", "")))
        tolerance, said = (floor.min_effect, floor.line()) if floor else (RACE_TOLERANCE, "")
    got = R.race(lambda reqs: camp.runs.run(reqs), top, p.variant.name, tolerance, p.opts.max_rounds,
                 extra=extra, on_round=lambda r, res: emit("round", {"round": r, "result": res}))
    return replace(got, calibrated=said)


#: Racing's tie tolerance on a GPU never calibrated.
RACE_TOLERANCE = 0.01


def _race_protocol(p: CampaignPlan) -> Protocol:
    return replace(p.base.protocol, budget_s=p.opts.race_budget, energy_s=0.0)
