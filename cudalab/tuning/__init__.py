"""``cudalab tune``: search a kernel variant's parameter space with Optuna's strategies, every trial an
ordinary run point, and name a winner by racing the best (see :mod:`cudalab.tuning.drive`).

Python::

    res = cudalab.tune("matmul", variant="warptile", n="4096", trials=60)
    res.winner, res.command, res.to_pandas()
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["tune"]


def tune(family: str, variant: str | None = None, *, defines: dict[str, Any] | None = None,
         on_event: Callable[[str, dict[str, Any]], None] | None = None, **kw: Any) -> Any:
    """Run (or continue) a tuning campaign and return its :class:`~cudalab.tuning.result.TuneResult`.

    Args:
        family, variant: what to tune.
        defines: ``-D`` dimensions, name -> values (``{"WT_BK": "8..32:pow2"}``).
        on_event: progress callbacks (``start``, ``trial``, ``race``, ``round``).
        **kw: any other :class:`~cudalab.tuning.options.TuneOptions` field (``trials=40``, ``require=[...]``,
            ``objectives=("time", "energy")``, ``time_s=600``...).

    Raises:
        UsageError: bad input, before any GPU work.
        WorkerError: no GPU worker could start.
    """
    from cudalab.tuning.drive import plan, run_campaign  # noqa: PLC0415
    from cudalab.tuning.options import TuneOptions  # noqa: PLC0415

    import dataclasses  # noqa: PLC0415

    from cudalab.errors import UsageError  # noqa: PLC0415

    known = {f.name for f in dataclasses.fields(TuneOptions)} - {"family", "variant", "defines"}
    unknown = sorted(set(kw) - known)
    if unknown:
        raise UsageError(f"cudalab.tune() takes no argument {unknown[0]!r} (it takes: {', '.join(sorted(known))})")
    if defines is not None and not isinstance(defines, dict):
        raise UsageError(f"defines must be a dict of name -> values (got {type(defines).__name__})")
    if on_event is not None and not callable(on_event):
        raise UsageError(f"on_event must be callable (got {type(on_event).__name__})")
    for key in ("require", "objectives"):
        if isinstance(kw.get(key), str):
            kw[key] = (kw[key],) if key == "require" else tuple(kw[key].split(","))
        elif key in kw and isinstance(kw[key], (list, tuple, set, frozenset)):
            kw[key] = tuple(kw[key])
    if isinstance(kw.get("options"), dict):
        kw["options"] = tuple((str(k), str(v)) for k, v in kw["options"].items())
    from cudalab import catalog  # noqa: PLC0415

    opts = TuneOptions(family=family, variant=variant,
                       defines=tuple((str(k), str(v)) for k, v in (defines or {}).items()), **kw)
    with catalog.held():  # read once for the campaign, as the command does (each trial's plan read it again: ms)
        return run_campaign(plan(opts), on_event)

