"""The GPU worker: the only process of a run that holds a CUDA context.

``python -m cudalab.worker --device N --fd K`` opens GPU ``N`` (NVML telemetry first, then the
context), says ``ready`` on file descriptor ``K`` and serves the operations its parent writes to its
standard input (:mod:`cudalab.worker.protocol`). Every finished row is sent at once, so nothing a
worker measured is lost when a later kernel kills it.

A kernel that breaks the CUDA context (an illegal address, ``__trap()``, a misaligned access: any
sticky error) ends its row as ``failed`` with the error named and the next step suggested; the
worker then says ``lost`` and exits at once, without the clean-up that would fail call after call
on a dead context. Its parent starts a fresh one for the rows that remain. A kernel that never
finishes is the parent's to end: it kills the worker when no beat came for too long
(:mod:`cudalab.worker.heartbeat`).
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import sys
import threading
from typing import Any, BinaryIO, Callable, TextIO

from cudalab.worker import heartbeat
from cudalab.errors import CudalabError
from cudalab.records.results import FAILED, PASSED, SKIPPED, Result
from cudalab.worker import early, rowout
from cudalab.worker.protocol import decode, encode, pack_array


class ContextLost(Exception):
    """The CUDA context of this worker is broken: no further GPU work can run in it."""


class Channel:
    """The worker's event pipe: whole lines, one writer at a time."""

    def __init__(self, out: BinaryIO):
        self.out = out
        self.lock = threading.Lock()

    def send(self, **msg: Any) -> None:
        """Write one event."""
        data = encode(msg)
        with self.lock:
            self.out.write(data)
            self.out.flush()


def open_gpu(index: int, energy: bool = False) -> tuple[Any, Any, str]:
    """NVML for GPU ``index`` (before the context: who else computes there), then the GPU itself.

    Returns:
        (device, telemetry or None, the note why telemetry is off).
    """
    from cudalab.worker import gpu  # noqa: PLC0415  (only a worker imports pycuda)
    from cudalab.instruments import telemetry  # noqa: PLC0415  (only a worker imports pycuda)
    from cudalab.worker import warm  # noqa: PLC0415  (only a worker imports pycuda)
    from cudalab import catalog  # noqa: F401, PLC0415  (what a point needs, while the GPU starts)
    from cudalab.worker import executor  # noqa: F401, PLC0415  (what a point needs, while the GPU starts)

    try:
        catalog.load_catalog()  # its files parsed now: the first point's precheck reads them from a cache
    except Exception:  # the point's own precheck says what is wrong
        pass

    try:
        bus = gpu.pci_bus_id(index)
    except Exception:  # the device is opened next and says what is wrong in its own words
        bus = None
    # a worker started its GPU at once (cudalab.worker.warm): who computed before its context came then
    opened = telemetry.open_telemetry(index, bus, energy=energy, baseline=warm.before_context())
    try:
        dev = gpu.Device(index)
    except BaseException:
        if opened.telemetry is not None:
            opened.telemetry.close()
        raise
    if opened.telemetry is not None:
        opened.telemetry.after_open()
    dev.build_own_soon()
    return dev, opened.telemetry, opened.note


def context_error(dev: Any) -> str:
    """Why the device's context can run nothing more ('' when it is healthy): after a sticky error
    every call into the context fails, a synchronize included."""
    try:
        dev.synchronize()
    except CudalabError as exc:  # GpuError: the driver's error, named
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ""


def suggestion(req: Any, variant: str) -> str:
    """The command that finds where a kernel faulted."""
    user = next((k for k in req.add if k.name == variant), None)
    sel = f"--variant none --add {user.text}" if user is not None else f"--variant {variant}"
    return f"cudalab sanitize {req.family} {sel} --tool memcheck"


