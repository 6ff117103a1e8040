"""The values a campaign takes, checked where its options are made (:class:`~cudalab.tuning.options.TuneOptions`),
so the command line and ``cudalab.tune(...)`` refuse the same inputs with the same one line (pure).

The duration and counting rules are the family commands' own (:func:`cudalab.session.options.seconds`,
:func:`~cudalab.session.options.whole`): ``--budget nan`` or ``--device -1`` is refused by tune as by ``cudalab
copy``. A call from Python with a value of the wrong type is a :class:`~cudalab.errors.UsageError` too, never a
TypeError from deep inside.
"""

from __future__ import annotations

import math
from typing import Any

from cudalab.errors import UsageError
from cudalab.session.options import seconds, whole

__all__ = ["check", "MAX_SEED"]

#: Optuna's samplers seed NumPy, which takes 0..2^32-1.
MAX_SEED = 2**32 - 1
_TEXTS = ("family", "variant", "n", "shape", "dtype", "block", "strategy", "name", "storage", "cluster", "devices")
_PAIRS = ("defines", "options")


def check(o: Any) -> None:
    """Refuse a campaign's option values that no campaign can use, naming the option.

    Raises:
        UsageError: the first bad value.
    """
    for name in _TEXTS:
        v = getattr(o, name)
        if v is not None and not isinstance(v, str):
            raise UsageError(f"{_flag(name)} must be a text (got {type(v).__name__} {v!r})")
        if v is not None and not v.strip():  # given empty: a mistake (an unset variable), not "the default"
            raise UsageError(f"{_flag(name)} was given empty: leave it out for its default")
    if o.block is not None:  # the family commands' rule for a block: every size at least 1
        import re  # noqa: PLC0415

        small = [x for x in re.findall(r"-?\d+", o.block.split(":", 1)[0]) if int(x) < 1]
        if small:
            raise UsageError(f"--block {o.block}: every dimension must be at least 1 (got {small[0]})")
    if not o.family:
        raise UsageError("name the family to tune (example: cudalab tune copy)")
    for name in _PAIRS:
        got = getattr(o, name)
        if not isinstance(got, tuple) or not all(isinstance(p, tuple) and len(p) == 2 and all(isinstance(x, str)
                                                                                             for x in p) for p in got):
            raise UsageError(f"{_flag(name)} must be name -> values texts (got {got!r})")
    for name in ("require", "objectives"):
        got = getattr(o, name)
        if not isinstance(got, tuple) or not all(isinstance(x, str) for x in got):
            raise UsageError(f"{_flag(name)} must be texts (got {got!r})")
    for name in ("use_table", "hot"):
        if not isinstance(getattr(o, name), bool):
            raise UsageError(f"{name} must be True or False (got {getattr(o, name)!r})")
    seconds(o.budget, "--budget")
    seconds(o.race_budget, "race_budget")
    if o.timeout is not None:
        seconds(o.timeout, "--timeout")
    if o.time_s is not None and (isinstance(o.time_s, bool) or not isinstance(o.time_s, (int, float))
                                 or not (math.isfinite(o.time_s) and o.time_s > 0)):
        raise UsageError(f"--time must be a positive duration (example: --time 10m; got {o.time_s!r})")
    if o.trials is not None and (isinstance(o.trials, bool) or not isinstance(o.trials, int) or o.trials < 1):
        raise UsageError(f"--trials must be at least 1 (got {o.trials!r})")
    whole(o.race, "--race", 0, 1000)
    whole(o.max_rounds, "max_rounds", 1, 1000)
    whole(o.min_samples, "min_samples", 1, 100_000)
    whole(o.device, "--device", 0, 9999)
    if o.build_ahead is not None:
        whole(o.build_ahead, "--build-ahead", 0, 1024)
    if o.seed is not None:
        whole(o.seed, "--seed", 0, MAX_SEED)
    if o.tolerance is not None and (isinstance(o.tolerance, bool) or not isinstance(o.tolerance, (int, float))
                                    or not 0 < o.tolerance < 0.5):
        raise UsageError(f"--tolerance must be between 0 and 0.5 (got {o.tolerance!r})")


def _flag(name: str) -> str:
    return "-D" if name == "defines" else f"--{name.replace('_', '-')}"
