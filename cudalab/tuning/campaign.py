"""A campaign's storage: an Optuna study (SQLite by default), what it records, and how it resumes.

A campaign file holds one study named after the campaign. The study keeps the family, the variant,
the space and a fingerprint of them and of the problem and objectives: the same command continues
it, anything else is refused before a run starts. Every trial's outcome is written the moment it is
known (Optuna's RDB storage commits each write), so a campaign killed outright loses only the trials
it was measuring; on resume those are marked failed (``interrupted``) and asked again first.

What cudalab knows of a trial is one JSON user attribute, :data:`ATTR` (its point, status, reason, figures and
the process measuring it): one write per trial, where each attribute of its own was an SQLite transaction
(about ten per trial). Campaigns written before keep one attribute per fact (``point``, ``status``...,
the owner a system attribute); :func:`facts` reads both, so they keep resuming.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from cudalab.errors import UsageError
from cudalab.tuning.strategy import quiet_optuna

__all__ = ["default_storage", "open_campaign", "Measured", "measured", "ATTR", "OWNER", "facts", "reap_interrupted"]

#: The trial user attribute holding what cudalab knows of a trial (a JSON object).
ATTR = "cudalab"
#: The process measuring a trial (host:pid; stale when that process is gone): a key of :data:`ATTR`, and
#: before that a trial system attribute of this name.
OWNER = "cudalab_owner"
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def facts(t: Any) -> dict[str, Any]:
    """What cudalab recorded of trial ``t`` (a FrozenTrial): its :data:`ATTR` object, over the separate
    attributes an older campaign wrote; ``point`` a dict, ``owner`` the measuring process ('' when none)."""
    old = {k: v for k, v in t.user_attrs.items() if k != ATTR}
    if isinstance(old.get("point"), str):
        old["point"] = json.loads(old["point"])
    out = {**old, **(t.user_attrs.get(ATTR) or {})}
    out.setdefault("owner", t.system_attrs.get(OWNER, ""))
    return out


def default_storage(name: str, folder: Path | None = None) -> tuple[str, Path]:
    """The SQLite URL and file of campaign ``name`` in ``folder`` (default: the current one)."""
    path = (folder or Path.cwd()) / f"{_NAME.sub('_', name)}.tune.db"
    return f"sqlite:///{path}", path


def _storage(url: str) -> Any:
    """Open ``url`` as Optuna RDB storage.

    Raises:
        UsageError: it cannot be opened (bad URL, missing driver, not a database, no such folder).
    """
    optuna = quiet_optuna()
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        if not path.parent.is_dir():
            raise UsageError(f"--storage {url}: folder {path.parent} does not exist")
        if path.exists() and path.stat().st_size and path.read_bytes()[:16] != b"SQLite format 3\x00":
            raise UsageError(f"--storage {url}: {path} is not an SQLite campaign file (left as it is)")
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}}
                                          if url.startswith("sqlite") else {})
    except Exception as exc:  # SQLAlchemy's and the drivers' errors are many: each becomes one line
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"--storage {url}: cannot open it ({why[:200]})") from None


def open_campaign(url: str, name: str, meta: Mapping[str, Any], directions: list[str], sampler: Any) -> Any:
    """Create or continue the study ``name`` in ``url``.

    Args:
        meta: what the campaign is (``family``, ``variant``, ``space``, ``fingerprint``...): stored
            with a new study, compared with an old one.
        directions: ``minimize`` per objective.
        sampler: the strategy.

    Raises:
        UsageError: the storage cannot be opened, or holds this campaign (or, in a campaign file, another
            campaign) for another family, variant, space, problem or objectives.
    """
    optuna = quiet_optuna()
    storage = _storage(url)
    studies = optuna.get_all_study_summaries(storage, include_best_trial=False)
    mine = [s for s in studies if s.study_name == name]
    built = meta.get("build")
    if mine and built and mine[0].user_attrs.get("build") not in (None, built):
        # the same space, but the kernel (its source, its fixed defines) changed since: its trials measured
        # another build, so a fresh campaign beside it, never one that inherits the old build's failures
        name = f"{name}@{built[:8]}"
        mine = [s for s in studies if s.study_name == name]
    others = [s for s in studies if s.study_name != name] if url.startswith("sqlite") else []
    for s in mine + others:
        old = s.user_attrs
        if old.get("fingerprint") != meta["fingerprint"]:
            what = f"{old.get('family', '?')}/{old.get('variant', '?')}"
            raise UsageError(f"campaign {s.study_name!r} in {url} is {what} with another space, problem or objective "
                             f"(fingerprint {old.get('fingerprint', 'none')}, this run's {meta['fingerprint']}): "
                             "give another --name or --storage")
    study = optuna.create_study(storage=storage, study_name=name, sampler=sampler, load_if_exists=True,
                                directions=directions)
    if not mine:
        for k, v in meta.items():
            study.set_user_attr(k, v)
    return study


def owner() -> str:
    """This process, as a trial's owner."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _alive(who: str) -> bool:
    host, _, pid = who.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another host's trial: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_interrupted(study: Any) -> int:
    """Mark the trials a killed campaign left running as failed (``interrupted``: asked again first);
    returns how many."""
    optuna = quiet_optuna()
    again = 0
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        got = facts(t)
        if got["owner"] and _alive(got["owner"]):
            continue
        new = {k: v for k, v in got.items() if k != "owner"}
        new.update(status="interrupted", reason="the campaign was killed while it ran")
        study._storage.set_trial_user_attr(t._trial_id, ATTR, new)
        study.tell(t.number, state=optuna.trial.TrialState.FAIL)
        again += 1
    return again


@dataclass(frozen=True)
class Measured:
    """One finished trial as the campaign (and a replay) sees it.

    Attributes:
        number: Optuna's trial number.
        point: name -> value.
        values: the objectives (None: infeasible).
        status: passed / incorrect / failed / timeout / skipped / refused / interrupted.
        reason: why it is infeasible.
        attrs: what else was recorded (median, IQR, rate...).
    """

    number: int
    point: dict[str, str]
    values: tuple[float, ...] | None
    status: str
    reason: str
    attrs: dict[str, Any]


def measured(study: Any) -> list[Measured]:
    """The study's finished trials (complete or failed; repeats left out), in order."""
    optuna = quiet_optuna()
    out = []
    for t in study.get_trials(deepcopy=False):
        if t.state not in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL):
            continue
        got = facts(t)
        if "repeat_of" in got or "point" not in got:
            continue
        vals = tuple(t.values) if t.state == optuna.trial.TrialState.COMPLETE and t.values else None
        out.append(Measured(t.number, dict(got["point"]), vals, str(got.get("status", "")), str(got.get("reason", "")),
                            got))
    return out
