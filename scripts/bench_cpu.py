#!/usr/bin/env python3
"""Time to table, the CPU side (issue 32), on any machine: no GPU needed.

    python3 scripts/bench_cpu.py                          # median of 5, a markdown record on stdout
    python3 scripts/bench_cpu.py --runs 7 --json cpu.json --markdown cpu.md

Each command runs as a user types it, from this checkout (``python -m cudalab``'s ``main``), in a
fresh process with its bytecode cached as an installed package has it (bench_sections.PYCACHE: the
GPU machines set PYTHONDONTWRITEBYTECODE, which would make every command compile its modules).

* ``cudalab --help`` and ``cudalab list``: issue 32's targets (0.3 s and 0.25 s, measured warm on an
  H100 machine; judged here too, on this machine's CPU).
* ``cudalab transpose --help`` and ``cudalab list transpose``: information.
* ``cudalab transpose --variant bankopt --n 16384`` and ``cudalab reduce --all`` (with ``--json``, as
  the record's time-to-table section runs them) on fake GPU workers (tests/fake_worker_main.py: every
  row passes at 1 ms): the parent's side of issue 32's 1.2 s and 1.5 s, the GPU's share left out.

Per command: the median wall time and the median CPU seconds of the command's own process (user +
system; its workers not counted). Then where the time goes in the slowest (the furthest over its
target, else the most CPU): ``-X importtime`` by package, and cProfile's entries with the most
cumulative time (the import machinery's own frames left out), written into the record.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sections import _env, _label, parse_importtime  # noqa: E402

FAKE_MAIN = ROOT / "tests" / "fake_worker_main.py"

#: (argv, target seconds or None, run on fake GPU workers)
COMMANDS = (
    (("--help",), 0.3, False),
    (("list",), 0.25, False),
    (("transpose", "--help"), None, False),
    (("list", "transpose"), None, False),
    (("transpose", "--variant", "bankopt", "--n", "16384", "--json", "{tmp}/run.json"), None, True),
    (("reduce", "--all", "--json", "{tmp}/run.json"), None, True),
)

#: The command's process: fake workers where asked (the prestarted one too), its own CPU time on stderr at
#: exit, cProfile of its main thread where CPU_PROFILE names a file.
DRIVER = r"""
import atexit, os, resource, sys
if os.environ.get("CPU_FAKE_MAIN"):
    from cudalab.execute.local import process as W
    W.worker_argv = lambda device, fd, energy=False: [sys.executable, os.environ["CPU_FAKE_MAIN"], "--fd", str(fd),
                                                       "--device", str(device)]
prof = None
if os.environ.get("CPU_PROFILE"):
    import cProfile
    prof = cProfile.Profile()

def _done():
    if prof is not None:
        prof.disable()
        prof.dump_stats(os.environ["CPU_PROFILE"])
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(f"CPU_SELF {r.ru_utime + r.ru_stime:.4f}", file=sys.stderr)

atexit.register(_done)
sys.argv = ["cudalab", *sys.argv[1:]]
if prof is not None:
    prof.enable()
from cudalab.main import main
main()
"""

#: Frames that only wrap others: the import machinery, the builtins around every import, and click's
#: dispatch (each of its frames holds a cudalab frame of the same time). They would fill a cumulative list.
NOISE = ("<frozen importlib", "<built-in method builtins.exec>", "<built-in method builtins.__import__>",
         f"{os.sep}click{os.sep}")


def _env_for(fake: bool, **extra: str) -> dict[str, str]:
    env = _env()
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for k in ("CUDALAB_PATH", "CUDALAB_SRC", "CPU_FAKE_MAIN", "CPU_PROFILE"):
        env.pop(k, None)
    if fake:
        env["CPU_FAKE_MAIN"] = str(FAKE_MAIN)
        env["FAKE_WORKER"] = "{}"
    env.update(extra)
    return env


def _argv(argv: tuple[str, ...], tmp: str) -> list[str]:
    return [a.replace("{tmp}", tmp) for a in argv]


def run_once(argv: tuple[str, ...], fake: bool, **extra: str) -> tuple[float, float, int]:
    """One fresh process: (wall seconds, its own CPU seconds, exit code)."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", DRIVER, *_argv(argv, tmp)], capture_output=True, text=True,
                              env=_env_for(fake, **extra), cwd=ROOT)
        wall = time.perf_counter() - t0
    cpu = next((float(ln.split()[1]) for ln in proc.stderr.splitlines() if ln.startswith("CPU_SELF ")), float("nan"))
    return wall, cpu, proc.returncode


