"""A Dask worker preload for the cluster tests: the worker's cudalab GPU workers are fake ones.

Dask loads this in every worker process it starts (``distributed.worker.preload``, set by the tests in
Dask's config or as ``DASK_DISTRIBUTED__WORKER__PRELOAD``); from then on
:func:`cudalab.execute.local.process.spawn` starts :mod:`fake_worker_main` processes, which act on the
``FAKE_WORKER`` environment variable as in the single-host tests. ``FAKE_BUILD=fail`` makes every build the Dask
worker itself makes (a prebuild) fail as nvcc would; ``FAKE_BUILD=instant`` finds every one built.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from cudalab.execute.local import process as W

from fake_workers import FAKE_MAIN


def fake_spawn(device: int, energy: bool = False) -> W.WorkerProcess:
    """A fake GPU worker process for GPU ``device``."""
    return W.WorkerProcess(device, argv=lambda fd: [sys.executable, FAKE_MAIN, "--fd", str(fd), "--device", str(device)],
                           echo=None)


#: What dask_setup replaced, put back by dask_teardown: a Dask worker run inside the test process (a cluster of
#: threads) must not leave the fake in place for the tests after it (a serial run failed in test_workers.py).
_SAVED: dict[str, Any] = {}


def dask_setup(worker: Any = None) -> None:
    from cudalab import build

    _SAVED.setdefault("spawn", W.spawn)
    _SAVED.setdefault("build", build.build)
    W.spawn = fake_spawn
    if os.environ.get("FAKE_BUILD") == "fail":  # every build on this Dask worker (its prebuilds) fails
        from cudalab.errors import CompileError

        def fail(*args: Any, **kw: Any) -> Any:
            raise CompileError("nvcc could not compile (fake)", "fake.cu(1): error: fake")

        build.build = fail
    if os.environ.get("FAKE_BUILD") == "instant":  # every prebuild finds its cubin built (no nvcc: a scale benchmark)
        from types import SimpleNamespace

        build.build = lambda *args, **kw: SimpleNamespace(cached=True)


def dask_teardown(worker: Any = None) -> None:
    from cudalab import build

    if "spawn" in _SAVED:
        W.spawn = _SAVED.pop("spawn")
    if "build" in _SAVED:
        build.build = _SAVED.pop("build")
