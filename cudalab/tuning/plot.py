"""``cudalab tune --plot``: the convergence curve, Optuna's parameter importances, and for two objectives
the Pareto front (matplotlib, optional)."""

from __future__ import annotations

import os
import warnings
from typing import Any

from cudalab.report import plot as P
from cudalab.tuning.strategy import quiet_optuna

__all__ = ["plot_campaign"]


def _importances(res: Any) -> dict[str, float]:
    """Optuna's parameter importances of the campaign ({} when too few trials passed to compute them)."""
    optuna = quiet_optuna()
    try:
        study = optuna.load_study(study_name=res.name, storage=res.url)
        with warnings.catch_warnings():  # Optuna warns that a target means "lower is better": it does, here
            warnings.simplefilter("ignore", UserWarning)
            return dict(optuna.importance.get_param_importances(study, target=lambda t: t.values[0]))
    except Exception:  # noqa: BLE001  (fewer than two passed trials, one free parameter: no figure, no error)
        return {}


def plot_campaign(res: Any, path: str | os.PathLike) -> None:
    """Draw ``res`` (a :class:`~cudalab.tuning.result.TuneResult`) to ``path`` (.png, .svg or .pdf)."""
    plt = P._pyplot()
    two = len(res.objectives) > 1
    # constrained layout: the importances' long names (WT_STAGES) must not reach into the curve's legend
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    ax = axes[0]
    trials = sorted(res.trials, key=lambda m: m.number)
    if two:
        ok = [m for m in trials if m.values is not None]
        front = {m.number for m in res.pareto}
        ax.scatter([m.values[0] for m in ok], [m.values[1] for m in ok], s=12, color="0.6", label="trials")
        pf = sorted((m.values for m in ok if m.number in front))
        ax.plot([v[0] for v in pf], [v[1] for v in pf], "o-", color="C3", label="Pareto front")
        ax.set_xlabel("time (ms)")
        ax.set_ylabel("energy (mJ per launch)")
        ax.legend()
    else:
        best, xs, ys, xs_all, ys_all = None, [], [], [], []
        for i, m in enumerate(t for t in trials if t.status not in ("refused", "interrupted")):
            if m.values is not None:
                xs_all.append(i + 1)
                ys_all.append(m.values[0])
                best = m.values[0] if best is None else min(best, m.values[0])
            if best is not None:
                xs.append(i + 1)
                ys.append(best)
        ax.scatter(xs_all, ys_all, s=10, color="0.6", label="trial")
        ax.step(xs, ys, where="post", color="C0", label="best so far")
        if ys_all and min(ys_all) > 0 and max(ys_all) / min(ys_all) > 4:
            # a few slow configurations (8x the best in the matmul warptile) would flatten the curve near the best
            ax.set_yscale("log")
        ax.set_xlabel("trials")
        ax.set_ylabel(f"{res.objectives[0]} ({'ms' if res.objectives[0] == 'time' else 'mJ'})")
        ax.legend()
    ax.set_title(f"{res.family}/{res.variant}: {res.name}")
    imp = _importances(res)
    ax = axes[1]
    if imp:
        names = list(imp)[::-1]
        ax.barh(names, [imp[n] for n in names], color="C2")
        ax.set_xlabel("importance (Optuna)")
    else:
        ax.text(0.5, 0.5, "too few passed trials for importances", ha="center", va="center")
        ax.set_axis_off()
    P._save(fig, path)
