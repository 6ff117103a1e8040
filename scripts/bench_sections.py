"""Sections of the benchmark record that run whole commands or Nsight Compute (see benchmark.py).

Each section returns plain dicts (kept in the JSON record) and, through ``markdown``, the lines the
record shows. Every figure comes from the run that writes the record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from cudalab import plan as planning
from cudalab import memplan
from cudalab.families import load

CLI = [sys.executable, "-m", "cudalab"]

class TableCommand(NamedTuple):
    """One command of the time-to-table section."""

    argv: tuple[str, ...]
    target_s: float | None  # None: timed and shown as information, not judged
    saves: bool = True      # a family run: takes --json, and its GPU work is read from what it saved


#: Time to table: whole commands as a user types them, machine warm. The targets are issue 32's (issue 11's
#: were 2.5 s and 3 s for the first two); `copy` and the full transpose stay as information.
TABLE_COMMANDS = (
    TableCommand(("transpose", "--variant", "bankopt", "--n", "16384"), 1.2),
    TableCommand(("reduce", "--all"), 1.5),
    TableCommand(("ncu", "smem-square"), 3.0, saves=False),
    TableCommand(("list",), 0.25, saves=False),
    TableCommand(("--help",), 0.3, saves=False),
    TableCommand(("copy",), None),
    TableCommand(("transpose", "--n", "16384"), None),
)

#: Saved runs kept with the record (fixtures for compare and plots, issue 13).
SAVED_RUNS = (
    ("transpose", ["transpose", "--n", "16384"]),
    ("transpose-sweep", ["transpose", "--n", "4k,8k,16k", "--variant", "naive,bankopt,tiled-64x8,vec4-64"]),
    ("reduce", ["reduce", "--n", "2^24", "--dtype", "float64"]),
)


#: Where the commands' Python bytecode is cached. An installed package has its ``.pyc`` files; the
#: GPU machines set PYTHONDONTWRITEBYTECODE and ship NumPy without them, so every command there
#: compiled ~300 modules from source (0.6 s of each wall time, no user pays it twice).
PYCACHE = Path(tempfile.gettempdir()) / "cudalab-bench-pycache"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def _timed(argv: list[str], out: Path | None = None) -> tuple[float, subprocess.CompletedProcess, int]:
    """Run ``cudalab ARGV`` (a fresh process, bytecode cached as an install has it); return wall
    seconds, the process and its peak RSS in KiB."""
    cmd = ["/usr/bin/time", "-f", "MAXRSS %M", *CLI, *argv] + (["--json", str(out)] if out else [])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    wall = time.perf_counter() - t0
    rss = 0
    for line in proc.stderr.splitlines():
        if line.startswith("MAXRSS "):
            rss = int(line.split()[1])
    return wall, proc, rss


def _saved_points(argv: list[str]) -> tuple[subprocess.CompletedProcess, list]:
    """``cudalab ARGV --json`` in a fresh process (:func:`_timed`): the process and the points it saved
    ([] where it saved none)."""
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "run.json"
        _, proc, _ = _timed(argv, saved)
        try:
            return proc, list(json.loads(saved.read_text()).get("points", ()))
        except (OSError, ValueError):
            return proc, []


def worker_rss_kib(path: Path | None) -> int:
    """The peak RSS (KiB) a saved run's GPU workers reported (0 when none did): the parent returns at its
    worker's bye without waiting for it, so /usr/bin/time on the parent no longer counts the worker."""
    try:
        dev = json.loads(path.read_text()).get("device") or {} if path is not None else {}
    except (OSError, ValueError):
        return 0
    mibs = [(d.get("telemetry") or {}).get("worker_peak_rss_mib") or 0 for d in [dev, *(dev.get("devices") or [])]]
    return int(max(mibs) * 1024)


def gpu_seconds(record: dict) -> float:
    """GPU work in a saved run: every timed sample (batches counted whole) plus a warm-up and a
    verified launch per row."""
    total = 0.0
    for point in record.get("points", ()):
        for r in point.get("results", ()):
            s = r.get("stats")
            if s and r.get("kind") != "host":
                batch = int((r.get("extra") or {}).get("batch") or 1)
                total += batch * sum(s["samples"]) + 2 * s["median"]
    return total / 1e3


def table_verdict(wall_s: float, rc: int, target_s: float | None, saves: bool = True) -> bool | None:
    """Time to table: None for a command shown as information (no target), else it ended as it should (a
    family run 0 or 1: a failed row still makes a table; any other command 0) and ``wall_s`` ≤ ``target_s``."""
    if target_s is None:
        return None
    return rc in ((0, 1) if saves else (0,)) and wall_s <= target_s


