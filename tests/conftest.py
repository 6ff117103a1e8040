"""Shared fixtures and markers.

* Markers: ``nvcc`` (skips without the CUDA compiler, found as cudalab finds it: PATH, $CUDA_HOME,
  $CUDA_PATH, /usr/local/cuda), ``gpu`` / ``ncu`` / ``sanitizer`` (skip without their hardware or tool).
* The nvcc build cache: a fresh folder per session, so CI and first runs build everything; set
  ``CUDALAB_TEST_CACHE=1`` (or a folder) to keep it between local runs (``~/.cache/cudalab-tests``):
  builds are keyed on the source, defines, flags and nvcc version, so a kept cache is never stale.
* Fixtures: ``invoke`` (the CLI through click's runner), ``one_line_exit_2`` (the bad-input
  contract), ``no_gpu`` (opening a GPU fails the test), ``family_tree`` (a private CUDALAB_SRC copy).
* Under pytest-xdist (``-n auto --dist worksteal``, the README's command): the workers share one build
  cache, the slow tests start first so that the run ends on quick ones (an idle worker steals from the
  end of the other's queue), and a test on the GPU holds a lock so that no two workers time kernels on
  it at once. Nothing here needs xdist: GPU machines run serially.
"""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each xdist worker is one core's work (-n auto): NumPy's BLAS threads on top of it only contend with
    # the other workers (and spin after each call). Before NumPy is imported, here and in every process
    # the tests start; a value the caller set is kept.
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

#: Fake GPU workers (fixtures ``fake_workers`` and ``inline_worker``) for the parent's tests.
pytest_plugins = ["fake_workers"]


def test_cache_dir(tmp_path_factory: Any) -> Path:
    """Where this session's nvcc builds go: fresh unless ``CUDALAB_TEST_CACHE`` asks to keep them."""
    keep = os.environ.get("CUDALAB_TEST_CACHE", "").strip()
    if keep and keep != "0":
        folder = Path.home() / ".cache" / "cudalab-tests" if keep == "1" else Path(keep).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    if os.environ.get("PYTEST_XDIST_WORKER"):  # pytest -n N: the workers share one cache (writes are atomic)
        folder = tmp_path_factory.getbasetemp().parent / "cudalab-cache"
        folder.mkdir(exist_ok=True)
        return folder
    return tmp_path_factory.mktemp("cudalab-cache")


test_cache_dir.__test__ = False  # a helper, not a test


@pytest.fixture(scope="session", autouse=True)
def _build_cache(tmp_path_factory, request):
    """Keep the tests' nvcc builds out of the user's cache folder (and the user's builds out of the tests);
    in a serial run, start building what the tests will ask for on the idle cores (build_prefetch.py: the
    builds tests/data/build-manifest.json lists; CUDALAB_RECORD_BUILDS=1 rewrites that list). Under xdist
    each worker builds its share of that list at the idle priority (pytest_collection below)."""
    before = {k: os.environ.get(k) for k in ("CUDALAB_CACHE", "PYTHONDONTWRITEBYTECODE")}
    os.environ["CUDALAB_CACHE"] = str(test_cache_dir(tmp_path_factory))
    # The Pythons the tests start (fake GPU workers, the CLI in a subprocess, a notebook kernel: about 80)
    # keep cudalab's compiled bytecode in its __pycache__ folders, as Python does by default; with
    # PYTHONDONTWRITEBYTECODE (set on these machines) each compiled cudalab from source again, 0.1-0.15 s
    # apiece. Not PYTHONPYCACHEPREFIX: under a prefix Python ignores the .pyc files installed beside
    # numpy, pandas, matplotlib, IPython and the standard library, and compiled about 1,700 modules from
    # source each session (the prefix was tried: it cost more than it saved).
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    helper = None
    if not nvcc_reason() and not os.environ.get("PYTEST_XDIST_WORKER"):
        import build_prefetch as B

        from cudalab import build

        if os.environ.get("CUDALAB_RECORD_BUILDS"):  # refresh tests/data/build-manifest.json
            helper = B.Recorder(build, os.environ["CUDALAB_CACHE"])
        elif any(item.get_closest_marker("nvcc") or "compile" in item.nodeid for item in request.session.items):
            helper = B.Prefetch(build, os.environ["CUDALAB_CACHE"], B.manifest_builds(), max(1, (os.cpu_count() or 2) - 1))
        if helper is not None:
            helper.start()
    yield
    if helper is not None:
        helper.stop()
    for k, v in before.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@functools.lru_cache(maxsize=1)
