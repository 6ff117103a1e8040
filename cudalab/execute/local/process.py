"""The parent's handle on a worker process: start it, send it operations, read its events, end it.

A :class:`WorkerProcess` is a ``python -m cudalab.worker`` child in a process group of its own (the
terminal's Ctrl-C reaches the parent, which decides), with its events read by a thread into a queue,
so the parent can wait with a timeout (its watchdog) and stay responsive to signals. What the worker
prints (a kernel's ``printf``, a library's warning) is passed on to stderr, and its last lines are
kept to say why a worker died.
"""

from __future__ import annotations

import atexit
import collections
import os
import queue
import signal
import subprocess
import sys
import threading
from typing import Any, Callable, Sequence

from cudalab.worker.protocol import MAX_LINE, decode, encode

#: The event a worker's queue gets when its pipe closes (it exited or was killed).
EOF_EVENT = {"ev": "eof"}
#: Lines of a worker's output kept for the message when it dies.
TAIL_LINES = 20
#: Output a worker prints that is the machinery's, not the user's (pycuda's clean-up after a fault).
NOISE = ("PyCUDA WARNING: a clean-up operation failed", "cuMemFree failed", "cuModuleUnload failed",
         "cuCtxPop failed", "cuMemFreeHost failed")


def worker_argv(device: int, fd: int, energy: bool = False) -> list[str]:
    """``python -m cudalab.worker`` for GPU ``device``, its events on ``fd``."""
    argv = [sys.executable, "-m", "cudalab.worker", "--device", str(device), "--fd", str(fd)]
    return argv + (["--energy"] if energy else [])


def worker_env() -> dict[str, str]:
    """A worker's environment: this one, with this cudalab first on its path (also when not installed) and
    its output unbuffered. (Light on purpose: a worker is started before the parent imports much.)"""
    env = dict(os.environ)
    import cudalab  # noqa: PLC0415  (imported already: this module is part of it)

    root = os.path.dirname(os.path.dirname(os.path.abspath(cudalab.__file__)))  # the folder that holds the package
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class WorkerProcess:
    """One worker process: operations in, events out (:mod:`cudalab.worker.protocol`).

    Args:
        device: the GPU it serves.
        argv: its command given the event pipe's file descriptor (default :func:`worker_argv`).
        energy: ``--energy`` (the worker then needs NVML).
        echo: where the worker's own output goes (default: stderr; None drops it).
    """

    def __init__(self, device: int, argv: Callable[[int], Sequence[str]] | None = None, energy: bool = False,
                 echo: Any = "stderr"):
        self.device = device
        self.events: queue.Queue = queue.Queue()
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self._echo = sys.stderr if echo == "stderr" else echo
        r, w = os.pipe()
        cmd = list(argv(w) if argv else worker_argv(device, w, energy))
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, pass_fds=(w,), env=worker_env(),
                                         start_new_session=True)
        finally:
            os.close(w)
        self.pid = self.proc.pid
        self._events = os.fdopen(r, "rb")
        self._threads = [threading.Thread(target=self._read_events, daemon=True),
                         threading.Thread(target=self._read_output, daemon=True)]
        for t in self._threads:
            t.start()

    # --- reading ---------------------------------------------------------------------------------
    def _read_events(self) -> None:
        try:
            while True:
                line = self._events.readline(MAX_LINE)
                if not line:
                    break
                msg = decode(line)
                if msg is not None:  # half a line from a worker that died writing it is no message
                    self.events.put(msg)
        except (OSError, ValueError):
            pass
        finally:
            self.events.put(dict(EOF_EVENT))

    def _read_output(self) -> None:
        out = self.proc.stdout
        if out is None:
            return
        for raw in iter(out.readline, b""):
            text = raw.decode("utf-8", errors="replace").rstrip("\n")
            if any(n in text for n in NOISE):
                continue
            self.tail.append(text)
            if self._echo is not None:
                try:
                    print(text, file=self._echo, flush=True)
                except (OSError, ValueError):
                    pass

    def next(self, timeout: float | None) -> dict[str, Any] | None:
        """The next event, or None when none came within ``timeout`` seconds."""
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    # --- writing and ending ------------------------------------------------------------------------
    def send(self, **msg: Any) -> bool:
        """Send one operation; False when the worker can no longer read (its end is an ``eof`` event)."""
        stdin = self.proc.stdin
        if stdin is None:
            return False
        try:
            stdin.write(encode(msg))
            stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def kill(self) -> None:
        """End the worker now (SIGKILL to its process group: a hung kernel cannot hold it)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                try:
                    self.proc.kill()
                except ProcessLookupError:
                    pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # a process in the kernel's uninterruptible sleep: leave it
            pass
        self._close_pipes()

    def close(self, wait_s: float = 5.0) -> dict[str, Any] | None:
        """Ask the worker to finish and return its ``bye`` (telemetry), killing it if it does not answer.

        A worker that said ``bye`` is left to end by itself: the driver's tear-down of its context took
        150 ms on an H100, after the table was ready. It is waited for (:func:`reap`) before another
        worker starts on its GPU, whose memory it may still hold until then.
        """
        bye = None
        if self.proc.poll() is None and self.send(op="exit"):
            try:
                stdin = self.proc.stdin
                if stdin is not None:
                    stdin.close()
            except OSError:
                pass
            bye = last_bye(self.next, wait_s)
        if bye is not None and self.proc.poll() is None:
            _ENDING.append(self)
            return bye
        self.kill()
        return bye

    def _close_pipes(self) -> None:
        for t in self._threads:
            t.join(timeout=1)
        for f in (self.proc.stdin, self.proc.stdout, self._events):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def exit_text(self, wait_s: float = 0.0) -> str:
        """How the process ended (``exit code 1``, ``killed by SIGSEGV``), or '' while it runs; waits up to
        ``wait_s`` for it to end (its pipe closes a moment before the process is gone)."""
        if wait_s > 0:
            try:
                self.proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                pass
        rc = self.proc.poll()
        if rc is None:
            return ""
        if rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exit code {rc}"

    def last_words(self) -> str:
        """The worker's last line of output that says something ('' when it said nothing)."""
        for line in reversed(self.tail):
            if line.strip():
                return line.strip()
        return ""


