"""What a tuning campaign was asked to do: one frozen record, the command line's and the API's (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cudalab.errors import UsageError

__all__ = ["TuneOptions", "parse_duration"]


@dataclass(frozen=True)
class TuneOptions:
    """A campaign's options.

    Attributes:
        family, variant: what is tuned (one kernel variant; None: the family's only ``[[tune]]`` one).
        n, shape, dtype: the problem (None: the ``[[tune]]`` table's, else the family's default).
        defines: ``-D NAME=VALUES`` dimensions; block: the ``--block`` dimension; options: family-option
            dimensions (``tile`` -> ``8,16,32``); require: constraints; use_table: start from ``[[tune]]``.
        strategy: ``--strategy`` (None: tpe, nsga2 for two objectives); trials, time_s: the budget; seed.
        objectives: ``time``, ``energy`` or both.
        name, storage: the campaign's name and SQLAlchemy URL (None: ``NAME.tune.db`` here).
        race, tolerance, max_rounds: racing's K, tie tolerance and most rounds (race 0: none); tolerance None:
            the GPU's calibrated noise floor (``cudalab calibrate``), else 1%.
        budget, race_budget, min_samples, hot: the timing protocol of a trial and of a racing round.
        device, timeout: the GPU and the watchdog's limit.
        cluster: ``--cluster``: ``local`` or a Dask scheduler's address (None: this host's worker on ``device``);
            devices: the GPUs of a ``local`` cluster (``0,1`` or ``all``; None: ``device``).
        build_ahead: build threads ahead of the GPU (None: the machine's cores less one; 0: none).
        add: ``--add FILE.cu:KERNEL@KEY=VALUE,...``: the user's own kernel, on the family's problem, is what is
            tuned (instead of a family variant); its ``tile``/``grid``/``shared`` may be expressions over the
            tuned names.
    """

    family: str
    variant: str | None = None
    n: str | None = None
    shape: str | None = None
    dtype: str | None = None
    defines: tuple[tuple[str, str], ...] = ()
    block: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    require: tuple[str, ...] = ()
    use_table: bool = True
    strategy: str | None = None
    trials: int | None = None
    time_s: float | None = None
    seed: int | None = None
    objectives: tuple[str, ...] = ("time",)
    name: str | None = None
    storage: str | None = None
    race: int = 5
    tolerance: float | None = None
    max_rounds: int = 8
    budget: float = 0.1
    race_budget: float = 0.3
    min_samples: int = 10
    hot: bool = False
    device: int = 0
    timeout: float | None = None
    build_ahead: int | None = None
    cluster: str | None = None
    devices: str | None = None
    add: str | None = None

    def __post_init__(self) -> None:
        from cudalab.tuning.checks import check  # noqa: PLC0415  (it imports this module's neighbours)

        check(self)  # the command line and cudalab.tune(...) refuse the same values, in one line


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")


def parse_duration(text: str | float | None) -> float | None:
    """``--time``: ``90``, ``90s``, ``10m``, ``1.5h`` -> seconds.

    Raises:
        UsageError: anything else, or zero.
    """
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    m = _DURATION.match(text)
    if not m or float(m.group(1)) <= 0:
        raise UsageError(f"--time {text!r} is not a positive duration (examples: 90s, 10m, 1.5h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2) or "s"]