def time_to_table(keep: Path, commands=TABLE_COMMANDS) -> list[dict]:
    """Each command twice (the first fills the build cache); the second run's wall time counts. Judged by
    :func:`table_verdict` (None for information rows)."""
    rows = []
    for argv, target, saves in commands:
        argv = list(argv)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "run.json" if saves else None
            first, _, _ = _timed(argv, path)
            wall, proc, rss = _timed(argv, path)
            rss = max(rss, worker_rss_kib(path))
            gpu = gpu_seconds(json.loads(path.read_text())) if path is not None and path.is_file() else None
        ok = table_verdict(wall, proc.returncode, target, saves)
        rows.append({"command": "cudalab " + " ".join(argv), "argv": argv, "wall_s": wall, "first_wall_s": first,
                     "gpu_s": gpu, "maxrss_mib": rss / 1024, "target_s": target, "saves": saves, "rc": proc.returncode,
                     "ok": ok, "tail": [ln for ln in proc.stderr.strip().splitlines() if not ln.startswith("MAXRSS ")][-2:]
                     if proc.returncode not in ((0, 1) if saves else (0,)) else []})
    return rows


# --- where the time goes: a profile of the slowest commands ---------------------------------------------

#: Put first on PYTHONPATH, this profiles every Python process of a command (the user's process, its worker,
#: ncu's child) with cProfile and writes <pid>.prof and <pid>.json into $CUDALAB_BENCH_PROFILE at exit. The
#: worker ends with os._exit (no atexit), so that is wrapped too.
SITECUSTOMIZE = """
import os as _os
_dir = _os.environ.get("CUDALAB_BENCH_PROFILE")
if _dir:
    import atexit as _atexit, cProfile as _cprofile, json as _json, sys as _sys, time as _time
    _t0 = _time.perf_counter()
    _prof = _cprofile.Profile()
    _done = []

    def _dump():
        if _done:
            return
        _done.append(1)
        _prof.disable()
        base = _os.path.join(_dir, str(_os.getpid()))
        _prof.dump_stats(base + ".prof")
        with open(base + ".json", "w") as f:
            _json.dump({"argv": list(_sys.argv), "pid": _os.getpid(), "ppid": _os.getppid(),
                        "span_s": _time.perf_counter() - _t0}, f)

    _real_exit = _os._exit

    def _exit(code, _real=_real_exit):
        try:
            _dump()
        finally:
            _real(code)

    _os._exit = _exit
    _atexit.register(_dump)
    _prof.enable()
"""

#: Entries kept per list in a profile summary.
PROFILE_TOP = 8


def parse_importtime(text: str, top: int = PROFILE_TOP) -> dict:
    """``-X importtime`` lines (``import time: self [us] | cumulative | name``, nesting by indent): the total
    (sum of own times), the module count and the own time summed by top-level package, largest first."""
    total, count, by_pkg = 0, 0, {}
    for line in text.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        try:
            own, _cum, name = line[len("import time:"):].split("|", 2)
            own_us = int(own)
        except ValueError:
            continue
        root = name.strip().split(".")[0]
        total += own_us
        count += 1
        by_pkg[root] = by_pkg.get(root, 0) + own_us
    ranked = sorted(by_pkg.items(), key=lambda kv: -kv[1])[:top]
    return {"total_s": total / 1e6, "modules": count, "by_package": [(k, v / 1e6) for k, v in ranked]}


def _label(key: tuple) -> str:
    """A pstats key (file, line, function) as a short name: built-ins as they are, else path from the package."""
    file, line, fn = key
    if file == "~" or file.startswith("<"):
        return fn if file == "~" else f"{file}:{fn}"
    parts = Path(file).parts
    for anchor in ("site-packages", "dist-packages", "cudalab"):  # a clone in a folder named cudalab has both
        if anchor in parts:
            i = len(parts) - 1 - parts[::-1].index(anchor)
            parts = parts[i + (anchor != "cudalab"):]
            break
    else:
        parts = parts[-2:]
    return f"{'/'.join(parts)}:{line}({fn})"


def _inside(file: str, package: Path) -> bool:
    """Whether ``file`` is one of ``package``'s (not merely on a path with a folder named cudalab in it: a
    clone into ~/cudalab holds its virtual environment's NumPy under /cudalab/ too)."""
    if file == "~" or file.startswith("<"):
        return False
    return Path(os.path.abspath(file)).is_relative_to(package)