def last_bye(next_event: Callable[[float], dict[str, Any] | None], wait_s: float) -> dict[str, Any] | None:
    """After ``exit``: read events until the ``bye`` (a worker's last event), the pipe closes, or none comes
    for ``wait_s``; the ``bye`` or None."""
    while True:
        ev = next_event(wait_s)
        if ev is None or ev["ev"] == "eof":
            return None
        if ev["ev"] == "bye":
            return ev


Spawn = Callable[[int, bool], Any]

#: Workers started by :func:`prestart` before the command was parsed, by (device, energy).
_EARLY: dict[tuple[int, bool], WorkerProcess] = {}

#: Commands that run no family on a GPU in this process's own workers (a tool starts its own children).
NO_WORKER = {"list", "compile", "report", "compare", "ncu", "sanitize"}


#: Workers that said ``bye`` and are ending by themselves (:meth:`WorkerProcess.close`).
_ENDING: list[WorkerProcess] = []


def reap(device: int | None = None, wait_s: float = 5.0) -> None:
    """Wait for the ending workers of GPU ``device`` (all when None) to be gone; kill one that takes longer."""
    for w in [w for w in _ENDING if device is None or w.device == device]:
        _ENDING.remove(w)
        try:
            w.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            pass
        w.kill()


def spawn(device: int, energy: bool = False) -> WorkerProcess:
    """A worker for GPU ``device``: the one :func:`prestart` started for it, else a new one once the
    previous worker of that GPU is gone (tests replace this with fake workers)."""
    early = _EARLY.pop((device, energy), None)
    if early is not None and early.proc.poll() is None:
        return early
    reap(device)
    return WorkerProcess(device, energy=energy)


def pci_bus_id(device: int, timeout_s: float = 30.0) -> str | None:
    """The PCI bus id of CUDA device ``device`` (how NVML finds the same GPU), asked of a short-lived GPU
    process (:mod:`cudalab.worker.busid`: the parent never loads the CUDA driver); None when it cannot say
    (the worker that opens the GPU then says why in its own words)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "cudalab.worker.busid", str(int(device))], capture_output=True,
                              text=True, env=worker_env(), timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    bus = proc.stdout.strip()
    return bus if proc.returncode == 0 and bus else None


def visible_gpus() -> int | None:
    """How many GPUs a worker will see, asked without a CUDA context: the entries of
    ``CUDA_VISIBLE_DEVICES`` where it is set, else NVML's count; None when neither can say."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        n = 0
        for item in env.split(","):  # CUDA stops at the first entry that is not a device
            item = item.strip()
            if not item or item.startswith("-"):
                break
            n += 1
        return n or None
    try:
        import pynvml  # noqa: PLC0415  (the telemetry extra)

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount()) or None
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no binding, no driver
        return None


def early_plan(argv: Sequence[str]) -> tuple[int, bool] | None:
    """Whether a command line will want a worker, and for which (GPU, --energy); None when it will not or
    when only parsing can tell (``--devices``, ``--exclusive`` and ``--lock-clocks`` ask NVML first)."""
    args = list(argv)
    command = next((a for a in args if not a.startswith("-")), None)
    if command is None or command in NO_WORKER or (command == "tune" and any(a.startswith("--replay") for a in args)):
        return None
    if any(a in ("-h", "--help", "--version", "--exclusive") or a.startswith(("--devices", "--lock-clocks", "--cluster"))
           for a in args):
        return None
    device = 0
    for i, a in enumerate(args):
        value = a.split("=", 1)[1] if a.startswith("--device=") else args[i + 1] if a == "--device" and i + 1 < len(args) else None
        if value is not None:
            if not (value.isascii() and value.isdigit()):  # '²'.isdigit() is True; int('²') fails
                return None  # the parser will say what is wrong with it
            device = int(value)
    return device, "--energy" in args


def prestart(argv: Sequence[str]) -> None:
    """Start the worker a command line will want now, before the parent imports and parses: its Python,
    pycuda and CUDA context come up while the parent does its own work. Unused, it is killed at exit."""
    plan = early_plan(argv)
    if plan is None or plan in _EARLY:
        return
    try:
        _EARLY[plan] = WorkerProcess(plan[0], energy=plan[1])
    except OSError:  # the command will start one itself and say what is wrong
        return
    atexit.register(_kill_unused)


def _kill_unused() -> None:
    for w in list(_EARLY.values()):
        w.kill()
    _EARLY.clear()
