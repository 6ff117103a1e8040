"""Builds the test session will need, run by nvcc on the cores the tests leave idle.

Most of the suite is single-threaded Python; most of its wall time was nvcc building every kernel
variant (tests/test_compile_all.py) one after another. At the start of a session these builds are
queued for background threads (one per core but one; each build runs in a child process that keeps the
session's cache folder), which take them from the end of the list while the
tests ask from its front; a test that asks for a build still queued takes
it over, one already running is waited for, and every build then comes from the session's cache as
before. What a test sees does not change: ``build.build`` is the same call with the same result.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

Key = tuple[str, tuple[tuple[str, str], ...], str]
# A failed build is left to the test that needs it: it builds again and sees the error itself.
_BUILD = ("import json, sys; from pathlib import Path; from cudalab import build; "
          "build.build(Path(sys.argv[1]), dict(json.loads(sys.argv[2])), sys.argv[3])")


def _key(source: Any, defines: Any, arch: str) -> Key:
    return str(Path(source)), tuple(sorted((str(k), str(v)) for k, v in dict(defines).items())), arch


def compile_all_builds() -> list[Key]:
    """What tests/test_compile_all.py builds: every kernel variant at its family's default launch, sm_90."""
    from cudalab import catalog, runner
    from cudalab import launch as L
    from cudalab.errors import CudalabError
    from cudalab.families import load

    keys: list[Key] = []
    for spec in catalog.load_catalog().values():
        fam = load(spec.module)
        problem = runner.make_problem(spec, fam, runner.RunRequest(family=spec.name))
        for v in spec.variants:
            if v.kind != "kernel":
                continue
            try:
                lau = runner.plan_launch(v, fam, problem, None, None, L.DeviceLimits())
            except CudalabError:
                continue  # the test says why
            key = _key(spec.directory / v.source, dict(lau.defines), "sm_90")
            if key not in keys:
                keys.append(key)
    return keys


class Prefetch:
    """Queued builds, background threads, and the ``build.build`` that coordinates with them."""

    def __init__(self, build_module: Any, cache: str, keys: list[Key], threads: int):
        self.build = build_module
        self.real: Callable[..., Any] = build_module.build
        self.cache = cache
        self.queue = collections.deque(keys)
        self.running: dict[Key, threading.Event] = {}
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._work, daemon=True, name=f"nvcc-prefetch-{i}")
                        for i in range(threads)]

    def start(self) -> None:
        self.build.build = self.wrapped
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        with self.lock:
            self.queue.clear()
        self.build.build = self.real

    def _work(self) -> None:
        while True:
            with self.lock:
                if not self.queue:
                    return
                key = self.queue.pop()  # from the end: the tests ask from the front, so the two meet midway
                done = self.running[key] = threading.Event()
            try:
                # In a process of its own: the build cache is named by the environment, which tests
                # change (monkeypatch.setenv) while this thread runs; a child keeps the session's.
                source, defines, arch = key
                subprocess.run([sys.executable, "-c", _BUILD, source, json.dumps(defines), arch],
                               env=dict(os.environ, CUDALAB_CACHE=self.cache), capture_output=True, check=False)
            finally:
                done.set()

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
