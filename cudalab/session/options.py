"""What a family run is asked to do: one typed, frozen request that every front end builds.

The command line (:func:`cudalab.cli.options.run_options`), :func:`cudalab.run`, ``cudalab watch`` and the
notebook magic all describe a run as a :class:`RunOptions`; :func:`cudalab.session.run.run_points` takes
only this. Options that only render or save (``--json``, ``--layout``, ``--quiet``) stay with the command.
Light on purpose: the command line builds one before it imports anything heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RunOptions"]


@dataclass(frozen=True)
class RunOptions:
    """One family run's choices, as the user made them (texts are parsed when the points are built).

    Attributes:
        variants: comma list of variants (None: all; ``none`` with ``add``: only those).
        all: ``--all`` (the default; refused together with ``variants``).
        n, shape, dtype, block: sizes, element type and block dims: a text (``"1k,4k"``: a sweep), a list
            of values (a sweep) or None (the family's default).
        grid: grid dims override.
        add: ``--add`` texts (``my.cu:my_kernel@block=32x8``).
        defines: ``-D`` texts (``UNROLL=2,4,8``: a sweep).
        seed: the inputs' random seed (None: fresh).
        budget, min_samples, hot, roofline, energy: the timing protocol.
        launch: how a kernel under 20 µs is timed (``--launch``: auto, batch, graph, cupti, events).
        drop_throttled: leave samples NVML saw throttled out of the statistics (``--drop-throttled``).
        exclusive, lock_clocks, force: what the GPU must be (``--exclusive``, ``--lock-clocks MHZ``) and whether
            the memory plan may be overridden (``--force``).
        device, devices, timeout: where the workers run and the watchdog's limit.
        cluster: ``--cluster``: ``local`` or a Dask scheduler's address (None: this host's own workers).
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
    add: tuple[str, ...] = ()
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
    devices: str | None = None
    timeout: float | None = None
    cluster: str | None = None
    keep_outputs: bool = False
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, name: str) -> Any:
        """The value given for the family's option ``name`` (``-`` or ``_``), None when not given."""
        want = name.replace("-", "_")
        return next((v for k, v in self.options if k.replace("-", "_") == want), None)
