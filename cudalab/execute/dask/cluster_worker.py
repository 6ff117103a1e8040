"""The Dask side of ``--cluster``: what runs inside each Dask worker (one Dask worker per GPU).

A Dask worker never touches CUDA itself. On first use it makes one cudalab
:class:`~cudalab.execute.local.drive.Session` (a per-process singleton) whose GPU worker *process* opens the Dask
worker's GPU (device 0 of its ``CUDA_VISIBLE_DEVICES``, one GPU per Dask worker as dask-cuda does) and stays
warm for every later task. A task gets planned points as data (``Plan.to_dict()``, planned once by the
driver), runs them through that session (so the watchdog and "a fault is one row" hold as on one host) and
returns the rows as data, with the GPU and the host that ran them. Inputs are drawn and kernels built on
this host from the plan (its seed, its own build cache); nothing but plans and rows crosses the network.

Beside its GPU task a Dask worker runs *prebuilds* (:func:`prebuild`, on its spare threads, resource ``BUILD``):
the driver asks one for each trial it submits, so nvcc fills this host's build cache while the GPU times the
trial before, and the GPU task finds its cubin there.

A Dask worker whose GPU cannot be opened says so once, sets its ``GPU`` resource to 0 (the scheduler sends
it no more GPU work) and hands its task back (:class:`distributed.Reschedule`).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, MutableMapping, Sequence

from cudalab import __version__, catalog
from cudalab.plan import Plan
from cudalab.execute.local.drive import Session
from cudalab.execute.local.slot import WorkerError

__all__ = ["run_plans", "probe", "prebuild", "wire_version", "unpin_blas"]

#: The Dask resource a cudalab GPU worker holds (``--resources GPU=1``).
RESOURCE = "GPU"
#: The Dask resource of a worker's build threads (``--resources GPU=1,BUILD=K`` with ``--nthreads K+1``): a
#: prebuild holds one, so K builds at most run beside the GPU task and a thread is always free for it.
BUILD = "BUILD"


def build_threads(gpus: int, cores: int | None = None) -> int:
    """Build threads per GPU worker of a host (``BUILD=K``): its cores shared among its GPU workers, less the one
    each GPU task's thread takes; at least 1 (a build is nvcc in a process of its own: its thread mostly waits)."""
    cores = cores if cores is not None else (os.cpu_count() or 2)
    return max(1, cores // max(1, gpus) - 1)


#: What a Dask Nanny sets to 1 in its worker's environment (``distributed.nanny.pre-spawn-environ``), so that the
#: worker's task threads do not each start a BLAS pool on every core. cudalab's tasks in a Dask worker do no BLAS;
#: the GPU worker process they start does (a point's reference: NumPy's float64 product for matmul), on one core
#: only with these set.
NANNY_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def unpin_blas(environ: MutableMapping[str, str]) -> None:
    """Drop a Nanny's single-thread settings (:data:`NANNY_THREAD_VARS` where they are ``1``) from ``environ``, so
    that the GPU worker started from it computes its references with the host's cores, as on this host's engine
    (another value, set on purpose, stays)."""
    for name in NANNY_THREAD_VARS:
        if environ.get(name) == "1":
            del environ[name]


_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}  # "session", "energy", "error": this process's GPU session


@functools.cache  # the code this process runs (read once: every task says it, and hashing costs ms)
def wire_version() -> str:
    """cudalab's version and a digest of what crosses the network (the plan and the protocol): a driver and
    its workers must agree on both."""
    root = Path(__file__).resolve().parents[2]  # the cudalab package
    digest = hashlib.sha256()
    for rel in ("plan.py", "worker/protocol.py", "records/results.py"):
        digest.update((root / rel).read_bytes())
    return f"{__version__}+{digest.hexdigest()[:12]}"


def _session(energy: bool, timeout: float | None) -> Session:
    """This process's session (made on first use, made again for another ``energy``).

    Raises:
        WorkerError: this worker's GPU could not be opened (now or earlier).
    """
    if _STATE.get("error"):
        raise WorkerError(_STATE["error"])
    s = _STATE.get("session")
    if s is None or _STATE.get("energy") != energy:
        if s is not None:
            s.close()
        unpin_blas(os.environ)  # before the GPU worker process starts: it inherits this environment
        s = Session([0], energy=energy, keep_workers=True).start()
        _STATE.update(session=s, energy=energy)
        if len(_STATE) == 2:
            atexit.register(_end)
    s.timeout = timeout
    try:
        s.count()  # waits for the GPU worker's "ready": the GPU is open (warm once)
    except WorkerError as exc:
        _STATE["error"] = str(exc)
        raise
    return s


