"""Where a planned point runs: one interface (:class:`~cudalab.execute.executor.Executor`: submit the planned
points, their rows come back as they finish, cancel, close) and two engines behind it, the local pool of
isolated GPU workers (:mod:`.local`) and a Dask cluster (:mod:`.dask`); :func:`open_executor` (a run's) and
:func:`open_campaign` (a tuning campaign's) are the one place that picks between them. Also here: Ctrl-C and SIGTERM during a run (:mod:`.signals`) and the handle on a GPU
worker started under a tool (:mod:`.toolchild`). Importing the package imports none of them: the command line
starts a worker through :mod:`.local.process` before anything heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from cudalab.execute.executor import Executor
    from cudalab.plan import RunRequest
    from cudalab.progress import Observer
    from cudalab.execute.point import Point

__all__ = ["Workers", "open_executor", "open_campaign"]


@dataclass(frozen=True)
class Workers:
    """Where a run's points run and how its GPU workers start: all :func:`open_executor` reads of a command.

    Apart from what runs (:class:`cudalab.session.options.RunOptions`): the command line types both from its
    flags, and nothing of the family (its variants, sizes, options) reaches the engine.

    Attributes:
        device: the GPU when ``devices`` is not given (``--device``).
        devices: ``--devices``: a comma list of GPU indices or ``all`` (None: ``device`` alone).
        cluster: ``--cluster``: ``local`` or a Dask scheduler's address (None: this host's own workers).
        timeout: the watchdog's limit in seconds (None: the default rule).
        energy: workers that measure energy (``--energy``).
        nvml_first: NVML is asked about the GPU before a worker starts (``--exclusive``, ``--lock-clocks``).
    """

    device: int = 0
    devices: str | None = None
    cluster: str | None = None
    timeout: float | None = None
    energy: bool = False
    nvml_first: bool = False


def open_executor(workers: Workers, observer: Observer | None = None,
                  on_ready: Callable[[dict[str, Any]], None] | None = None,
                  on_change: Callable[[list[Point]], None] | None = None) -> Executor:
    """The engine the options ask for: a Dask cluster with ``--cluster``, else this host's GPU workers.

    Args:
        workers: where the points run (the timeout was checked with the other options).
        observer: progress.
        on_ready: gets a GPU's facts as its worker opens it.
        on_change: gets the points after every row and roofline.

    Raises:
        UsageError: a bad ``--cluster`` or ``--devices``.
    """
    from cudalab.execute.local.devices import parse_devices  # noqa: PLC0415  (the package stays light: see above)

    devices = parse_devices(workers.devices, workers.device)  # None: every GPU (--devices all)
    if workers.cluster is not None:
        from cudalab.execute.dask.cluster import parse_cluster  # noqa: PLC0415  (Dask: only with --cluster)
        from cudalab.execute.dask.engine import DaskPool  # noqa: PLC0415

        return DaskPool(parse_cluster(workers.cluster), devices, workers.timeout, workers.energy, observer, on_ready,
                        on_change)
    from cudalab.execute.local.engine import LocalPool  # noqa: PLC0415

    return LocalPool(devices, workers.timeout, workers.energy, observer, on_ready, on_change,
                     nvml_first=workers.nvml_first)


def open_campaign(workers: Workers, build_ahead: int | None, builds: Callable[[], Any],
                  build_of: Callable[[RunRequest, str], Callable[[], None]]) -> Executor:
    """A tuning campaign's engine: a Dask cluster with ``--cluster`` (on ``--devices`` for ``local``), else this
    host's GPU ``--device``; nothing starts until :meth:`Executor.start`.

    Args:
        workers: where it runs (``cluster``, ``device``, ``devices``, ``timeout``, ``energy`` are read here; the
            timeout was checked with the command's other options).
        build_ahead: ``--build-ahead`` (None: as many as there are build threads; 0: none).
        builds: makes this host's build threads (the local engine's builds ahead, at the GPU's architecture; a
            local cluster's first trials, built while it starts).
        build_of: the build a request needs on a GPU of an architecture, as a call.

    Raises:
        UsageError: a bad ``--cluster`` or ``--devices``.
    """
    w = workers
    if w.cluster is None:
        from cudalab.execute.local.engine import LocalPool  # noqa: PLC0415  (the package stays light: see above)

        return LocalPool([w.device], w.timeout, w.energy, builds=builds if build_ahead != 0 else None,
                         build_of=build_of)
    from cudalab.execute.dask.cluster import parse_cluster  # noqa: PLC0415  (Dask: only with --cluster)
    from cudalab.execute.dask.engine import DaskPool  # noqa: PLC0415
    from cudalab.execute.local.devices import parse_devices  # noqa: PLC0415

    return DaskPool(parse_cluster(w.cluster), parse_devices(w.devices, w.device), w.timeout, w.energy,
                    build_ahead=build_ahead, builds=builds if build_ahead != 0 else None, build_of=build_of)