class Worker:
    """Serves one parent: runs points and rooflines on one open GPU."""

    def __init__(self, chan: Channel, dev: Any, tele: Any | None, note: str = ""):
        self.chan = chan
        self.dev = dev
        self.tele = tele
        self.note = note
        self.current: tuple[int, Any, Any] | None = None  # (point id, FamilyRun, Context) kept for its roofline
        # the last point's host inputs and reference (an executor.Drawn), for a next point that would draw the
        # same: a tune campaign's trials share problem and seed (cudalab.worker.kept says why and when)
        self.kept: Any = None

    def serve(self, inp: TextIO, first: tuple[str, Any] | None = None) -> None:
        """Answer operations until ``exit``, the end of input, or a lost context.

        ``first``: an operation read before the GPU was open, and its point's run with the inputs drawn
        then (:func:`cudalab.worker.early.first_point`), answered before the rest.
        """
        lines = itertools.chain([first[0]] if first else [], inp)
        prepared = first[1] if first else None
        for line in lines:
            msg = decode(line)
            if msg is None:
                continue
            op = msg.get("op")
            if op == "exit":
                break
            try:
                if op == "point":
                    self.point(int(msg["id"]), msg["plan"], prepared)
                elif op == "roofline":
                    self.roofline(int(msg["id"]), msg["plan"])
                elif op == "info":
                    self.info(int(msg.get("mib") or 1024), bool(msg.get("bandwidth", True)))
                elif op == "ceilings":
                    self.ceilings()
            except ContextLost as exc:
                self.chan.send(ev="lost", reason=str(exc))
                return
            prepared = None
        summary = self.tele.summary() if self.tele is not None else {"note": self.note}
        self.chan.send(ev="bye", telemetry=dict(summary, worker_peak_rss_mib=_peak_rss_mib()))

    def _run(self, pid: int, plan: dict, prepared: Any = None, reuse: bool = False) -> tuple[Any, Any]:
        """The point's run; ``reuse``: the kept run of point ``pid`` when there is one (its roofline op).

        A point op never reuses: a long-lived session (tune's) numbers each call's points from 0 again, and a
        trial that took the kept run of the trial before it ran that trial's configuration (seen on an H100:
        every trial of a campaign timed as its first)."""
        from cudalab.plan import Plan  # noqa: PLC0415  (imported while the GPU starts: see open_gpu)
        from cudalab.worker import executor  # noqa: PLC0415  (imported while the GPU starts: see open_gpu)

        if reuse and self.current is not None and self.current[0] == pid:
            return self.current[1], self.current[2]
        self.release()
        kinds: dict[str, str] = {}
        early.settle()  # no row runs beside an import the first point started

        def stage(variant: str, what: str) -> None:
            watch = what == "running" and kinds.get(variant, "kernel") != "host"
            self.chan.send(ev="stage", variant=variant, stage=what, watch=watch)

        if prepared is not None:  # planned and its inputs drawn while the GPU opened: now it gets the GPU
            run = prepared
            run.device, run.on_stage, run.telemetry = self.dev, stage, self.tele
        else:
            run = executor.FamilyRun(Plan.from_dict(plan), self.dev, on_stage=stage, telemetry=self.tele,
                                     kept=self.kept)
        self.kept = run.drawn  # a set this point does not take goes now, before it draws and checks its memory
        kinds.update({v.name: v.kind for v in run.variants})
        ctx = executor.Context(self.dev, run.rng)
        self.current = (pid, run, ctx)
        return run, ctx

    def point(self, pid: int, plan: dict, prepared: Any = None) -> None:
        """Run a planned point's variants, one ``row`` event each, then ``done`` (or ``refused``);
        ``prepared``: its run, read and its inputs drawn before the GPU was open."""
        try:
            run, ctx = self._run(pid, plan, prepared)
        except CudalabError as exc:
            self.chan.send(ev="refused", id=pid, message=str(exc), exit_code=exc.exit_code)
            return

        def on_result(row: Result) -> None:
            # in this order: the synchronize empties the device's printf buffer (a faulted row's too), then
            # the row takes what it printed, before it is sent and before a lost context ends the worker
            lost = context_error(self.dev) if row.status not in (PASSED, SKIPPED) else ""
            if lost:
                row = _lost_row(row, run.req)
            row = printed.attach(row)
            out = run.outputs.get(row.variant)
            self.chan.send(ev="row", row=row.to_dict(), output=None if out is None else pack_array(out))
            if lost:
                raise ContextLost(lost)

        run.on_result = on_result
        printed = rowout.RowOutput()
        try:
            with printed:  # a kernel's printf is its row's (the table shows a few lines, the JSON all)
                run.run_variants(ctx)
        except ContextLost:
            raise
        except CudalabError as exc:  # the memory plan does not fit now: the point, not a row
            self.chan.send(ev="refused", id=pid, message=str(exc), exit_code=exc.exit_code)
            return
        finally:
            self.kept = run.drawn  # what it drew (or took), for the next point
        lost = context_error(self.dev)
        if lost:  # an error no row caught (a family's clean-up, say): a fresh worker goes on
            raise ContextLost(lost)
        inputs = {k: pack_array(v) for k, v in run.inputs.items()} if run.req.keep_outputs else None
        self.chan.send(ev="done", id=pid, inputs=inputs)

    def roofline(self, pid: int, plan: dict) -> None:
        """Measure the copy roofline of a point; a failure is the roofline's reason, never a row."""
        try:
            run, ctx = self._run(pid, plan, reuse=True)
        except CudalabError as exc:
            self.chan.send(ev="roofline", id=pid, roofline=None, reason=str(exc))
            return
        roof, why = run.measure_roofline(ctx)
        self.release()
        lost = context_error(self.dev)
        self.chan.send(ev="roofline", id=pid, roofline=roof.to_dict() if roof else None, reason=lost or why)
        if lost:
            raise ContextLost(lost)

    def info(self, mib: int, bandwidth: bool) -> None:
        """``cudalab info``: the GPU's facts, its free memory, and its copy roofline on ``mib`` MiB."""
        from cudalab.bench import Protocol  # noqa: PLC0415  (imported while the GPU starts: see open_gpu)
        from cudalab.worker.executor import measure_roofline  # noqa: PLC0415  (likewise)

        free = int(self.dev.mem_info()[0])
        roof, why = None, ""
        if bandwidth:
            try:
                roof = measure_roofline(self.dev, min(mib * 2**20, free // 4), Protocol())
            except CudalabError as exc:
                why = str(exc)
        self.chan.send(ev="info", device=self.dev.info.to_dict(), free=free,
                       roofline=roof.to_dict() if roof else None, reason=why)

    def ceilings(self) -> None:
        """``cudalab roofline --measure``: the GPU's FMA, tensor and memory ceilings (the parent caches them)."""
        from cudalab.worker import ceilings  # noqa: PLC0415  (imported while the GPU starts: see open_gpu)

        try:
            c = ceilings.measure_all(self.dev)
        except CudalabError as exc:
            self.chan.send(ev="ceilings", ceilings=None, reason=str(exc).splitlines()[0])
            return
        self.chan.send(ev="ceilings", ceilings=c.to_dict(), reason="")

    def release(self) -> None:
        """Free the buffers of the point kept for its roofline."""
        if self.current is not None:
            try:
                self.current[2].release()
            except Exception:  # a broken context frees nothing; the process ends soon after
                pass
            # its host arrays go now (only self.kept may hold them on), not when the cyclic collector comes
            # round: the run's row callback refers back to the run, and a gigabyte input would outlive it
            run = self.current[1]
            run.inputs, run.reference, run.drawn = {}, None, None
            self.current = None


def _peak_rss_mib() -> float | None:
    """This worker's peak resident memory (MiB): the host side of a run's memory, kept in its record (the
    parent no longer waits for the worker to end, so a tool that measures the parent does not see it)."""
    try:
        import resource  # noqa: PLC0415  (POSIX only)

        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux
    except (ImportError, OSError):
        return None


def _lost_row(row: Result, req: Any) -> Result:
    """A row whose kernel broke the context: failed, the CUDA error named, the next step given."""
    from dataclasses import replace  # noqa: PLC0415

    reason = row.reason or "the CUDA context was lost"
    return replace(row, status=FAILED, reason=f"{reason} (find where: {suggestion(req, row.variant)})")


def serve(inp: TextIO, out: BinaryIO, index: int, energy: bool = False,
          open_device: Callable[[int, bool], tuple[Any, Any, str]] = open_gpu,
          opening: Callable[[], bool] | None = None) -> None:
    """Open the GPU, say ``ready`` (or ``error``) and serve until told to stop.

    Args:
        inp: the operations, one JSON line each.
        out: where events go.
        index: the GPU.
        energy: ``--energy`` was asked for (NVML must be there).
        open_device: opens the GPU (tests pass a fake).
        opening: whether the GPU is still coming up in the background (:func:`cudalab.worker.warm.opening`); while
            it is, a point the parent sent already has its inputs drawn (:mod:`cudalab.worker.early`).
    """
    chan = Channel(out)
    heartbeat.install(lambda: chan.send(ev="beat"))
    first = early.first_point(inp, opening) if opening is not None else None
    try:
        dev, tele, note = open_device(index, energy)
    except CudalabError as exc:
        chan.send(ev="error", message=str(exc), exit_code=exc.exit_code)
        return
    except Exception as exc:  # the driver's own words, one line
        chan.send(ev="error", message=f"GPU {index} could not be opened: {exc}", exit_code=2)
        return
    count = getattr(dev, "device_count", None)
    chan.send(ev="ready", device=dev.info.to_dict(), pid=os.getpid(), count=count() if callable(count) else 1)
    Worker(chan, dev, tele, note).serve(inp, first)


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when its parent dies (a killed cudalab leaves no GPU process behind)."""
    try:
        import ctypes  # noqa: PLC0415

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the parent's kill and the closed pipe still end it
        pass


def _profiler() -> Any:
    """A running cProfile when ``CUDALAB_PROFILE`` names a folder (a developer's question: where does a
    trial's time go in the worker), else None."""
    folder = os.environ.get("CUDALAB_PROFILE", "")
    if not folder or not os.path.isdir(folder):
        return None
    import cProfile  # noqa: PLC0415

    prof = cProfile.Profile()
    prof.enable()
    return prof


def main(argv: list[str] | None = None) -> int:
    """Worker entry point (the parent starts it; not a command for people)."""
    parser = argparse.ArgumentParser(prog="python -m cudalab.worker")
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--energy", action="store_true")
    args = parser.parse_args(argv)
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C and ends this process itself
    out = os.fdopen(args.fd, "wb", buffering=0)
    try:
        from cudalab.worker import warm  # noqa: PLC0415

        profile = _profiler()
        try:
            serve(sys.stdin, out, args.device, args.energy, opening=warm.opening)
        finally:
            if profile is not None:  # CUDALAB_PROFILE=DIR: where a worker's time goes (docs/testing.md)
                profile.disable()
                profile.dump_stats(os.path.join(os.environ["CUDALAB_PROFILE"], f"worker-{os.getpid()}.prof"))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        # No interpreter clean-up: after a sticky error every pycuda free fails and says so, and a
        # healthy context is released by the driver when the process ends anyway.
        os._exit(0)
