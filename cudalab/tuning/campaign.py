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

import contextlib
import json
import os
import re
import socket
import sqlite3
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from cudalab.errors import UsageError
from cudalab.tuning.strategy import quiet_optuna

__all__ = ["default_storage", "check_campaign", "check_file", "open_campaign", "Measured", "measured", "ATTR", "OWNER", "facts", "reap_interrupted",
           "settle"]

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


#: The tables every Optuna RDB storage has: an SQLite file without them is another program's database.
_OPTUNA_TABLES = frozenset({"studies", "trials", "version_info", "study_user_attributes"})
#: How long a campaign created by another tune this instant may lack its attributes (they follow its creation).
_NEW_STUDY_WAIT_S = 10.0


def _sqlite_path(url: str) -> Path | None:
    """The file of an ``sqlite:///FILE`` URL (None: another database, or SQLite in memory)."""
    if not url.startswith("sqlite:///"):
        return None
    rest = url[len("sqlite:///"):].split("?", 1)[0]
    return None if rest in ("", ":memory:") else Path(rest)


def check_file(url: str, what: str = "--storage") -> Path | None:
    """Refuse, reading only, a campaign file cudalab must not write: a link (dangling or not), something not
    a regular file, a file that is not SQLite, or an SQLite database that is not an Optuna campaign (another
    program's). A missing or empty file is a new campaign. Returns the file (None: not an SQLite file URL).

    Raises:
        UsageError: one of the above, or its folder does not exist; the file is left as it is.
    """
    path = _sqlite_path(url)
    if path is None:
        return None
    if path.is_symlink():
        raise UsageError(f"{what} {url}: {path} is a symbolic link; a campaign is never written or read through a "
                         "link (give the file itself)")
    if not path.parent.is_dir():
        raise UsageError(f"{what} {url}: folder {path.parent} does not exist")
    if not path.exists():
        return path
    if not path.is_file():
        raise UsageError(f"{what} {url}: {path} is not a regular file (left as it is)")
    if path.stat().st_size == 0:
        return path
    with open(path, "rb") as f:
        head = f.read(16)
    if head != b"SQLite format 3\x00":
        raise UsageError(f"{what} {url}: {path} is not an SQLite campaign file (left as it is)")
    try:
        with contextlib.closing(_read_only(path)) as con:
            tables = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
    except sqlite3.Error as exc:
        raise UsageError(f"{what} {url}: cannot read {path} ({str(exc)[:200]}; left as it is)") from None
    if not _OPTUNA_TABLES <= tables:
        raise UsageError(f"{what} {url}: {path} is an SQLite database but not a cudalab campaign (left as it is)")
    return path


