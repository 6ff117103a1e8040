"""Where a command's wall time goes, as a timeline across its processes (the user's, the worker, a tool's child).

    python3 scripts/probe_timeline.py [--runs 2] [--json FILE] -- transpose --variant bankopt --n 16384

The command runs ``--runs`` times as a user types it (``python3 -m cudalab ...``); the last run carries a
sitecustomize (on PYTHONPATH, so every Python process the command starts has it) that wraps a fixed list
of cudalab functions and logs when each call began and ended, by process, on one wall clock. The
profile in the benchmark record says how much time each function took; this says when, which is what
overlapping the worker's start with the parent's work needs. Nothing here runs in a user's command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: module -> functions (``Class.method`` for methods) whose calls the timeline shows.
TARGETS = {
    "cudalab.execute.local.process": ["prestart", "WorkerProcess.__init__", "WorkerProcess.close", "reap"],
    "cudalab.worker.devarray": ["DeviceArray.upload", "DeviceArray._upload_staged"],
    "cudalab.families.reduce": ["_exact_check", "Reduce.setup", "Reduce.reference", "Reduce.make_inputs"],
    "cudalab.families.transpose": ["Transpose.setup"],
    "cudalab.bench": ["measure", "measure_until"],
    "cudalab.cli": ["main"],
    "cudalab.cli.family": ["run_family", "print_header", "show"],
    "cudalab.execute.local.drive": ["Session.run", "Session._point", "Session._roofline", "Session._ready"],
    "cudalab.worker.serve": ["open_gpu", "Worker.point", "Worker.roofline", "Worker._run"],
    "cudalab.worker.gpu": ["_driver", "pci_bus_id", "Device.__init__", "Device.compile", "Device.staging", "Device.synchronize",
                    "Device._build_internal", "Device.flush_l2", "Device.spin"],
    "cudalab.plan": ["precheck"],
    "cudalab.instruments.telemetry": ["open_telemetry", "import_nvml", "Telemetry.after_open", "Telemetry.summary", "compute_pids"],
    "cudalab.worker.warm": ["_open", "take_staging", "wait"],
    "cudalab.hostwork": ["uniform", "integers", "exact_diff", "copy_rows"],
    "cudalab.worker.executor": ["FamilyRun.__init__", "FamilyRun.check_memory", "FamilyRun.prepare", "FamilyRun.run_variant",
                       "FamilyRun._drive",
                       "FamilyRun.measure_roofline", "Context.upload", "measure_roofline"],
    "cudalab.worker.verify": ["verified_launches"],
    "cudalab.worker.sampling": ["time_case"],
    "cudalab.ncu.profile": ["profile", "read_report"],
    "cudalab.worker.child": ["main"],
    "cudalab.execute.toolchild": ["run_child"],
    "cudalab.build": ["build", "compile_cubin"],
}
#: modules whose import (execution) time is shown as a span of its own.
IMPORTS = ("numpy", "pycuda.driver", "rich.console", "click", "cudalab.cli.app", "cudalab.worker.executor", "cupy",
           "pynvml", "cudalab.families")

SITE = r'''
import functools, json, os, sys, threading, time
import importlib.abc, importlib.machinery
_LOG = os.environ["CUDALAB_PROBE_LOG"]
_TARGETS = json.loads(os.environ["CUDALAB_PROBE_TARGETS"])
_IMPORTS = set(json.loads(os.environ["CUDALAB_PROBE_IMPORTS"]))
_named = [False]

def _write(rec):
    rec["pid"] = os.getpid()
    if not _named[0] and sys.argv and sys.argv[0] not in ("", "-m", "-c"):
        _named[0] = True
        _write({"kind": "argv", "argv": sys.argv[:6]})
    fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(rec) + "\n").encode())
    finally:
        os.close(fd)

_write({"kind": "mark", "name": "site", "t": time.time(), "ppid": os.getppid()})

def _wrap(fn, name):
    @functools.wraps(fn)
    def inner(*a, **k):
        t0 = time.time()
        try:
            return fn(*a, **k)
        finally:
            _write({"kind": "span", "name": name, "t0": t0, "t1": time.time(),
                    "thread": threading.current_thread().name})
    return inner

def _patch(module, names):
    for dotted in names:
        owner, _, attr = dotted.rpartition(".")
        obj = getattr(module, owner, None) if owner else module
        fn = getattr(obj, attr, None) if obj is not None else None
        if callable(fn):
            setattr(obj, attr, _wrap(fn, module.__name__.replace("cudalab.", "") + ":" + dotted))

class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _TARGETS and name not in _IMPORTS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module
        def exec_module(module, _run=run, _name=name):
            t0 = time.time()
            _run(module)
            if _name in _IMPORTS:
                _write({"kind": "span", "name": "import " + _name, "t0": t0, "t1": time.time(), "thread": "import"})
            if _name in _TARGETS:
                _patch(module, _TARGETS[_name])
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _Finder())
'''


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    t0 = time.time()
    rc = subprocess.run([sys.executable, "-m", "cudalab", *argv], env=env, stdout=subprocess.DEVNULL).returncode
    return time.time() - t0, rc


def timeline(log: Path, t_start: float) -> tuple[list[dict], dict[int, str]]:
    recs = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    names: dict[int, str] = {}
    for r in recs:
        if r["kind"] == "argv":
            a = r["argv"]
            names[r["pid"]] = ("worker" if "cudalab.worker" in " ".join(a) or a[0].endswith("worker/__main__.py")
                               else "child" if "child" in " ".join(a) else "user" if "cudalab" in " ".join(a)
                               else Path(a[0]).name or "python")
    rows = []
    for r in recs:
        if r["kind"] == "mark":
            rows.append({"pid": r["pid"], "name": "python start (site)", "t0": r["t"] - t_start, "dur": 0.0})
        elif r["kind"] == "span":
            rows.append({"pid": r["pid"], "name": r["name"], "t0": r["t0"] - t_start, "dur": r["t1"] - r["t0"],
                         "thread": r.get("thread", "")})
    rows.sort(key=lambda x: x["t0"])
    return rows, names


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="runs in all; the last is traced (default 2)")
    ap.add_argument("--json", help="write the timeline here")
    ap.add_argument("--min-ms", type=float, default=2.0, help="hide spans shorter than this (default 2 ms)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    argv = [a for a in args.command if a != "--"]
    # as the benchmark runs them: bytecode cached as an installed package has it (the GPU machines set
    # PYTHONDONTWRITEBYTECODE, which would make every run compile NumPy from source)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", str(Path(tempfile.gettempdir()) / "cudalab-pyc"))
    walls = []
    for _ in range(max(0, args.runs - 1)):
        walls.append(run_once(argv, env)[0])
    with tempfile.TemporaryDirectory() as d:
        Path(d, "sitecustomize.py").write_text(SITE)
        log = Path(d, "log.jsonl")
        tenv = dict(env, CUDALAB_PROBE_LOG=str(log), CUDALAB_PROBE_TARGETS=json.dumps(TARGETS),
                    CUDALAB_PROBE_IMPORTS=json.dumps(list(IMPORTS)),
                    PYTHONPATH=d + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""))
        t_start = time.time()
        wall, rc = run_once(argv, tenv)
        rows, names = timeline(log, t_start)
    print(f"cudalab {' '.join(argv)}: untraced runs {', '.join(f'{w:.2f}' for w in walls)} s; traced {wall:.2f} s (rc {rc})")
    print(f"{'start ms':>9} {'dur ms':>8}  {'process':<14} span")
    for r in rows:
        if r["dur"] * 1e3 < args.min_ms and not r["name"].startswith("python start"):
            continue
        who = f"{names.get(r['pid'], '?')}:{r['pid']}"
        thread = f" [{r['thread']}]" if r.get("thread") not in ("", "MainThread", None) else ""
        print(f"{r['t0'] * 1e3:9.1f} {r['dur'] * 1e3:8.1f}  {who:<14} {r['name']}{thread}")
    print(f"{wall * 1e3:9.1f} {'':>8}  {'':<14} command ended")
    if args.json:
        Path(args.json).write_text(json.dumps({"argv": argv, "walls": walls, "traced": wall, "rows": rows,
                                               "names": {str(k): v for k, v in names.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
