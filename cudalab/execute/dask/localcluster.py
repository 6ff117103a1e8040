"""The Dask cluster cudalab starts itself (``--cluster local``): one Nanny per GPU of this host, an event loop
whose worker processes never see Ctrl-C, Dask's settings for an idle cluster that costs nothing, and its closing."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import shutil
from typing import Any, Sequence

from cudalab.execute.dask import cluster_worker as CW

__all__ = ["LOCAL_CONFIG", "close_local", "local_cluster"]

#: Dask's settings for a cluster cudalab starts (``--cluster local``): its sampling profiler (every 10 ms in every
#: worker), its event-loop tick (20 ms), system monitor (0.5 s) and memory monitors (0.1 s, the Nannies' in the
#: driver's process) cost a 2-core host with 8 GPU workers a quarter of a core with nothing running, and its
#: workers more while trials run (scripts/bench_scale.py). A cudalab task's memory is a few plans and rows, and the
#: dashboard's task stream and progress stay; only its profile page is empty.
LOCAL_CONFIG = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
                "distributed.admin.system-monitor.interval": "2s", "distributed.worker.memory.monitor-interval": "1s"}


def local_cluster(devices: Sequence[int], env: dict[int, dict[str, str]] | None = None) -> Any:
    """A Dask cluster on this host: a scheduler and one worker process (a Nanny's) per GPU, each seeing only
    its GPU (``CUDA_VISIBLE_DEVICES``, as dask-cuda does) and holding the resource ``GPU=1``, with
    ``1 + K`` threads and the resource ``BUILD=K`` (:func:`cluster_worker.build_threads`): the GPU task on one thread, the
    next trials' prebuilds on the others.

    Args:
        devices: GPU indices.
        env: extra environment per GPU index (tests give fake GPUs other names).
    """
    from distributed import Nanny, Scheduler, SpecCluster  # noqa: PLC0415  (the cluster extra)

    import tempfile  # noqa: PLC0415

    dashboard = importlib.util.find_spec("bokeh") is not None
    k = CW.build_threads(len(devices))
    # the workers' dask-scratch-space in a folder of this run's own (0700), removed when the cluster closes:
    # Dask's default is the temporary folder itself, where it stayed after every run
    scratch = tempfile.mkdtemp(prefix="cudalab-dask-")
    workers = {f"gpu{d}": {"cls": Nanny, "options": {
        "local_directory": scratch, "nthreads": 1 + k, "resources": {CW.RESOURCE: 1, CW.BUILD: k}, "name": f"gpu{d}", "silence_logs": logging.ERROR,
        "env": {"CUDA_VISIBLE_DEVICES": str(d), **((env or {}).get(d, {}))}}} for d in devices}
    # a port of its own, dashboard or not (the scheduler's HTTP server starts either way: on 8787 it warned in
    # three lines when another cluster held that port)
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": dashboard, "dashboard_address": ":0"}}
    import dask  # noqa: PLC0415

    before = set(SpecCluster._instances)
    loop = _loop_without_sigint()
    try:  # the scheduler's scratch too (a Server's: Dask's temporary-directory, else the temporary folder)
        with dask.config.set({"temporary-directory": scratch, **LOCAL_CONFIG}):
            cluster = SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR, name="cudalab",
                                  loop=loop.loop)
    except BaseException:
        # A cluster half made (Ctrl-C while its workers start) is closed here, quietly: left to Dask's atexit
        # hook, its close asserted on a worker still starting and printed a traceback after the one line.
        for half in set(SpecCluster._instances) - before:
            with contextlib.suppress(Exception):
                half.close(timeout=5)
            SpecCluster._instances.discard(half)
        loop.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    cluster.cudalab_scratch, cluster.cudalab_loop = scratch, loop  # ended by Cluster.close
    return cluster


def _loop_without_sigint() -> Any:
    """The local cluster's event loop, in a thread started with SIGINT blocked.

    Ctrl-C is the driver's (a Dask worker still importing printed its traceback under cudalab's line). A thread
    inherits the signal mask of the thread that starts it, a process that of the thread that spawns it (through
    exec): the Nanny's worker processes never see Ctrl-C; the driver closes them. The main thread's mask is
    restored at once: Ctrl-C still interrupts the driver while its cluster starts.

    Returns:
        a started :class:`distributed.utils.LoopRunner` (``.loop``, ``.stop()``).
    """
    import signal  # noqa: PLC0415
    from multiprocessing import resource_tracker  # noqa: PLC0415

    from distributed.utils import LoopRunner  # noqa: PLC0415

    # multiprocessing starts its resource tracker on first use with SIGINT blocked, then *unblocks* it in the
    # thread that started it: started here first, no thread of the loop's unblocks it again
    resource_tracker.ensure_running()
    runner = LoopRunner()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        runner.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return runner


def close_local(cluster: Any) -> None:
    """Stop a :func:`local_cluster`: its workers (which end their GPU workers), its event loop, its scratch folder."""
    try:
        cluster.close(timeout=10)
    except Exception:
        pass
    loop = getattr(cluster, "cudalab_loop", None)
    if loop is not None:
        loop.stop()
    scratch = getattr(cluster, "cudalab_scratch", None)
    if scratch:  # the workers' dask-scratch-space
        shutil.rmtree(scratch, ignore_errors=True)