def gpu_reason() -> str:
    """'' when a GPU is usable, else why not."""
    try:
        from cudalab.worker import gpu

        if gpu.device_count() == 0:
            return "no CUDA GPU"
    except Exception as exc:  # GpuUnavailableError, or pycuda missing entirely
        return f"no GPU: {exc}"
    return ""


@functools.lru_cache(maxsize=1)
def nvcc_reason() -> str:
    """'' when nvcc is found where cudalab looks for it, else why not."""
    from cudalab import build
    from cudalab.errors import ToolMissingError

    try:
        build.find_nvcc()
    except ToolMissingError as exc:
        return str(exc)
    return ""


# --- xdist: the first worker rewrites the test modules, the others load its bytecode ---------------------
# pytest rewrites every test module's asserts on import (about 5 s of CPU for this suite) and, with
# PYTHONDONTWRITEBYTECODE (set on these machines), keeps nothing: each worker did it all again. Now the
# rewritten modules are written to tests/__pycache__ (pytest's default; ignored by git), every xdist
# worker but gw0 waits for gw0's collection and loads them from there, and a later local run finds them
# too. Meanwhile, and then whenever a core has nothing else to do, each worker builds kernels.

def _shared_run_folder(config) -> Path | None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return config._tmp_path_factory.getbasetemp().parent  # what test_cache_dir shares too


def pytest_configure(config):
    sys.dont_write_bytecode = False  # before collection: the rewriter asks it when it writes


_builds = []  # this xdist worker's background builds (build_prefetch.py), from collection to the end


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    folder = _shared_run_folder(session.config)
    if folder is None:
        return
    if not nvcc_reason():  # the manifest's builds, this worker's share, at the idle priority
        import build_prefetch as B

        from cudalab import build

        index, count = int(os.environ["PYTEST_XDIST_WORKER"][2:]), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", 1))
        keys = B.manifest_builds()[index::count]
        _builds.append(B.Prefetch(build, str(test_cache_dir(session.config._tmp_path_factory)), keys, 1, idle=True))
        _builds[-1].start()
    if os.environ["PYTEST_XDIST_WORKER"] == "gw0":
        return
    deadline = time.monotonic() + 60  # gw0 failing to collect must not hang the others
    while not (folder / "gw0-collected").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def pytest_collection_finish(session):
    folder = _shared_run_folder(session.config)
    if folder is not None and os.environ["PYTEST_XDIST_WORKER"] == "gw0":
        (folder / "gw0-collected").touch()


def pytest_sessionfinish(session):
    while _builds:
        _builds.pop().stop()


#: Tests that mostly wait (a worker's timeout, a heartbeat, watch's polling, a notebook kernel, a
#: terminal demo): under xdist they start first, while the other worker's tests and the idle-priority
#: builds (pytest_collection above) keep both cores busy; at the end they left a core idle for ~20 s.
WAITING_FIRST = ("test_magic.py::test_the_example_notebook_runs_headless", "test_watch_demo.py::", "test_workers.py::",
                 "test_watch.py::")
#: Then the slow ones (nvcc builds: seconds each, plots, simulated sorts), so that the run ends on quick
#: tests instead of one worker finishing a long one while the other has nothing left (worksteal: an idle
#: worker steals from the end of the other's queue).
SLOW_NEXT = ("test_saved_runs.py::", "test_sort_onesweep.py::")


