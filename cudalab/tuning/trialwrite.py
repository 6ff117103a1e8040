"""Writing finished trials into a campaign's study: several in one transaction, and without Optuna's reads.

A walk (grid, random) writes each trial once, finished (:meth:`optuna.study.Study.add_trial`). Optuna's
``add_trial`` on its RDB storage reads before every write: the study's row, whether each parameter was ever
stored with another distribution, whether the trial already has each value and attribute, then counts the
study's trials for the number: about ten statements and 3.6 ms of the driver's CPU a trial, which bounded a
cluster's trials a second (scripts/bench_scale.py: the driver is one core). :func:`add_trials` writes the same
rows into Optuna's own tables (its models' tables and column conversions), a batch of trials in one transaction:
the study's row locked, one count for the numbers, one INSERT a trial and one a table for the batch's parameters,
values and attributes, each parameter's distribution checked once a study and process (a campaign's space is
fixed: its fingerprint says so). A storage that is not Optuna's RDB storage gets ``add_trial`` as before.

The trials are committed when :func:`add_trials` returns: a campaign reports a trial only after that, so one
killed outright still keeps every trial it reported.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

__all__ = ["add_trials"]


def add_trials(study: Any, trials: Sequence[Any]) -> None:
    """Add finished trials (``optuna.trial.FrozenTrial``, :func:`optuna.trial.create_trial`'s) to ``study`` in
    one transaction, numbered in order after the study's trials, as ``study.add_trial`` would one by one.

    Raises:
        ValueError: a trial that ``add_trial`` refuses (its values not one per objective, a parameter stored
            before with an incompatible distribution).
        optuna.exceptions.StorageInternalError: the storage could not write them (nothing of the batch is).
    """
    if not trials:
        return
    cached = getattr(study, "_storage", None)
    backend = getattr(cached, "_backend", cached)
    try:
        from optuna.storages import RDBStorage  # noqa: PLC0415
        from optuna.storages._rdb import models  # noqa: PLC0415
        from optuna.storages._rdb.storage import _create_scoped_session  # noqa: PLC0415
    except ImportError:  # an Optuna without these: its own way, one by one
        backend = None
    if not isinstance(backend, RDBStorage) or not hasattr(models.TrialValueModel, "value_to_stored_repr"):
        for t in trials:
            study.add_trial(t)
        return
    objectives = len(study.directions)
    for t in trials:
        t._validate()  # what add_trial checks first
        if t.values is not None and len(t.values) != objectives:
            raise ValueError(f"the trial has {len(t.values)} values, the study {objectives} objectives")
    sid = study._study_id
    with _create_scoped_session(backend.scoped_session) as session:  # committed, or closed and rolled back
        _insert(session, models, sid, trials, backend)


def _insert(session: Any, models: Any, sid: int, trials: Sequence[Any], backend: Any) -> None:
    """The batch's rows, in ``session``'s transaction."""
    from sqlalchemy import func, insert  # noqa: PLC0415
    from optuna.distributions import distribution_to_json  # noqa: PLC0415

    models.StudyModel.find_or_raise_by_id(sid, session, for_update=True)  # numbers given under the lock
    _check_distributions(backend, session, models, sid, trials)
    number = session.query(func.count(models.TrialModel.trial_id)).filter(models.TrialModel.study_id == sid).scalar()
    rows: dict[Any, list[dict[str, Any]]] = {models.TrialParamModel: [], models.TrialValueModel: [],
                                             models.TrialUserAttributeModel: [], models.TrialSystemAttributeModel: []}
    for t in trials:
        # the trial's row as Optuna's model makes it (its datetimes stored as this Optuna stores them)
        made = models.TrialModel(study_id=sid, number=number, state=t.state, datetime_start=t.datetime_start,
                                 datetime_complete=t.datetime_complete)
        tid = session.execute(insert(models.TrialModel.__table__), _columns(made)).inserted_primary_key[0]
        rows[models.TrialParamModel] += [
            {"trial_id": tid, "param_name": k, "param_value": t.distributions[k].to_internal_repr(v),
             "distribution_json": distribution_to_json(t.distributions[k])} for k, v in t.params.items()]
        for i, v in enumerate(t.values or []):
            stored, kind = models.TrialValueModel.value_to_stored_repr(v)
            rows[models.TrialValueModel].append({"trial_id": tid, "objective": i, "value": stored, "value_type": kind})
        for model, attrs in ((models.TrialUserAttributeModel, t.user_attrs),
                             (models.TrialSystemAttributeModel, t.system_attrs)):
            rows[model] += [{"trial_id": tid, "key": k, "value_json": json.dumps(v)} for k, v in attrs.items()]
        number += 1
    for model, batch in rows.items():
        if batch:  # one statement a table for the whole batch
            session.execute(insert(model.__table__), batch)


def _columns(made: Any) -> dict[str, Any]:
    """A model object's columns as an INSERT takes them, its primary key left to the database."""
    from sqlalchemy import inspect  # noqa: PLC0415

    return {a.columns[0].key: getattr(made, a.key) for a in inspect(type(made)).column_attrs
            if not a.columns[0].primary_key}


def _check_distributions(backend: Any, session: Any, models: Any, sid: int, trials: Sequence[Any]) -> None:
    """Refuse a parameter whose distribution differs from the one the study stored first (as ``add_trial``
    does); each name is read once a study and process."""
    from optuna.distributions import check_distribution_compatibility, json_to_distribution  # noqa: PLC0415

    seen: dict[tuple[int, str], Any] = backend.__dict__.setdefault("cudalab_distributions", {})
    for t in trials:
        for name, dist in t.distributions.items():
            if (sid, name) not in seen:
                first = (session.query(models.TrialParamModel).join(models.TrialModel)
                         .filter(models.TrialModel.study_id == sid)
                         .filter(models.TrialParamModel.param_name == name).first())
                seen[(sid, name)] = json_to_distribution(first.distribution_json) if first is not None else dist
            check_distribution_compatibility(seen[(sid, name)], dist)
