"""Where a planned point runs: one interface (:class:`~cudalab.execute.executor.Executor`: submit the planned
points, their rows come back as they finish, cancel, close) and two engines behind it, the local pool of
isolated GPU workers (:mod:`.local`) and a Dask cluster (:mod:`.dask`); :func:`open_executor` is the one place
that picks between them. Also here: Ctrl-C and SIGTERM during a run (:mod:`.signals`) and the handle on a GPU
worker started under a tool (:mod:`.toolchild`). Importing the package imports none of them: the command line
starts a worker through :mod:`.local.process` before anything heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:  # the engines read the options; they do not import the session that holds them
    from cudalab.execute.executor import Executor
    from cudalab.progress import Observer
    from cudalab.session.options import RunOptions
    from cudalab.execute.point import Point

__all__ = ["open_executor"]


def open_executor(opts: RunOptions, observer: Observer | None = None,
                  on_ready: Callable[[dict[str, Any]], None] | None = None,
                  on_change: Callable[[list[Point]], None] | None = None) -> Executor:
    """The engine the options ask for: a Dask cluster with ``--cluster``, else this host's GPU workers.

    Args:
        opts: the run's options (``cluster``, ``devices``, ``device``, ``timeout``, ``energy``, ``exclusive``,
            ``lock_clocks`` are read here; the timeout was checked with the other options).
        observer: progress.
        on_ready: gets a GPU's facts as its worker opens it.
        on_change: gets the points after every row and roofline.

    Raises:
        UsageError: a bad ``--cluster`` or ``--devices``.
    """
    from cudalab.execute.local.devices import parse_devices  # noqa: PLC0415  (the package stays light: see above)

    devices = parse_devices(opts.devices, opts.device)  # None: every GPU (--devices all)
    if opts.cluster is not None:
        from cudalab.execute.dask.cluster import parse_cluster  # noqa: PLC0415  (Dask: only with --cluster)
        from cudalab.execute.dask.engine import DaskPool  # noqa: PLC0415

        return DaskPool(parse_cluster(opts.cluster), devices, opts.timeout, opts.energy, observer, on_ready,
                        on_change)
    from cudalab.execute.local.engine import LocalPool  # noqa: PLC0415

    return LocalPool(devices, opts.timeout, opts.energy, observer, on_ready, on_change,
                     nvml_first=opts.exclusive or opts.lock_clocks is not None)