def summarize_profile(path: Path, top: int = PROFILE_TOP, package: Path | None = None) -> dict:
    """One process's cProfile file: its profiled total, the functions with the most own time, and cudalab's
    functions with the most cumulative time (the entry points that cover it all come first).

    Args:
        package: the package folder whose functions are cudalab's (default: the imported cudalab's).
    """
    import pstats

    import cudalab

    package = Path(os.path.abspath(package or Path(cudalab.__file__).parent))
    st = pstats.Stats(str(path))
    total = st.total_tt
    items = [(_label(k), k, v) for k, v in st.stats.items()]
    own = sorted(items, key=lambda x: -x[2][2])[:top]
    ours = [x for x in items if _inside(x[1][0], package)]
    ours = sorted(ours, key=lambda x: -x[2][3])[:top + 4]
    return {"total_s": total, "own": [{"name": n, "s": v[2], "calls": v[1]} for n, _, v in own],
            "cudalab": [{"name": n, "s": v[3]} for n, _, v in ours]}


def _role(meta: dict, top_pid: int) -> str:
    argv0 = " ".join(meta.get("argv") or ())
    if meta.get("pid") == top_pid:
        return "user's process"
    if "worker" in argv0:
        return "worker"
    if "child" in argv0:
        return "child run (under the tool)"
    return f"process `{argv0[:60]}`"


