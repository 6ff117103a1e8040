"""The trial loop of a tuning campaign (:class:`cudalab.tuning.drive._Campaign`'s, apart for its size): trials
sent to the campaign's executor as tasks, two in flight for each GPU worker (one running, one waiting, so no GPU
idles between trials), each recorded the moment it comes back, and more asked ahead while the GPUs work, their
kernels built meanwhile. The same loop on either engine: the executor says how many GPUs, how many builds ahead,
how many trials a task."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from cudalab.errors import ClusterLost
from cudalab.execute import timeline
from cudalab.tuning import reference
from cudalab.tuning.result import point_key

__all__ = ["TrialLoops", "BUILD_POLL_S", "MODEL_AHEAD", "WALK_AHEAD"]

#: The most trials a model-based strategy is asked ahead of its results: each one asked blind is a proposal the
#: model made without the results still to come.
MODEL_AHEAD = 8
#: How many times its executor's build threads a walk (which no result informs) is asked ahead. Its builds queue in
#: the order the GPU takes them, so a long one starts while the GPU is well behind it: asked only as far as there
#: were threads, the H200's cold 30-trial matmul warptile campaign waited 4.3 s of its 16.9 for builds, most for
#: kernels that took nvcc 5-8 s, begun when the trial before them came back, where the others took about 2.
WALK_AHEAD = 4
#: How often the loop looks again for a trial whose build has ended, while one is being built and a GPU slot is free
#: (seconds): the most a built trial waits to be sent.
BUILD_POLL_S = 0.005


class TrialLoops:
    """The loop; the campaign's state and its ask, finish and record are the class's that uses it."""

    def loop(self) -> bool:
        """Run trials until the budget, the time or the space is spent; True when interrupted or the engine went
        away (:attr:`lost`).

        Up to two tasks in flight per GPU worker, and more trials asked ahead: a model's as many as the executor
        builds at once (at most :data:`MODEL_AHEAD`), a walk's :data:`WALK_AHEAD` times that (a proposal's cubin is
        there before its turn). A walk's trials go several a task where a task costs the
        engine time of its own (:meth:`_per_task`); a model-based strategy's one a task, so it is told each result
        as it comes.

        A trial is never queued behind a task in flight while nvcc still works on it (:meth:`_take`): with a slot
        free and every trial waiting still being built, the loop looks again every :data:`BUILD_POLL_S` and sends
        the first whose build ends, whichever it is (with nothing in flight, the oldest: the GPU waits either way,
        and the engine watches its workers meanwhile). The campaign's
        library row (:mod:`cudalab.tuning.reference`) goes first where no trial asked is built yet: it is GPU work
        the campaign does anyway, and a cold campaign's GPU would otherwise wait for nvcc (the H200's first matmul
        warptile build took about a second longer than its worker took to open). Where a trial is built it waits
        for the campaign's end, as it always did.

        The time account is the parent's clock: waiting for a task is the trials' time (less what the task waited
        for its builds ahead: the builds'); what the parent did while tasks ran is the trials' time too when it then waited for one (the GPU was the
        bottleneck), the search's when it did not; with nothing in flight it is the search's. The tasks' own
        seconds in the workers are summed beside it."""
        opts, p = self.p.opts, self.p
        ex = self.runs.executor
        deadline = None if opts.time_s is None else self.account.started + opts.time_s
        capacity = 2 * ex.slots()
        ahead = WALK_AHEAD * ex.ahead() if self.walking else min(ex.ahead(), MODEL_AHEAD)
        flying: dict[Any, list[tuple[Any, dict[str, str], Any]]] = {}  # handle -> its (trial, point, request)s
        pending: deque = deque()  # asked, its build under way, not yet sent to a GPU worker
        seconds = self.account.seconds
        mark, hidden, waited = time.monotonic(), 0.0, ex.waited_builds()
        polled = 0.0  # the parent's waits for a task since the last one ended (looking again for builds between)
        library = self.library[1]  # the library row's request while the loop may still run it (None: it will not)
        timeline.mark("loop")  # CUDALAB_TIMELINE: the time account's start
        try:
            while True:
                idle = not flying  # nothing on the GPUs since the last task came back: the search's time alone
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
                    batch = self._take(pending, per_task, fill=not flying and library is None)
                    if batch:
                        reqs = [req for _, _, req in batch]
                    elif library is not None:  # nothing built yet: the library row while nvcc works
                        reqs, library = [library], None
                    else:  # every trial waiting is still being built: each is sent as its build ends (below)
                        break
                    timeline.mark("send", *reqs)
                    flying[self.runs.submit(reqs)] = batch  # the library row's task has no trial: []
                now = time.monotonic()
                if idle:
                    seconds["search"] += now - mark
                else:
                    hidden += now - mark
                if not flying:
                    return False
                # a free slot and trials still building: back as soon as a build ends, to send it behind the task
                done = self.runs.next_done(BUILD_POLL_S if pending and len(flying) < capacity else None)
                mark = time.monotonic()
                polled += mark - now
                if done is None:  # no task ended: one waited for as before, once it ends (its builds' share too)
                    continue
                handle, got = done
                blocked, polled = polled, 0.0
                seconds["trials" if blocked > 0.001 else "search"] += hidden
                hidden = 0.0
                builds = min(blocked, max(0.0, ex.waited_builds() - waited))
                waited = ex.waited_builds()
                seconds["builds"] += builds
                seconds["trials"] += blocked - builds
                self.account.in_workers = ex.in_workers()
                batch, events = flying.pop(handle), []
                if not batch:  # the library row's
                    self.ref = reference.reading(self.library[0], got)
                    continue
                with self.writes_held():  # the task's trials in one transaction, reported once written
                    for i, (trial, point, _) in enumerate(batch):
                        if isinstance(got, BaseException):  # the engine gave up on it (its workers kept dying)
                            why = f"the cluster could not run it: {type(got).__name__}: {str(got).splitlines()[0][:300] if str(got) else ''}"
                            self._record(trial, point, "failed", why, None, {})
                        else:  # a trial the task did not reach (an interrupt) is recorded interrupted
                            self.finish(trial, point, got[i] if i < len(got) else None)
                        events.append({"done": self.evaluated(), "budget": p.budget, "best": self.best(),
                                       "builds": ex.builds_queued(), "in_flight": len(flying),
                                       "elapsed": time.monotonic() - self.account.started,
                                       "gpu_busy": self.meter.percent if self.meter is not None else None,
                                       "last": self.known.get(point_key(point))})
                for event in events:
                    self.emit("trial", event)
        except KeyboardInterrupt:
            return True
        except ClusterLost as exc:
            self.lost = exc
            return True
        finally:
            if flying:
                self.runs.cancel(list(flying))
            ex.stop_builds()
            for trial, point, _ in [*(t for b in flying.values() for t in b), *pending]:  # asked again first on resume
                if trial is not None:  # a walk's are not written: the walk comes to them again
                    self._record(trial, point, "interrupted", "in flight when the campaign stopped", None, {})

    def _take(self, pending: deque, count: int, fill: bool) -> list:
        """The next ``count`` trials (at most) to send, taken out of ``pending``: those whose builds ahead have
        finished, in the order they were asked; with none and ``fill`` (nothing in flight: the GPU waits either
        way), the oldest, whose build began first. nvcc's time varies with a trial's defines (the H200's cold
        matmul warptile campaign: about 2 s a build, a few 5-8 s): a slow one is passed by while later ones are
        ready, and a trial whose build is under way is never queued behind a task in flight, where its GPU would
        wait for it at its turn while builds that ended later were ready. The order of a campaign's trials decides
        nothing: a walk's are its points whatever their order, and a model is told each result as it comes."""
        taken: list = []
        rest: list = []
        for t in pending:  # asked at most 4 x the build threads ahead, a task's worth each: one pass, no search
            (taken if len(taken) < count and self.runs.built(t[2]) else rest).append(t)
        fill_in = rest[:count] if fill and not taken else []
        pending.clear()
        pending.extend(rest[len(fill_in):])
        return taken + fill_in

    def _per_task(self, left: int, capacity: int) -> int:
        """Trials a task takes: one for a model-based strategy and until the first results say how long a trial
        takes in its worker; a walk's as many as the executor finds worth a task (:meth:`Executor.batch`), and no
        more than shares the ``left`` trials among the ``capacity`` tasks in flight (every GPU kept busy)."""
        done = self.evaluated() - self.resumed
        if not self.walking or done <= 0 or self.account.in_workers <= 0:
            return 1
        fits = self.runs.executor.batch(self.account.in_workers / done)
        return max(1, min(fits, -(-left // max(1, capacity))))
