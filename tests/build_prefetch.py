"""Builds the test session will need, run by nvcc on the CPU time the tests leave idle.

About half of the suite's CPU time is nvcc, one build after another. At the start of a session the
builds it will ask for are queued: the list tests/data/build-manifest.json keeps
(``CUDALAB_RECORD_BUILDS=1 python -m pytest`` rewrites it; a stale list only costs builds nobody asks
for). Background threads take them from the end of the queue, each through a child process that keeps
the session's cache folder, while the tests ask from its front; a test that asks for a build still
queued takes it over, one being built is waited for, and every build then comes from the session's
cache as before. What a test sees does not change: ``build.build`` is the same call with the same result.

- A serial run (``python -m pytest``, as on the GPU machines): one thread per core but one.
- Under pytest-xdist every core runs tests, so each worker's one thread builds at the idle priority
  (``SCHED_IDLE``): only on a core no test wants, while another worker's test sleeps on a timeout or
  waits for a subprocess, or while the workers collect. A test waiting for that build frees its core.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from cudalab.build.restated import drop_restated

Key = tuple[str, tuple[tuple[str, str], ...], str]
# The child: one key a line in, one line out when it is built (a failed build is left to the test that
# needs it: it builds again and sees the error itself).
_LOOP = """
import json, os, sys
from pathlib import Path
from cudalab import build
if sys.argv[1:] == ["idle"]:  # nvcc and its stages inherit the policy
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)
for line in sys.stdin:
    source, defines, arch = json.loads(line)
    try:
        build.build(Path(source), dict(defines), arch)
    except Exception:
        pass
    print("done", flush=True)
"""


def _key(source: Any, defines: Any, arch: str) -> Key:
    # What the build cache keys on: define sets that only restate the source's defaults are one build.
    defines = drop_restated(Path(source), {str(k): str(v) for k, v in dict(defines).items()})
    return str(Path(source)), tuple(sorted(defines.items())), arch


class Prefetch:
    """Queued builds, background threads, and the ``build.build`` that coordinates with them."""

    def __init__(self, build_module: Any, cache: str, keys: list[Key], threads: int, idle: bool = False):
        self.build = build_module
        self.real: Callable[..., Any] = build_module.build
        self.cache = cache
        self.idle = idle
        self.queue = collections.deque(keys)
        self.running: dict[Key, threading.Event] = {}
        self.children: list[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._work, daemon=True, name=f"nvcc-prefetch-{i}")
                        for i in range(threads)]

    def start(self) -> None:
        self.build.build = self.wrapped
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        """At the session's end: take nothing more from the queue, and end the build under way."""
        with self.lock:
            self.queue.clear()
            children = list(self.children)
        self.build.build = self.real
        for child in children:
            try:
                os.killpg(child.pid, signal.SIGKILL)  # nvcc's stages with it
            except OSError:
                pass

    def _work(self) -> None:
        # One child per thread builds what it is sent: the build cache is named by the environment, which
        # tests change (monkeypatch.setenv) while this thread runs; the child keeps the session's.
        # TMPDIR: what a killed cicc leaves goes with the session's folder, not into /tmp.
        tmp = Path(self.cache) / "prefetch-tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        child = subprocess.Popen([sys.executable, "-c", _LOOP, *(["idle"] if self.idle else [])],
                                 env=dict(os.environ, CUDALAB_CACHE=self.cache, TMPDIR=str(tmp)),
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                 start_new_session=True)
        with self.lock:
            self.children.append(child)
        try:
            while True:
                with self.lock:
                    if not self.queue:
                        return
                    key = self.queue.pop()  # from the end: the tests ask from the front, so the two meet midway
                    done = self.running[key] = threading.Event()
                try:
                    child.stdin.write(json.dumps(key) + "\n")
                    child.stdin.flush()
                    child.stdout.readline()  # "" if the child died: the test builds it itself
                finally:
                    done.set()
        except OSError:
            return
        finally:
            child.kill()
            child.wait()

    def wrapped(self, source: Any, defines: Any, arch: str = "sm_90") -> Any:
        if os.environ.get("CUDALAB_CACHE") == self.cache:  # tests with a private cache are left alone
            key = _key(source, defines, arch)
            with self.lock:
                if key in self.queue:
                    self.queue.remove(key)  # ours now: built below, in this thread
                done = self.running.get(key)
            if done is not None:
                done.wait()
        return self.real(source, defines, arch)


# --- the manifest: what the rest of the suite builds ------------------------------------------------------

MANIFEST = Path(__file__).parent / "data" / "build-manifest.json"
ROOT = Path(__file__).resolve().parent.parent


def manifest_builds() -> list[Key]:
    """The builds recorded by the last ``CUDALAB_RECORD_BUILDS=1 python -m pytest`` (sources relative to the
    checkout), in the order the tests asked for them; ones whose source is gone are left out. A stale list
    costs only builds nobody asks for, on a core that was idle."""
    try:
        rows = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return []
    out = []
    for source, defines, arch in rows:
        path = ROOT / source
        if path.is_file():
            out.append(_key(path, dict(defines), arch))
    return out


class Recorder:
    """Wraps ``build.build`` to note every build a test asks for in the session's cache (for the manifest)."""

    def __init__(self, build_module: Any, cache: str):
        self.build, self.cache = build_module, cache
        self.inner: Callable[..., Any] = build_module.build
        self.keys: list[Key] = []

    def start(self) -> None:
        self.build.build = self.wrapped

    def wrapped(self, source: Any, defines: Any, arch: str = "sm_90") -> Any:
        if os.environ.get("CUDALAB_CACHE") == self.cache:
            key = _key(source, defines, arch)
            if key not in self.keys:
                self.keys.append(key)
        return self.inner(source, defines, arch)

    def stop(self) -> None:
        self.build.build = self.inner
        rows = []
        for source, defines, arch in self.keys:
            try:
                rel = Path(source).resolve().relative_to(ROOT)
            except ValueError:
                continue  # a test's own temporary source
            rows.append([str(rel), [list(d) for d in defines], arch])
        MANIFEST.write_text(json.dumps(rows, indent=0) + "\n")