def python_start(runs: int = 3) -> float:
    """Median wall of ``python3 -c pass`` (the interpreter's own start, site included)."""
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=_env(), capture_output=True)
        walls.append(time.perf_counter() - t0)
    return sorted(walls)[len(walls) // 2]


def profile_command(argv: list[str], timeout: float = 300) -> dict:
    """Where ``cudalab ARGV``'s time goes: ``-X importtime`` in the user's process, then the command once
    more with every Python process under cProfile (:data:`SITECUSTOMIZE`), each summarized."""
    env = _env()
    t0 = time.perf_counter()
    imp = subprocess.run([sys.executable, "-X", "importtime", *CLI[1:], *argv], capture_output=True, text=True,
                         env=env, timeout=timeout)
    imports = {**parse_importtime(imp.stderr), "wall_s": time.perf_counter() - t0, "rc": imp.returncode}
    with tempfile.TemporaryDirectory() as tmp:
        site, dump = Path(tmp) / "site", Path(tmp) / "prof"
        site.mkdir()
        dump.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        penv = dict(env, CUDALAB_BENCH_PROFILE=str(dump),
                    PYTHONPATH=str(site) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""))
        t0 = time.perf_counter()
        proc = subprocess.Popen([*CLI, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=penv)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        wall = time.perf_counter() - t0
        time.sleep(0.2)  # a worker ending after its parent finishes its dump
        procs = []
        for meta_path in sorted(dump.glob("*.json"), key=lambda q: int(q.stem)):
            try:
                meta = json.loads(meta_path.read_text())
                summary = summarize_profile(meta_path.with_suffix(".prof"))
            except (OSError, ValueError, TypeError, EOFError):
                continue
            procs.append({"role": _role(meta, proc.pid), "pid": meta.get("pid"), "span_s": meta.get("span_s", 0.0),
                          **summary})
    procs.sort(key=lambda q: q["role"] != "user's process")
    return {"command": "cudalab " + " ".join(argv), "imports": imports, "profiled_wall_s": wall,
            "profiled_rc": proc.returncode, "processes": procs,
            "tail": err.strip().splitlines()[-2:] if proc.returncode not in (0, 1) else []}


def pick_slowest(rows: list[dict]) -> list[tuple[dict, str]]:
    """The judged commands to profile: the one furthest over its target (wall / target) and, if another, the
    slowest in seconds; each with why it was picked."""
    judged = [r for r in rows if isinstance(r, dict) and r.get("target_s")]
    if not judged:
        return []
    worst = max(judged, key=lambda r: r["wall_s"] / r["target_s"])
    out = [(worst, f"the furthest from its target: {worst['wall_s'] / worst['target_s']:.2f}× it")]
    slowest = max(judged, key=lambda r: r["wall_s"])
    if slowest is not worst:
        out.append((slowest, "the slowest in seconds"))
    return out


def profile_slowest(rows: list[dict]) -> list[dict]:
    """:func:`profile_command` for each of :func:`pick_slowest`'s commands, with the interpreter's start."""
    start = python_start()
    out = []
    for row, why in pick_slowest(rows):
        try:
            got = profile_command(row["argv"])
        except Exception as exc:  # one profile's failure keeps the other
            got = {"command": row["command"], "error": f"{type(exc).__name__}: {exc}"}
        out.append({**got, "wall_s": row["wall_s"], "target_s": row["target_s"], "why": why, "python_start_s": start})
    return out


def saved_runs(slug: str, keep: Path) -> list[str]:
    """Run SAVED_RUNS with --json and pack them as ``runs.tar.gz`` beside the record."""
    names = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, argv in SAVED_RUNS:
            path = Path(tmp) / f"{slug}-{name}.json"
            _timed(argv, path)
            if path.is_file():
                names.append(path.name)
        with tarfile.open(keep / "runs.tar.gz", "w:gz") as tar:
            for n in names:
                tar.add(Path(tmp) / n, arcname=n)
    return names


#: Issue 14: energy per launch from a sustained run (``--energy``), on kernels whose power is known
#: territory: a copy at full HBM bandwidth.
ENERGY_COMMAND = ["copy", "--variant", "memcpy_dtod,naive,vec4,block", "--energy"]


def energy() -> dict:
    """``cudalab copy --energy``: each row's sustained power, energy per launch and GB/J."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.json"
        wall, proc, _ = _timed(ENERGY_COMMAND, path)
        rows = []
        if path.is_file():
            for point in json.loads(path.read_text()).get("points", ()):
                for r in point.get("results", ()):
                    e = r.get("extra") or {}
                    rows.append({"variant": r["variant"], "status": r["status"], "gbs": r.get("gbs"),
                                 "median_ms": (r.get("stats") or {}).get("median"), "power_w": e.get("power_w"),
                                 **{k: e.get(k) for k in ("sustained_w", "energy_span_s", "energy_mj_per_launch",
                                                          "gb_per_j", "energy_note")}})
    return {"command": "cudalab " + " ".join(ENERGY_COMMAND), "wall_s": wall, "rc": proc.returncode, "rows": rows}


def ncu_walls() -> list[dict]:
    """Issue 9: one ncu process per command. The old way (one ncu process per variant) is measured
    too, in the same run, as the per-variant commands it would have started."""
    from cudalab import catalog

    rows = []
    for fam in ("smem-square", "transpose"):
        wall, proc, _ = _timed(["ncu", fam])
        kernels = [v.name for v in catalog.family(fam).variants if v.kind == "kernel"]
        t0 = time.perf_counter()
        for v in kernels:  # what a per-variant profile costs: one ncu process each
            subprocess.run([*CLI, "ncu", fam, "--variant", v], capture_output=True, text=True)
        per_variant = time.perf_counter() - t0
        rows.append({"command": f"cudalab ncu {fam}", "wall_s": wall, "rc": proc.returncode,
                     "per_variant_s": per_variant, "variants": len(kernels),
                     "speedup": per_variant / wall if wall else None,
                     "tail": proc.stdout.strip().splitlines()[-3:] if proc.returncode else []})
    return rows


#: Timing truth (issue 14): event median vs ncu's gpu__time_duration (ns) for every kernel over 0.5 ms.
TRUTH_JOBS = ("transpose 16384²", "reduce 2^26 float64", "copy 16384²")
#: A variant's launches before its first timed sample: the crash check, two verified launches (one when
#: the poison cannot reach the output) and the warm-ups (two). ncu profiles these, never a sample.
TRUTH_LAUNCHES = 4
#: Processes under ncu per kernel: their launches pooled, their event medians averaged. Four launches
#: cannot judge a kernel that varies about 1% launch to launch: an H200's reduce neighbored-less (2^26
#: float64) gave four-launch medians of 0.5790-0.5852 ms in five processes (launches 0.5765-0.5888)
#: while their event medians stayed at 0.5839-0.5864; a record missed the 1% on one such draw (+1.08%).
TRUTH_PROCESSES = 2


def _report_launches(exe: str, report: Path) -> tuple:
    """The profiled launches of ``report`` (.ncu-rep added), () where ncu wrote none."""
    from cudalab.ncu.parse import parse_csv
    from cudalab.ncu.profile import read_report

    rep = report.with_suffix(".ncu-rep")
    return parse_csv(read_report(exe, rep, subprocess.run)).launches if rep.is_file() else ()


def _session_truth(fam: str, variant: str, kernel: str, n: str, dtype: str | None) -> dict:
    """``cudalab FAMILY --variant V`` under ncu, which profiles the kernel's first TRUTH_LAUNCHES
    launches; the same process's event samples give the median they are compared with."""
    from statistics import median

    from cudalab.ncu.profile import find_ncu, profile_argv

    exe = find_ncu()
    with tempfile.TemporaryDirectory() as tmp:
        report, saved = Path(tmp) / "truth", Path(tmp) / "run.json"
        argv = [*profile_argv(exe, report, [kernel], ["gpu__time_duration.sum"]), "--launch-count", str(TRUTH_LAUNCHES),
                *CLI, fam, "--variant", variant, "--n", n, *(["--dtype", dtype] if dtype else []), "--no-roofline", "-q",
                "--json", str(saved)]
        proc = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=600)
        rows = _row_summary(saved)
        launches = _report_launches(exe, report)
    ns = [x.duration_ns for x in launches if x.kernel == kernel and x.duration_ns]
    ev = rows[0]["median_ms"] if rows and rows[0]["status"] == "passed" else None
    return {"session_ms": ev, "ncu_ms": median(ns) / 1e6 if ns else None, "ncu_each_ms": [x / 1e6 for x in ns],
            "retimed": rows[0]["retimed"] if rows else 0, "host_gaps": rows[0]["host_gaps"] if rows else 0,
            "rc": proc.returncode, "tail": proc.stderr.strip().splitlines()[-2:] if ev is None or not ns else []}


