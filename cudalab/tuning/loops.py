"""The trial loops of a tuning campaign (:class:`cudalab.tuning.drive._Campaign`'s, apart for their size): this
host's, one trial on the GPU while the parent records the one before and asks the next, and a Dask cluster's,
two trials in flight per GPU worker."""

from __future__ import annotations

import time
from collections import deque
from concurrent.futures import CancelledError, ThreadPoolExecutor
from typing import Any

from cudalab.errors import ClusterLost
from cudalab.tuning.result import point_key

__all__ = ["TrialLoops", "MODEL_AHEAD"]

#: The most trials a model-based strategy is asked ahead of its results (a walk asks as far as there are build
#: threads): each one asked blind is a proposal the model made without the results still to come.
MODEL_AHEAD = 8
#: A walk's trials go to a cluster in tasks of about this many seconds in the worker (a Dask task costs the driver,
#: the scheduler and the worker milliseconds: trials of 50 ms one a task spent a third of a GPU on it); at most
#: :data:`BATCH_MAX` trials a task. A model-based strategy's go one a task, so it is told each result as it comes.
BATCH_S = 0.25
BATCH_MAX = 8


class TrialLoops:
    """The loops; the campaign's state and its ask, finish and record are the class's that uses them."""

    def loop(self) -> bool:
        """Run trials until the budget, the time or the space is spent; True when interrupted.

        One trial runs on the GPU (in a thread of its own) while this thread records the one before, asks the
        strategy for the next ones and queues their builds: the GPU is not idle behind the study's storage."""
        if getattr(self.runs, "concurrent", False):
            return self.loop_cluster()
        opts, p = self.p.opts, self.p
        deadline = None if opts.time_s is None else self.account.started + opts.time_s
        workers = self.pool.workers
        # a walk asks nothing of a model, so its builds can run as far ahead as there are cores
        ahead = max(1, workers if self.walking else min(workers, MODEL_AHEAD)) if workers else 1
        pending: deque = deque()
        runner = ThreadPoolExecutor(1, thread_name_prefix="tune-trial")
        flying: tuple | None = None  # (trial, point, request, future) on the GPU now

        def room(extra: int) -> int:  # trials the budget still has, ``extra`` of them finished but not recorded
            if deadline is not None and time.monotonic() >= deadline:
                return 0
            return p.budget - self.evaluated() - extra

        hidden = [0.0]  # the parent's own seconds since the trial on the GPU started (see the wait below)

        def fill(extra: int) -> None:
            t0 = time.monotonic()
            while len(pending) < min(ahead, room(extra)) and self.ask(pending):
                pass
            if extra:
                hidden[0] += time.monotonic() - t0
            else:  # nothing on the GPU: the search is all there is
                self.account.seconds["search"] += time.monotonic() - t0

        def launch() -> tuple | None:
            trial, point, req = pending.popleft()
            self.flying = {point_key(point)}  # asked again while it runs, it is a repeat, not a new trial
            return trial, point, req, runner.submit(self._gpu_trial, req)

        try:
            while True:
                if flying is None:
                    if room(0) <= 0:
                        break
                    fill(0)
                    if not pending:
                        break
                    flying = launch()
                fill(1)  # while the GPU works: the next trials asked, planned and their builds queued
                trial, point, req, fut = flying
                flying = None
                t0 = time.monotonic()
                try:
                    runs, interrupted, waited = fut.result()
                except KeyboardInterrupt:
                    self.runs.kill()  # the trial's worker is ended; its thread returns what finished
                    runs, interrupted, waited = fut.result()
                    interrupted = True
                except BaseException:  # no GPU left (WorkerError): never a trial left RUNNING
                    if trial is not None:  # a walk's is written only when measured: the walk comes to it again
                        self._record(trial, point, "interrupted", "the campaign stopped while it ran", None, {})
                    raise
                blocked = time.monotonic() - t0
                # Where the time went, on the parent's clock: what it did while the trial ran is the trial's time
                # when the trial outlasted it (the parent then waited), the search's when it did not.
                self.account.seconds["trials" if blocked > 0.001 else "search"] += hidden[0]
                self.account.seconds["builds"] += min(blocked, waited)
                self.account.seconds["trials"] += max(0.0, blocked - waited)
                hidden[0] = 0.0
                if not interrupted and room(1) > 0 and pending:
                    flying = launch()  # the next trial starts now; this one is recorded while it runs
                t1 = time.monotonic()
                interrupted = self.finish(trial, point, runs[0] if runs else None) or interrupted  # the study's storage
                if flying is not None:
                    hidden[0] += time.monotonic() - t1
                else:
                    self.account.seconds["search"] += time.monotonic() - t1
                self.flying = {point_key(flying[1])} if flying is not None else set()
                self.emit("trial", {"done": self.evaluated(), "budget": p.budget, "best": self.best(),
                                    "builds": self.pool.queued(), "elapsed": time.monotonic() - self.account.started,
                                    "gpu_busy": self.meter.percent if self.meter is not None else None,
                                    "last": self.known.get(point_key(point))})
                if interrupted:
                    return True
            return False
        except KeyboardInterrupt:
            if flying is not None:
                self.runs.kill()
            return True
        finally:
            if flying is not None:  # interrupted while it ran: its thread ends with its worker
                try:
                    runs, _, _ = flying[3].result()
                    self.finish(flying[0], flying[1], runs[0] if runs else None)
                except BaseException:  # noqa: BLE001
                    self._record(flying[0], flying[1], "interrupted", "the campaign was interrupted while it ran",
                                 None, {})
            runner.shutdown(wait=False)
            for trial, point, _ in pending:  # asked but not run: asked again first when the campaign resumes
                if trial is not None:  # a walk's are not written: the walk comes to them again
                    self._record(trial, point, "interrupted", "asked but not run before the campaign stopped",
                                 None, {})
            self.pool.close()

    def _gpu_trial(self, req: Any) -> tuple[list[Any], bool, float]:
        """One trial on the GPU (the trial thread): wait for its build, run it; (points, interrupted, seconds
        waited for the build)."""
        waited = 0.0
        fut = self.builds.pop(id(req), None)
        if fut is not None:
            t0 = time.monotonic()
            try:
                fut.result()
            except CancelledError:  # cancelled at the pool's close: the worker builds it
                pass
            waited = time.monotonic() - t0
        t0 = time.monotonic()
        runs, interrupted = self.runs.run([req])
        self.account.in_workers += time.monotonic() - t0
        return runs, interrupted, waited

    def loop_cluster(self) -> bool:
        """:meth:`loop` on a Dask cluster: up to two trials in flight per GPU worker (one running, one
        waiting, so no GPU idles between trials), each recorded the moment it comes back, and as many more asked
        ahead as the workers have build threads, their kernels built on those threads meanwhile (a proposal's
        cubin is there before its turn); True when interrupted or the scheduler went away (:attr:`lost`).

        The time account is the parent's clock: waiting for the cluster is the trials' time, the rest (asks,
        the study's storage) the search's; the trials' own seconds in the workers are summed beside it."""
        opts, p = self.p.opts, self.p
        deadline = None if opts.time_s is None else self.account.started + opts.time_s
        capacity = 2 * self.runs.slots()
        ahead = self.runs.ahead() if self.walking else min(self.runs.ahead(), MODEL_AHEAD)
        flying: dict[Any, list[tuple[Any, dict[str, str], Any]]] = {}  # future -> its (trial, point, request)s
        pending: deque = deque()  # asked, its build under way, not yet sent to a GPU worker
        seconds = self.account.seconds
        mark = time.monotonic()
        try:
            while True:
                late = deadline is not None and time.monotonic() >= deadline
                out = [t for batch in flying.values() for t in batch]
                left = p.budget - self.evaluated() - len(out) - len(pending)
                per_task = self._per_task(left + len(pending), capacity)
                while not late and left > 0 and len(out) + len(pending) < (capacity + ahead) * per_task:
                    queue = deque([*out, *pending])
                    if not self.ask(queue):
                        break
                    pending.append(queue.pop())
                    left -= 1
                while pending and len(flying) < capacity:
                    batch = [pending.popleft() for _ in range(min(per_task, len(pending)))]
                    flying[self.runs.submit([req for _, _, req in batch])] = batch
                if not flying:
                    return False
                now = time.monotonic()
                seconds["search"] += now - mark
                fut, got = self.runs.next_done()
                mark = time.monotonic()
                seconds["trials"] += mark - now
                self.account.in_workers = self.runs.worker_seconds
                batch = flying.pop(fut)
                for i, (trial, point, _) in enumerate(batch):
                    if isinstance(got, BaseException):  # Dask gave up on it (its workers kept dying)
                        why = f"the cluster could not run it: {type(got).__name__}: {str(got).splitlines()[0][:300] if str(got) else ''}"
                        self._record(trial, point, "failed", why, None, {})
                    else:  # a trial the task did not reach (an interrupt) is recorded interrupted
                        self.finish(trial, point, got[i] if i < len(got) else None)
                    self.emit("trial", {"done": self.evaluated(), "budget": p.budget, "best": self.best(),
                                        "builds": len(pending), "elapsed": time.monotonic() - self.account.started,
                                        "last": self.known.get(point_key(point)), "in_flight": len(flying)})
        except KeyboardInterrupt:
            return True
        except ClusterLost as exc:
            self.lost = exc
            return True
        finally:
            if flying or pending:
                self.runs.cancel(list(flying))
            for trial, point, _ in [*(t for b in flying.values() for t in b), *pending]:  # asked again first on resume
                if trial is not None:  # a walk's are not written: the walk comes to them again
                    self._record(trial, point, "interrupted", "in flight when the campaign stopped", None, {})
            self.pool.close()

    def _per_task(self, left: int, capacity: int) -> int:
        """Trials a cluster task takes: one for a model-based strategy and until the first results say how long
        a trial takes in its worker; a walk's as many as fill :data:`BATCH_S`, at most :data:`BATCH_MAX`, and no
        more than shares the ``left`` trials among the ``capacity`` tasks in flight (every GPU kept busy)."""
        done = self.evaluated() - self.resumed
        if not self.walking or done <= 0 or self.account.in_workers <= 0:
            return 1
        fits = int(BATCH_S / (self.account.in_workers / done))
        return max(1, min(BATCH_MAX, fits, -(-left // max(1, capacity))))