def time_commands(runs: int) -> list[dict]:
    """Each command once to warm the caches, then ``runs`` times: medians."""
    rows = []
    for argv, target, fake in COMMANDS:
        run_once(argv, fake)
        walls, cpus, codes = [], [], []
        for _ in range(runs):
            wall, cpu, rc = run_once(argv, fake)
            walls.append(wall)
            cpus.append(cpu)
            codes.append(rc)
        wall = statistics.median(walls)
        rows.append({"command": "cudalab " + " ".join(a for a in argv if "{tmp}" not in a and a != "--json"),
                     "argv": list(argv), "fake_gpu": fake, "wall_s": wall, "walls_s": walls,
                     "cpu_s": statistics.median(cpus), "target_s": target, "rc": codes,
                     "ok": None if target is None else all(c == 0 for c in codes) and wall <= target})
    return rows


def slowest(rows: list[dict]) -> dict:
    """The command furthest over its target (wall / target); with none judged or none over, the most CPU."""
    over = [r for r in rows if r["target_s"] and r["wall_s"] > r["target_s"]]
    if over:
        return max(over, key=lambda r: r["wall_s"] / r["target_s"])
    return max(rows, key=lambda r: r["cpu_s"])


def profile(row: dict, top: int = 20) -> dict:
    """Where ``row``'s command spends its time: imports by package, then cProfile's top entries."""
    argv, fake = tuple(row["argv"]), row["fake_gpu"]
    with tempfile.TemporaryDirectory() as tmp:
        imp = subprocess.run([sys.executable, "-X", "importtime", "-c", DRIVER, *_argv(argv, tmp)],
                             capture_output=True, text=True, env=_env_for(fake), cwd=ROOT)
        out = Path(tmp) / "cmd.prof"
        run_once(argv, fake, CPU_PROFILE=str(out))
        st = pstats.Stats(str(out))
    items = [(_label(k), k, v) for k, v in st.stats.items()]
    items = [x for x in items if not any(n in f"{x[1][0]}{x[1][2]}" for n in NOISE)]
    cumulative = sorted(items, key=lambda x: -x[2][3])[:top]
    own = sorted(items, key=lambda x: -x[2][2])[:top // 2]
    return {"command": row["command"], "profiled_s": st.total_tt, "imports": parse_importtime(imp.stderr, top=10),
            "cumulative": [{"name": n, "s": v[3], "calls": v[1]} for n, _, v in cumulative],
            "own": [{"name": n, "s": v[2], "calls": v[1]} for n, _, v in own]}


def python_start(runs: int) -> float:
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=_env(), capture_output=True)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def markdown(rec: dict) -> str:
    md = [f"# Time to table, CPU side ({rec['host']}, {rec['cpus']} CPUs, Python {rec['python']})", "",
          f"Median of {rec['runs']} fresh processes each, bytecode cached; `python -c pass`: "
          f"{rec['python_start_s']:.3f} s. CPU = the command's own process (user + system), workers not counted.",
          "", "| command | fake GPU | wall s | CPU s | target s | verdict |", "|---|---|---|---|---|---|"]
    for r in rec["rows"]:
        verdict = "information" if r["ok"] is None else "met" if r["ok"] else "missed"
        md.append(f"| `{r['command']}` | {'yes' if r['fake_gpu'] else ''} | {r['wall_s']:.3f} | {r['cpu_s']:.3f} | "
                  f"{r['target_s'] if r['target_s'] else '–'} | {verdict} |")
    p = rec["profile"]
    imp = p["imports"]
    md += ["", f"## Where the time goes: `{p['command']}`", "",
           f"Imports (`-X importtime`, own time summed by top-level package): {imp['total_s']:.3f} s over "
           f"{imp['modules']} modules: " + ", ".join(f"{k} {s:.3f}" for k, s in imp["by_package"]) + ".", "",
           f"cProfile of the command's main thread ({p['profiled_s']:.3f} s profiled; the frames of the import "
           "machinery and of click's dispatch left out):", "", "| # | cumulative: function | s | calls |", "|---|---|---|---|"]
    for i, e in enumerate(p["cumulative"], 1):
        md.append(f"| {i} | `{e['name']}` | {e['s']:.3f} | {e['calls']} |")
    md += ["", "| # | own time: function | s | calls |", "|---|---|---|---|"]
    for i, e in enumerate(p["own"], 1):
        md.append(f"| {i} | `{e['name']}` | {e['s']:.3f} | {e['calls']} |")
    return "\n".join(md) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="timed runs per command (median; default 5)")
    ap.add_argument("--json", default=None, help="write the record (every run's figures) to this JSON file")
    ap.add_argument("--markdown", default=None, help="write the markdown here instead of stdout")
    args = ap.parse_args()
    import platform

    rows = time_commands(args.runs)
    rec = {"host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(), "runs": args.runs,
           "python_start_s": python_start(args.runs), "rows": rows}
    rec["profile"] = {**profile(slowest(rows)), "why": "furthest over its target, else the most CPU"}
    if args.json:
        Path(args.json).write_text(json.dumps(rec, indent=1) + "\n")
    text = markdown(rec)
    if args.markdown:
        Path(args.markdown).write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