def _end() -> None:
    s = _STATE.pop("session", None)
    if s is not None:
        s.kill()


def _where(s: Session) -> dict[str, Any]:
    """The GPU and host of this worker (every row says where it ran), and its Dask address (the driver sends
    the next trial's prebuild to that host: the next trial most likely runs on the worker that just freed)."""
    info = s.info()
    return {"host": socket.gethostname(), "gpu": str(info.get("name", "")), "visible": os.environ.get(
        "CUDA_VISIBLE_DEVICES", ""), "info": info, "cudalab": wire_version(), "worker": _address()}


def _address() -> str:
    try:
        from distributed import get_worker  # noqa: PLC0415

        return str(get_worker().address)
    except (ImportError, ValueError):  # called outside a Dask worker (a test)
        return ""


def _give_back(why: str) -> None:
    """This Dask worker cannot run GPU work: no more is sent to it; the task goes back to the scheduler."""
    from distributed import Reschedule, get_worker  # noqa: PLC0415

    w = get_worker()
    w.loop.add_callback(w.set_resources, **{RESOURCE: 0})
    print(f"cudalab: {w.address} gives its GPU work back: {why}", flush=True)
    raise Reschedule()


def probe(energy: bool = False) -> dict[str, Any]:
    """Open this worker's GPU (once) and say what it is: the driver checks the cluster with this before any trial."""
    with _LOCK:
        try:
            s = _session(energy, None)
        except WorkerError as exc:
            return {"host": socket.gethostname(), "error": str(exc), "cudalab": wire_version()}
        return _where(s)


def run_plans(plans: Sequence[dict[str, Any]], energy: bool = False, timeout: float | None = None) -> dict[str, Any]:
    """Run planned points (``Plan.to_dict()``) in order on this worker's GPU; their rows, as data.

    Several plans in one task run back to back on the same GPU (racing's paired rounds).

    Returns:
        ``points``: per plan its rows, roofline, note, refusal, outputs (:meth:`Point.to_data`); ``incomplete``;
        ``where``: host, GPU name, ``CUDA_VISIBLE_DEVICES``, the GPU's facts; ``seconds``: the points' time in
        this worker (the campaign's time account sums it).
    """
    with _LOCK:  # one task at a time on a GPU (a worker started with more threads still times alone)
        try:
            s = _session(energy, timeout)
        except WorkerError as exc:
            _give_back(str(exc))
        with catalog.held():  # once a task, not once a plan (a walk's task holds several)
            todo = [Plan.from_dict(p).with_request(device=0) for p in plans]
        t0 = time.monotonic()
        runs, incomplete = s.run(todo, sum(len(p.variants) for p in todo))
        seconds = time.monotonic() - t0
        return {"points": [r.to_data() for r in runs], "incomplete": incomplete, "where": _where(s), "seconds": seconds}


def prebuild(plan: dict[str, Any], arch: str) -> dict[str, Any]:
    """Build a planned point's kernels for ``arch`` into this host's build cache, ahead of its GPU task.

    Runs on a build thread of a Dask worker, beside the GPU task (no GPU, no lock). A build already cached
    costs a lookup. Never raises: a build that fails here is left to the GPU task, which builds again and
    reports nvcc's log in the trial's row, as without a prebuild.

    Returns:
        ``built``: builds nvcc made; ``cached``: builds already there; ``error``: the first failure's line ('').
    """
    out: dict[str, Any] = {"built": 0, "cached": 0, "error": ""}
    # in a thread of its own, below the GPU task's priority (its nvcc processes inherit it; the Dask thread's stays)
    t = threading.Thread(target=_prebuild, args=(plan, arch, out), name="cudalab-prebuild", daemon=True)
    t.start()
    t.join()
    return out


def _prebuild(plan: dict[str, Any], arch: str, out: dict[str, Any]) -> None:
    from cudalab import build  # noqa: PLC0415
    from cudalab.build.priority import lower_priority  # noqa: PLC0415
    from cudalab.plan import plan_launch, variant_arch  # noqa: PLC0415

    lower_priority()
    try:
        run = Plan.from_dict(plan)
        req = run.request
        for v in run.variants:
            if v.kind != "kernel":
                continue
            lau = plan_launch(v, run.family, run.problem, req.block, req.grid, overrides=req.defines)
            b = build.build(run.spec.directory / v.source, dict(lau.defines), variant_arch(v, arch))
            out["cached" if b.cached else "built"] += 1
    except Exception as exc:  # noqa: BLE001  (the GPU task builds again and reports it in its row)
        out["error"] = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
