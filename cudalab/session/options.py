"""What a family run is asked to do: one typed, frozen request that every front end builds.

The command line (:func:`cudalab.cli.options.run_options`), :func:`cudalab.run`, ``cudalab watch`` and the
notebook magic all describe a run as a :class:`RunOptions`, and where it runs apart, as a
:class:`cudalab.execute.Workers`; :func:`cudalab.session.run.run_points` takes only these. Options that only
render or save (``--json``, ``--layout``, ``--quiet``) stay with the command.
Light on purpose: the command line builds one before it imports anything heavy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cudalab.errors import UsageError

if TYPE_CHECKING:
    from cudalab.catalog.user import UserKernel

__all__ = ["RunOptions", "seconds", "whole", "MAX_SECONDS"]

#: The longest duration any timing option takes (a day): past it a number is a typo, not a plan.
MAX_SECONDS = 86_400.0


def seconds(value: Any, flag: str) -> float:
    """The one rule for a duration option (``--budget``, ``--timeout``...): a positive, finite number of
    seconds, at most :data:`MAX_SECONDS` (``nan`` passes every comparison, so it is refused by name).

    Raises:
        UsageError: anything else, naming ``flag``.
    """
    try:
        x = float(value) if not isinstance(value, (bool, str)) else float(value.strip()) if isinstance(value, str) \
            else math.nan
    except (TypeError, ValueError, OverflowError):
        x = math.nan
    if not (math.isfinite(x) and 0 < x <= MAX_SECONDS):
        raise UsageError(f"{flag} must be a positive number of seconds, at most a day (got {value!r})")
    return x


def whole(value: Any, flag: str, least: int, most: int) -> int:
    """The one rule for a counting option (``--race``, ``--device``, ``--seed``...): an integer in
    ``least..most`` (a bool, a float or a text is not one).

    Raises:
        UsageError: anything else, naming ``flag`` and the range.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise UsageError(f"{flag} must be an integer from {least:,} to {most:,} (got {value!r})")
    return value


@dataclass(frozen=True)
class RunOptions:
    """One family run's choices, as the user made them (sizes, defines and the family's options are parsed when
    the points are built, against the family; ``--add`` when the options are made: it needs no family).

    Attributes:
        variants: comma list of variants (None: all; ``none`` with ``add``: only those).
        all: ``--all`` (the default; refused together with ``variants``).
        n, shape, dtype, block: sizes, element type and block dims: a text (``"1k,4k"``: a sweep), a list
            of values (a sweep) or None (the family's default).
        grid: grid dims override.
        add: your kernels (``--add my.cu:my_kernel@block=32x8``: :func:`cudalab.catalog.user.parse_adds`).
        defines: ``-D`` texts (``UNROLL=2,4,8``: a sweep).
        seed: the inputs' random seed (None: fresh).
        budget, min_samples, hot, roofline, energy: the timing protocol.
        launch: how a kernel under 20 µs is timed (``--launch``: auto, batch, graph, cupti, events).
        drop_throttled: leave samples NVML saw throttled out of the statistics (``--drop-throttled``).
        exclusive, lock_clocks, force: what the GPU must be (``--exclusive``, ``--lock-clocks MHZ``) and whether
            the memory plan may be overridden (``--force``).
        device: the GPU the points are planned for (``--devices`` spreads them: :class:`cudalab.execute.Workers`).
        keep_outputs: bring each variant's result array back (``--show``, ``--example``).
        options: the family's own options, name -> value (None: its default; a text or list sweeps).
    """

    variants: str | None = None
    all: bool = False
    n: Any = None
    shape: Any = None
    dtype: Any = None
    block: Any = None
    grid: str | None = None
    add: tuple[UserKernel, ...] = ()
    defines: tuple[str, ...] = ()
    seed: int | None = None
    budget: float = 0.5
    min_samples: int = 10
    hot: bool = False
    roofline: bool = True
    energy: bool = False
    drop_throttled: bool = False
    launch: str = "auto"
    exclusive: bool = False
    lock_clocks: int | None = None
    force: bool = False
    device: int = 0
    keep_outputs: bool = False
    options: tuple[tuple[str, Any], ...] = ()