def _pooled(parts: list[dict]) -> dict:
    """Several :func:`_session_truth` results of one kernel as one: every ncu launch (their median), the
    mean of the processes' event medians (None if any process has none)."""
    from statistics import fmean, median

    ev = [p["session_ms"] for p in parts]
    ns = [x for p in parts for x in p["ncu_each_ms"]]
    return {"session_ms": fmean(ev) if ev and None not in ev else None, "session_each_ms": ev,
            "ncu_ms": median(ns) if ns else None, "ncu_each_ms": ns,
            "retimed": sum(p.get("retimed", 0) for p in parts), "host_gaps": sum(p.get("host_gaps", 0) for p in parts),
            "rc": next((p["rc"] for p in parts if p["rc"]), 0), "tail": [ln for p in parts for ln in p["tail"]]}


def timing_truth(runs: dict) -> dict:
    """Each slow kernel variant of TRUTH_JOBS in TRUTH_PROCESSES processes of its own under ncu: the
    mean of their event medians against the median of ncu's durations of their first launches. The
    table's median (a run without ncu) is kept beside it: some kernels run at another speed in any
    process under ncu, profiled launch or not (see ``session_probe``)."""
    from cudalab import catalog

    out = []
    for job in TRUTH_JOBS:
        run = runs.get(job)
        if not run or run.get("error"):
            continue
        spec, req = catalog.family(run["family"]), run["request"]
        table = {r.variant: r.median_ms for r in run["rows"] if r.kind == "kernel" and r.median_ms
                 and not r.extra.get("batch")}
        for v, ms in table.items():
            if ms <= 0.5:
                continue
            got = _pooled([_session_truth(run["family"], v, spec.variant(v).kernel, str(req.get("n")), req.get("dtype"))
                           for _ in range(TRUTH_PROCESSES)])
            ev, nc = got["session_ms"], got["ncu_ms"]
            diff = (ev - nc) / nc if ev and nc else None
            out.append({"job": job, "variant": v, "table_ms": ms, **got, "diff": diff,
                        "table_diff": (ms - nc) / nc if nc else None, "ok": diff is not None and abs(diff) <= 0.01})
    return {"kernels": out, "probe": session_probe()}


#: The probe's two kernels alternate, so skipping 8 of their launches and profiling 4 profiles
#: launches 4 and 5 of each.
PROBE_SKIP, PROBE_COUNT = 8, 4


