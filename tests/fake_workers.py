"""Fake GPU workers for the parent's tests (a pytest plugin: ``pytest_plugins`` in conftest).

- ``fake_workers``: real processes that speak the worker protocol without a GPU
  (:mod:`fake_worker_main`): they pass, hang, die, send half a row or lose their context on cue.
- ``inline_worker``: the real worker code (:func:`cudalab.worker.serve.serve`) in a thread of the test
  process, so a test's fake ``gpu.Device`` or NVML is the one the worker opens.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cudalab.execute.local import process as W
from cudalab.worker.protocol import decode, encode

FAKE_MAIN = str(Path(__file__).with_name("fake_worker_main.py"))


def children(pid: int) -> set[int]:
    """The processes ``pid`` started (its GPU workers), as ``pgrep -P`` sees them now."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return {int(x) for x in out.split()}


def still_running(pids: set[int], wait_s: float = 2.0) -> set[int]:
    """Those of ``pids`` still alive after up to ``wait_s`` (a killed process is gone, or a zombie)."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = set()
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if state not in ("Z", "X"):
                alive.add(pid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def signal_once_saved(proc: subprocess.Popen, out: Path, variant: str, signum: int, wait_s: float, settle_s: float,
                      timeout: float) -> tuple[float, str, str, set[int]]:
    """Wait until ``variant``'s row is in ``out`` (the run saved it and went on to one that hangs), let it
    hang ``settle_s``, send ``signum``; returns (seconds to the end, stdout, stderr, the workers it had)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if out.exists() and variant in out.read_text():
            break
        time.sleep(0.05)
    time.sleep(settle_s)
    workers = children(proc.pid)
    t0 = time.monotonic()
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=timeout)
    return time.monotonic() - t0, stdout, stderr, workers


class ThreadWorker:
    """:class:`cudalab.execute.local.process.WorkerProcess`'s interface over a thread running the real worker loop."""

    def __init__(self, device: int, energy: bool = False):
        from cudalab.worker import serve as S

        self.device = device
        self.pid = os.getpid()
        self.events: queue.Queue = queue.Queue()
        self.tail: list[str] = []
        r, w = os.pipe()
        self._ops = os.fdopen(w, "wb", buffering=0)
        inp = os.fdopen(r, "r", encoding="utf-8")
        events = self.events

        class Out:
            buf = b""

            def write(self, data: bytes) -> None:
                self.buf += data
                while b"\n" in self.buf:
                    line, self.buf = self.buf.split(b"\n", 1)
                    msg = decode(line + b"\n")
                    if msg is not None:
                        events.put(msg)

            def flush(self) -> None:
                pass

        def main() -> None:
            try:
                S.serve(inp, Out(), device, energy)
            finally:
                inp.close()
                events.put(dict(W.EOF_EVENT))

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()

    def next(self, timeout):
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def send(self, **msg: Any) -> bool:
        try:
            self._ops.write(encode(msg))
            return True
        except (OSError, ValueError):
            return False

    def kill(self) -> None:
        try:
            self._ops.close()
        except OSError:
            pass
        self.thread.join(timeout=5)

    def close(self, wait_s: float = 5.0):
        bye = W.last_bye(self.next, wait_s) if self.send(op="exit") else None
        self.kill()
        return bye

    def exit_text(self, wait_s: float = 0.0) -> str:
        return "" if self.thread.is_alive() else "exit code 0"

    def last_words(self) -> str:
        return ""


@pytest.fixture
def inline_worker(monkeypatch):
    """Workers run in-process (threads): the test's fake GPU and NVML are what they open."""
    started: list[ThreadWorker] = []

    def spawn(device: int, energy: bool = False) -> ThreadWorker:
        w = ThreadWorker(device, energy)
        started.append(w)
        return w

    monkeypatch.setattr(W, "spawn", spawn)
    yield started
    for w in started:
        w.kill()


@pytest.fixture
def fake_workers(monkeypatch):
    """Returns ``use(behaviour)``: from then on workers are :mod:`fake_worker_main` processes acting on
    ``behaviour`` (variant -> pass/hang/die/half/lost/slow); the started ones are listed in ``use.started``."""
    started: list[W.WorkerProcess] = []

    def use(behaviour: dict[str, str] | None = None, echo: Any = None) -> Any:
        monkeypatch.setenv("FAKE_WORKER", json.dumps(behaviour or {}))
        tests = str(Path(__file__).parent)
        monkeypatch.setenv("PYTHONPATH", tests + os.pathsep + os.environ.get("PYTHONPATH", ""))

        def spawn(device: int, energy: bool = False) -> W.WorkerProcess:
            w = W.WorkerProcess(device, argv=lambda fd: [sys.executable, FAKE_MAIN, "--fd", str(fd),
                                                         "--device", str(device)], echo=echo)
            started.append(w)
            return w

        monkeypatch.setattr(W, "spawn", spawn)
        # a fake GPU is no GPU of this machine: a campaign builds nothing before its fake worker says its arch
        from cudalab.instruments import driverquery  # noqa: PLC0415

        monkeypatch.setattr(driverquery, "arch_here", lambda: None)
        return use

    use.started = started
    yield use
    for w in started:
        w.kill()
