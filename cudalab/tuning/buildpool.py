"""Builds ahead of the GPU: the trials the strategy asked for next are compiled on the machine's cores
while the GPU times the current one.

A build lands in cudalab's build cache (:mod:`cudalab.build`: keyed on the source, defines, flags and
nvcc, with a cross-process lock per key), so the worker that runs the trial later finds its cubin there
instead of waiting on nvcc; two builds of one key never run at once. A build that fails here is left
for the trial: its worker builds again and the compiler's error becomes the trial's failed row.

The first trials need not wait for the GPU worker to open its GPU and say which architecture it is: the campaign
hands :func:`cudalab.tuning.prepare.first_requests` to its executor's ``prebuild`` while the GPUs open (this host's
engine asks NVML or nvidia-smi for the architecture meanwhile: :func:`cudalab.instruments.driverquery.arch_here`).
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

from cudalab.build.priority import lower_priority
from cudalab.execute import timeline
from cudalab.families import load
from cudalab.plan import RunRequest, make_problem, plan_launch, variant_arch

__all__ = ["BuildPool", "build_of", "default_workers"]


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
    """Threads that run builds; ``workers`` 0 runs none (every build is left to the worker).

    The builds run below the campaign's priority (:func:`~cudalab.build.priority.lower_priority`), but for an urgent
    one: the build the GPU will wait for first runs on a thread of its own at the campaign's priority, so the builds
    queued behind it (all of them start at once on every core) do not slow it down (on an H200 host the first trial's
    build took 1.85 s alone and the GPU waited 1.4 s for it after its worker had opened, beside 14 others).
    """

    def __init__(self, workers: int):
        self.workers = workers
        self._pool = (ThreadPoolExecutor(workers, thread_name_prefix="tune-build", initializer=lower_priority)
                      if workers > 0 else None)
        self._urgent = ThreadPoolExecutor(1, thread_name_prefix="tune-build-first") if workers > 0 else None
        self._futures: list[Future] = []

    def submit(self, job: Callable[[], None], urgent: bool = False, request: Any = None) -> Future | None:
        """Start ``job`` on a free thread (its errors are left for the trial to report); its future (None: no
        pool), which never raises the job's error. ``urgent``: the build the GPU waits for next, at the campaign's
        own priority (not counted in :attr:`workers`). ``request``: the trial's, for the timeline
        (:mod:`cudalab.execute.timeline`)."""
        if self._pool is None:
            return None

        def quiet() -> None:
            timeline.mark("build-start", request)
            try:
                job()
            except Exception:  # noqa: BLE001  (the trial's worker builds again and reports it in its row)
                pass
            finally:
                timeline.mark("build-end", request)

        timeline.mark("build-urgent" if urgent else "build-queued", request)  # before its thread may start it
        fut = (self._urgent if urgent and self._urgent is not None else self._pool).submit(quiet)
        self._futures.append(fut)
        return fut

    def queued(self) -> int:
        """Builds not finished yet."""
        self._futures = [f for f in self._futures if not f.done()]
        return len(self._futures)

    def close(self) -> None:
        """Drop the builds not started; running ones finish in their threads (their results are cached)."""
        for pool in (self._pool, self._urgent):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