def session_probe() -> dict:
    """scripts/probe_ncu_session.py alone and under ncu (launches 4 and 5 of each kernel profiled):
    events, the kernels' own globaltimer span, and ncu's durations."""
    from cudalab.ncu.profile import find_ncu

    script = str(Path(__file__).with_name("probe_ncu_session.py"))
    exe = find_ncu()

    def lines(text: str) -> dict:
        return {d["kernel"]: d for d in (json.loads(ln) for ln in text.splitlines() if ln.startswith('{"kernel"'))}

    plain = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=300)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "probe"
        under = subprocess.run([exe, "-o", str(report), "-f", "--clock-control", "none", "--cache-control", "none",
                                "--kernel-name", "regex:^probe_", "--launch-skip", str(PROBE_SKIP),
                                "--launch-count", str(PROBE_COUNT),
                                "--metrics", "gpu__time_duration.sum", sys.executable, script],
                               capture_output=True, text=True, timeout=300)
        launches = _report_launches(exe, report)
    ncu_ms: dict[str, list[float]] = {}
    for x in launches:
        if x.duration_ns:
            ncu_ms.setdefault(x.kernel, []).append(x.duration_ns / 1e6)
    return {"plain": lines(plain.stdout), "under_ncu": lines(under.stdout), "ncu_ms": ncu_ms,
            "profiled": list(range(PROBE_SKIP // 2, (PROBE_SKIP + PROBE_COUNT) // 2)), "rc": [plain.returncode, under.returncode],
            "tail": (plain.stderr + under.stderr).strip().splitlines()[-3:]}


def table36(runs: dict, job: str = "reduce 2^24 int32") -> list[dict]:
    """Issue 15: the course's Table 3-6 (global load / store efficiency per reduction) beside Table
    3-5's times, from ``cudalab ncu reduce --metrics memory`` at the job's size."""
    from cudalab import ncu

    run = runs.get(job)
    if not run or run.get("error"):
        return []
    req = planning.RunRequest(family="reduce", n=run["request"].get("n"), dtype=run["request"].get("dtype"))
    rep = ncu.profile(req, metrics="memory")
    times = {r.variant: r for r in run["rows"]}
    out = []
    for row in rep.rows:
        t = times.get(row.variant)
        out.append({"variant": row.variant, "median_ms": t.median_ms if t else None, "gbs": t.gbs if t else None,
                    "gld_eff": row.value(ncu.GLD_EFF), "gst_eff": row.value(ncu.GST_EFF),
                    "dram_pct": row.value(ncu.DRAM_PCT), "status": str(row.status)})
    return out


#: Issue 17: the largest size the memory plan allows, run to the end; the next size up refused.
LARGE = (("transpose", "float32", ["--variant", "tiled-64x8"]), ("copy", "float32", ["--variant", "memcpy_dtod,block"]),
         ("reduce", "float64", ["--variant", "modern,cub"]),
         # 4-5 s a launch at 46340³: three samples (the row's stop column says so); sketch-checked. warptile
         # alone: with cuBLAS beside it this family took 198 s of an H200's benchmark (2026-11-23), the whole
         # section 255 s; cuBLAS's large figure is not a target and the call has 10 minutes.
         ("matmul", "float32", ["--variant", "warptile", "--min-samples", "3"]))


def _row_summary(path: Path) -> list[dict]:
    """variant, status, median ms and the check note of each row of a saved run ([] if none was saved)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [{"variant": r.get("variant"), "status": r.get("status"), "median_ms": (r.get("stats") or {}).get("median"),
             "check": (r.get("extra") or {}).get("check", ""),
             "retimed": (r.get("extra") or {}).get("retimed", 0), "host_gaps": (r.get("extra") or {}).get("host_gaps", 0)}
            for point in record.get("points", ()) for r in point.get("results", ())]


def largest(device_free: int, host_free: int | None) -> list[dict]:
    """Run each LARGE family at its largest --n (from the plan, with this machine's free memory)."""
    from cudalab import catalog

    out = []
    for fam_name, dtype, extra in LARGE:
        fam = load(catalog.family(fam_name).module)
        opts = {o.name: o.default for o in fam.OPTIONS}
        n = memplan.largest_n(fam, dtype, opts, device_free, host_free)
        if n is None:
            out.append({"family": fam_name, "n": None, "note": "not even --n 1 fits"})
            continue
        with tempfile.TemporaryDirectory() as tmp:
            saved = Path(tmp) / "large.json"
            wall, proc, rss = _timed([fam_name, "--n", str(n), "--dtype", dtype, *extra], saved)
            rss = max(rss, worker_rss_kib(saved))
            rows = _row_summary(saved)
        up_wall, up, _ = _timed([fam_name, "--n", str(n + 1), "--dtype", dtype, *extra])
        refusal = [ln for ln in up.stderr.splitlines() if ln.startswith("cudalab:")]
        out.append({"family": fam_name, "dtype": dtype, "n": n, "wall_s": wall, "maxrss_gib": rss / 2**20, "rows": rows,
                    "rc": proc.returncode, "tail": proc.stderr.strip().splitlines()[-3:] if proc.returncode else [],
                    "up_rc": up.returncode, "up_s": up_wall, "up_refusal": refusal[0] if refusal else up.stderr[-300:]})
    return out
