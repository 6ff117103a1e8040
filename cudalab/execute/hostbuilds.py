"""A campaign's builds ahead on this host's build threads: the local engine's, and a local cluster's first trials
while the cluster starts (both engines' GPU workers then read this host's build cache).

The threads are made by the first build asked for; each request is built once, until its task takes it; the build
its GPU waits for first runs at the campaign's own priority (``urgent``). Before a GPU worker has said its
architecture, this host's is asked of NVML (or nvidia-smi) once, without a CUDA context.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable

__all__ = ["HostBuilds"]


class HostBuilds:
    """Builds ahead here.

    Args:
        make: makes the build threads (``workers``, ``submit(job, urgent=, request=)`` -> a future or None,
            ``queued()``, ``close()``: :class:`cudalab.tuning.buildpool.BuildPool`).
        build_of: the build a request needs on a GPU of an architecture, as a call (``(request, arch)``).
    """

    def __init__(self, make: Callable[[], Any], build_of: Callable[[Any, str], Callable[[], None]]):
        self._make, self._build_of = make, build_of
        self._pool: Any = None
        self._early: dict[Any, Future] = {}  # a request's build, until its task takes it
        self._guess: str | None = None  # this host's arch ('': none), asked once

    def pool(self) -> Any:
        """The build threads (made now the first time)."""
        if self._pool is None:
            self._pool = self._make()
        return self._pool

    def threads(self) -> int:
        """How many builds run at once."""
        return self.pool().workers

    def arch_here(self) -> str | None:
        """This host's GPUs' architecture (``sm_90``) as NVML or nvidia-smi name it, when they all share one (asked
        once); else None (nothing is built ahead)."""
        if self._guess is None:
            from cudalab.instruments import driverquery  # noqa: PLC0415  (NVML: only when a campaign builds ahead)

            self._guess = driverquery.arch_here() or ""
        return self._guess or None

    def submit(self, request: Any, arch: str | None, urgent: bool) -> None:
        """Start building ``request``'s kernels for ``arch`` (nothing without an arch, or when asked before)."""
        if not arch or request in self._early:
            return
        try:
            fut = self.pool().submit(self._build_of(request, arch), urgent=urgent, request=request)
        except RuntimeError:  # the threads were stopped (stop): its worker builds it
            return
        if fut is not None:
            self._early[request] = fut

    def asked(self) -> bool:
        """Whether a build is waiting for its task (none: the next one asked is the GPU's first wait)."""
        return bool(self._early)

    def has(self, request: Any) -> bool:
        """Whether ``request``'s build was asked here and its task has not taken it."""
        return request in self._early

    def built(self, request: Any) -> bool:
        """Whether ``request``'s build here has finished (True where none was asked)."""
        fut = self._early.get(request)
        return fut is None or fut.done()

    def take(self, request: Any) -> Future | None:
        """``request``'s build, handed to its task (None: none asked here)."""
        return self._early.pop(request, None)

    def queued(self) -> int:
        """Builds not finished yet."""
        return self._pool.queued() if self._pool is not None else 0

    def stop(self) -> None:
        """Drop the builds not started; running ones finish in their threads (their results are cached)."""
        if self._pool is not None:
            self._pool.close()
