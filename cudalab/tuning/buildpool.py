"""Builds ahead of the GPU: the trials the strategy asked for next are compiled on the machine's cores
while the GPU times the current one.

A build lands in cudalab's build cache (:mod:`cudalab.build`: keyed on the source, defines, flags and
nvcc, with a cross-process lock per key), so the worker that runs the trial later finds its cubin there
instead of waiting on nvcc; two builds of one key never run at once. A build that fails here is left
for the trial: its worker builds again and the compiler's error becomes the trial's failed row.

The first trials need not wait for the GPU worker to open its GPU and say which architecture it is: NVML (or
nvidia-smi) says it without a CUDA context, and :func:`head_start` builds the campaign's first trials meanwhile (the
pool's own builds of the same keys then wait on the key's lock and read the cache, never compiling twice).
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterator

from cudalab.build.priority import lower_priority
from cudalab.errors import LaunchConfigError, UsageError
from cudalab.families import load
from cudalab.plan import RunRequest, make_problem, plan_launch, variant_arch

__all__ = ["BuildPool", "arch_here", "build_of", "default_workers", "first_requests", "head_start"]


def default_workers() -> int:
    """Build threads: the machine's cores less one (the parent and the GPU worker need a core), at least 1."""
    return max(1, (os.cpu_count() or 2) - 1)


def build_of(req: RunRequest, arch: str) -> Callable[[], None]:
    """The build the worker will need for ``req``'s kernel variant on a GPU of ``arch``, as a call."""
    from cudalab import build, catalog  # noqa: PLC0415

    from cudalab.catalog import user  # noqa: PLC0415

    def job() -> None:
        spec = catalog.family(req.family)
        fam = load(spec.module)
        problem = make_problem(spec, fam, req)
        own = user.variants(req.add, spec)  # an --add kernel: built from its prelude, as the worker builds it
        chosen = [] if own and (req.variants or "").strip() == "none" else spec.select(req.variants)
        for v in chosen + own:
            if v.kind != "kernel":
                continue
            lau = plan_launch(v, fam, problem, req.block, req.grid, overrides=req.defines)
            source = user.compile_source(v) if user.is_user(v) else spec.directory / v.source
            build.build(source, dict(lau.defines), variant_arch(v, arch))

    return job


class BuildPool:
    """Threads that run builds; ``workers`` 0 runs none (every build is left to the worker)."""

    def __init__(self, workers: int):
        self.workers = workers
        self._pool = (ThreadPoolExecutor(workers, thread_name_prefix="tune-build", initializer=lower_priority)
                      if workers > 0 else None)
        self._futures: list[Future] = []

    def submit(self, job: Callable[[], None]) -> Future | None:
        """Start ``job`` on a free thread (its errors are left for the trial to report); its future (None: no
        pool), which never raises the job's error."""
        if self._pool is None:
            return None

        def quiet() -> None:
            try:
                job()
            except Exception:  # noqa: BLE001  (the trial's worker builds again and reports it in its row)
                pass

        fut = self._pool.submit(quiet)
        self._futures.append(fut)
        return fut

    def queued(self) -> int:
        """Builds not finished yet."""
        self._futures = [f for f in self._futures if not f.done()]
        return len(self._futures)

    def close(self) -> None:
        """Drop the builds not started; running ones finish in their threads (their results are cached)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def arch_here() -> str | None:
    """``sm_XY`` of this machine's GPUs, asked without a CUDA context (NVML, else nvidia-smi), when they all share
    one; None where neither answers or they differ (which GPU a worker opens then decides: no guess)."""
    try:
        import pynvml  # noqa: PLC0415  (the telemetry extra)

        pynvml.nvmlInit()
        try:
            caps = {tuple(pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(i)))
                    for i in range(pynvml.nvmlDeviceGetCount())}
        finally:
            pynvml.nvmlShutdown()
    except ImportError:  # no telemetry extra: the driver's own tool says the same
        try:
            proc = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = proc.stdout.split() if proc.returncode == 0 else []
        caps = {tuple(int(x) for x in line.split(".")) for line in lines if line.replace(".", "").isdigit()}
    except Exception:  # noqa: BLE001  (no driver, an NVML too old to say)
        return None
    if len(caps) != 1:
        return None
    (cc,) = caps
    return f"sm_{cc[0]}{cc[-1]}"


def first_requests(p: Any, prop: Any, count: int) -> Iterator[RunRequest]:
    """A campaign's first trials as run points, before its study is open: every strategy's first (the family's own
    configuration, ``prop.first``) and a walk's next ones, at most ``count`` and the campaign's budget (a build still
    running holds the command's exit); what the constraints or the launch rules refuse is left out (never built).

    Args:
        p: the campaign's plan (:class:`~cudalab.tuning.prepare.CampaignPlan`).
        prop: a fresh :class:`~cudalab.tuning.propose.Proposer` of the campaign (its walk is read here).
        count: how many at most.
    """
    from cudalab.tuning.prepare import trial_request  # noqa: PLC0415  (prepare plans with tuning.runs)
    from cudalab.tuning.runs import precheck  # noqa: PLC0415

    points = [] if prop.first is None else [prop.first]
    if prop.walk is not None:  # the walk starts with the first, where it is a valid point
        points = []
        while len(points) < min(count, p.budget) and (pt := prop.next_walk(())) is not None:
            points.append(pt)
    for point in points:
        if p.space.allows(point):
            continue
        req = trial_request(p, point)
        try:
            precheck(req)
        except (UsageError, LaunchConfigError):
            continue
        yield req


def head_start(p: Any, prop: Any, arch: Callable[[], str | None] | None = None) -> BuildPool | None:
    """Build a campaign's first trials (:func:`first_requests`) while its GPU worker opens, as many as its build
    threads (``--build-ahead``, else :func:`default_workers`), on a pool of that many threads started now; None when
    there are none.

    ``arch`` is asked on the pool's first thread (NVML can take a moment); no answer builds nothing, and the
    worker's arch decides as before. The campaign's own pool later asks for the same builds: each finds its key
    built or waits for it on the key's lock (:func:`cudalab.build.build`), so nothing is compiled twice. A guess the
    GPU worker contradicts costs CPU only: the cache key holds the arch.

    Args:
        p: the campaign's plan (:class:`~cudalab.tuning.prepare.CampaignPlan`).
        prop: a fresh :class:`~cudalab.tuning.propose.Proposer` of the campaign.
        arch: what says this host's GPU architecture (None: :func:`arch_here`).
    """
    workers = p.opts.build_ahead if p.opts.build_ahead is not None else default_workers()
    if workers <= 0:
        return None
    pool = BuildPool(workers)

    def start() -> None:
        sm = (arch or arch_here)()
        if sm is not None:
            for req in first_requests(p, prop, workers):
                pool.submit(build_of(req, sm))

    pool.submit(start)
    return pool