def _read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened by SQLite read-only (it never creates nor changes the file)."""
    return sqlite3.connect(f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro", uri=True, timeout=30,
                           check_same_thread=False)


def _storage(url: str, read_only: bool = False) -> Any:
    """Open ``url`` as Optuna RDB storage (``read_only``: an SQLite file opened so nothing can be written).

    Raises:
        UsageError: it cannot be opened (bad URL, missing driver, not a campaign, no such folder), or
            ``read_only`` and there is no campaign file.
    """
    optuna = quiet_optuna()
    path = check_file(url, "--replay" if read_only else "--storage")
    kwargs: dict[str, Any] = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {}
    wal: dict[str, Any] = {"on": True, "path": path}  # :func:`settle` turns it off: connections made after it leave the file as they found it
    if path is not None and not read_only:
        kwargs = {"creator": lambda: _writer(path, wal["on"])}
    if read_only and path is not None:
        if not path.is_file() or not path.stat().st_size:
            raise UsageError(f"--replay {url}: {path} holds no campaign")
        kwargs = {"creator": lambda: _read_only(path)}
    for attempt in range(3):  # two tunes creating one new file's tables at once: the loser tries again
        try:
            storage = optuna.storages.RDBStorage(url, engine_kwargs=kwargs, skip_table_creation=read_only)
            storage.cudalab_wal = wal
            return storage
        except Exception as exc:  # SQLAlchemy's and the drivers' errors are many: each becomes one line
            if attempt < 2 and "already exists" in str(exc):
                time.sleep(0.2)
                continue
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UsageError(f"--storage {url}: cannot open it ({why[:200]})") from None
    raise AssertionError("unreachable")


def _writer(path: Path, wal: bool) -> sqlite3.Connection:
    """A writing connection to a campaign file: write-ahead log, synced at checkpoints (``wal``), else as SQLite's
    default.

    A campaign commits several times a trial (Optuna's ask, its parameters, the trial's facts, the tell); with
    the default rollback journal each commit waits for its fsyncs (2-7 ms measured: most of a cluster trial's
    parent cost). In WAL mode with ``synchronous=NORMAL`` a commit is an append: a killed campaign still keeps
    every committed trial, and a lost power keeps a consistent file (its last trials may roll back) (SQLite's
    documentation, "Write-Ahead Logging"). :func:`settle` puts the rollback journal back when the campaign ends.
    """
    con = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
    if wal:
        con.execute("pragma journal_mode=WAL")
        con.execute("pragma synchronous=NORMAL")
    return con


def settle(study: Any) -> None:
    """Close the campaign's connections and leave its file in SQLite's default journal mode, without the
    ``-wal`` and ``-shm`` files beside it (another program, or a read-only opening, would otherwise find or
    leave them). Where another process still has the file open it stays in WAL mode until that one leaves;
    never raises."""
    storage = getattr(study, "_storage", None)
    storage = getattr(storage, "_backend", storage)  # Optuna's cache in front of its RDB storage
    wal, engine = getattr(storage, "cudalab_wal", None), getattr(storage, "engine", None)
    if wal is None or engine is None or not wal["on"]:
        return
    wal["on"] = False
    engine.dispose()
    if wal["path"] is None:
        return
    with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(str(wal["path"]), timeout=1)) as con:
        con.execute("pragma journal_mode=DELETE")


def check_campaign(url: str, name: str, meta: Mapping[str, Any]) -> None:
    """Refuse, reading only and before any GPU work, a storage this campaign must not write: a file that is not
    a campaign (:func:`check_file`), or one holding this campaign (or another) for another space.

    Raises:
        UsageError: as :func:`open_campaign`.
    """
    path = check_file(url)
    if path is None:  # another database: its URL and driver now, its tables when the first trial runs
        try:
            import sqlalchemy  # noqa: PLC0415  (Optuna's own dependency)

            sqlalchemy.engine.make_url(url).get_dialect()
        except Exception as exc:  # a bad URL, an unknown database, a missing driver: one line
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UsageError(f"--storage {url}: cannot open it ({why[:200]})") from None
        return
    if not path.exists() or not path.stat().st_size:
        return  # a new file: created when the first trial is about to run
    _refuse_others(url, name, meta, _summaries(_storage(url, read_only=True)), wait=False, checking=True)


def _summaries(storage: Any) -> list[Any]:
    return quiet_optuna().get_all_study_summaries(storage, include_best_trial=False)


def _refuse_others(url: str, name: str, meta: Mapping[str, Any], studies: list[Any], wait: bool,
                   checking: bool = False) -> None:
    """Refuse a storage holding this campaign (or, in a campaign file, another) for another fingerprint.

    A study without a fingerprint is one another tune is creating this instant (its attributes follow its
    creation: Optuna has no atomic form; :func:`write_meta` writes the fingerprint last) or one cudalab did not
    write; with ``wait`` the caller looks again (:func:`open_campaign`), so two tunes started at once on a new
    file both run it; ``checking`` (:func:`check_campaign`, before any GPU work) leaves this campaign's to then.
    """
    sqlite = url.startswith("sqlite")
    for s in studies:
        if s.study_name != name and not sqlite:
            continue
        old = s.user_attrs
        if "fingerprint" not in old:  # being created by another tune (its fingerprint is written last), or no tune's
            if wait:
                raise _Unsettled()
            if s.study_name == name and (checking or not old):
                continue  # ours, left empty by a tune killed at its birth: open_campaign writes its attributes
        if old.get("fingerprint") != meta["fingerprint"]:
            what = f"{old.get('family', '?')}/{old.get('variant', '?')}"
            if "fingerprint" not in old:
                raise UsageError(f"{url} holds study {s.study_name!r}, not written by cudalab tune: give another "
                                 "--storage")
            raise UsageError(f"campaign {s.study_name!r} in {url} is {what} with another space, problem or objective "
                             f"(fingerprint {old.get('fingerprint', 'none')}, this run's {meta['fingerprint']}): "
                             "give another --name or --storage")


class _Unsettled(Exception):
    """A study another tune is creating this instant (its attributes not yet written)."""


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
    deadline = time.monotonic() + _NEW_STUDY_WAIT_S
    while True:
        studies = _summaries(storage)
        name = _built_name(name, meta, studies)
        try:
            _refuse_others(url, name, meta, studies, wait=time.monotonic() < deadline)
            break
        except _Unsettled:
            time.sleep(0.1)
    settled = any("fingerprint" in s.user_attrs for s in studies if s.study_name == name)
    study = optuna.create_study(storage=storage, study_name=name, sampler=sampler, load_if_exists=True,
                                directions=directions)
    if not settled:
        write_meta(study, meta)
    return study


def _built_name(name: str, meta: Mapping[str, Any], studies: Any) -> str:
    """``name``, or ``NAME@BUILD`` when the study of that name measured another build of the kernel (its source or
    fixed defines changed since): a fresh campaign beside it, never one that inherits the old build's failures."""
    built = meta.get("build")
    mine = [s for s in studies if s.study_name == name]
    if mine and built and mine[0].user_attrs.get("build") not in (None, built):
        return f"{name}@{built[:8]}"
    return name


def write_meta(study: Any, meta: Mapping[str, Any]) -> None:
    """Write what a new campaign is, its fingerprint last: a study with a fingerprint is complete (another tune
    opening the file this instant waits for it: :func:`open_campaign`)."""
    for k, v in sorted(meta.items(), key=lambda kv: kv[0] == "fingerprint"):
        study.set_user_attr(k, v)


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