def _order(item) -> int:
    if any(s in item.nodeid for s in WAITING_FIRST):
        return 0
    return 1 if item.get_closest_marker("nvcc") is not None or any(s in item.nodeid for s in SLOW_NEXT) else 2


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker sorts alike (xdist checks that they agree)
        items.sort(key=_order)  # stable: each group keeps its order
    for item in items:
        if "nvcc" in item.keywords and nvcc_reason():
            item.add_marker(pytest.mark.skip(reason=nvcc_reason()))
        needs = [m for m in ("gpu", "ncu", "sanitizer") if m in item.keywords]
        if not needs:
            continue
        reason = gpu_reason()
        if not reason and "ncu" in needs and not shutil.which("ncu"):
            reason = "ncu not on PATH"
        if not reason and "sanitizer" in needs and not shutil.which("compute-sanitizer"):
            reason = "compute-sanitizer not on PATH"
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _one_test_on_the_gpu(request, tmp_path_factory):
    """Under xdist, a test on the GPU (marker gpu, ncu or sanitizer) holds the session's GPU lock: timings
    and ncu must not share the GPU with another worker's test. Serial runs take no lock."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not any(
            request.node.get_closest_marker(m) for m in ("gpu", "ncu", "sanitizer")):
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / "gpu.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


@pytest.fixture(scope="session")
def device():
    """The GPU (session-wide: one context for all GPU tests)."""
    from cudalab.worker import gpu

    dev = gpu.Device(0)
    yield dev
    dev.close()


# --- the CLI ------------------------------------------------------------------------------------------

@pytest.fixture
def invoke() -> Callable[..., Any]:
    """Run ``cudalab ARGS...`` through click's runner: ``invoke("report", path)`` or ``invoke([...])``."""
    from click.testing import CliRunner

    from cudalab.cli import cli

    def run(*args: Any, **kwargs: Any) -> Any:
        argv = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else [str(a) for a in args]
        return CliRunner().invoke(cli, argv, **kwargs)

    return run


def check_one_line_exit_2(res: Any, fragment: str = "") -> None:
    """The bad-input contract: exit 2, no traceback, exactly one line of output and it starts
    ``cudalab: `` and holds ``fragment``."""
    assert res.exit_code == 2, f"exit {res.exit_code}: {res.output!r} {res.exception!r}"
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cudalab: "), res.output
    assert fragment in lines[0], res.output


@pytest.fixture
def one_line_exit_2() -> Callable[[Any, str], None]:
    """:func:`check_one_line_exit_2`, as a fixture."""
    return check_one_line_exit_2


@pytest.fixture
def no_gpu(monkeypatch):
    """Opening the GPU fails the test: what it guards must be refused before."""
    from cudalab.worker import gpu

    def opened(*_a, **_k):
        raise AssertionError("the GPU was opened before the bad input was refused")

    monkeypatch.setattr(gpu, "Device", opened)


@pytest.fixture
def family_tree(tmp_path, monkeypatch) -> Callable[..., Path]:
    """``family_tree("transpose", ...)``: a private copy of those families under CUDALAB_SRC, which the
    test may break; returns the root."""
    from cudalab import catalog

    root = tmp_path / "cuda_src"
    source = catalog.src_root()

    def make(*families: str) -> Path:
        for fam in families:
            shutil.copytree(source / fam, root / fam)
        monkeypatch.setenv("CUDALAB_SRC", str(root))
        return root

    return make


@pytest.fixture
def gpu_alone() -> None:
    """Skip a test that needs the GPU to itself (it checks what cudalab says of *other* processes computing there)
    when pytest-xdist runs several test processes on that GPU: they are those other processes."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        pytest.skip("needs the GPU alone: other test processes compute on it (run it without -n)")
