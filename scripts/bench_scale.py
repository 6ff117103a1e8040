"""Scale on the CPU: throughput with N fake GPU workers against one's, for both engines (issue 58, item 4).

Each fake GPU worker (tests/fake_worker_main.py) sleeps ``DELAY`` seconds a row and passes it, so the figures
measure cudalab's (and Dask's) cost per trial, not a GPU. Two engines, N = 1, 2, 4, 8 fake GPUs:

* ``local``: the local pool of isolated GPU workers, a family sweep spread with ``--devices 0,1,...``
  (``cudalab.run(..., devices=...)``: one point a row); a tune campaign on this engine runs on one GPU, and
  its one-GPU figure is given beside the others (``tune-local``);
* ``dask``: a tune campaign (random walk) on a local Dask cluster of N fake GPU workers (``--cluster local``).

Throughput is rows a second from the worker's own clock: every row's send time (``FAKE_WORKER_STAMPS``), from
the first row to the last, counting the rows after the first N (the N workers start together). Ratio =
(rows/s with N) / (N x rows/s with 1 of the same engine); the target is >= 0.85 for 50 ms rows up to N = 8.
Builds are left out (``FAKE_BUILD=instant``; the fakes build nothing). Writes OUT.json and OUT.md::

    python scripts/bench_scale.py --out docs/benchmarks/cpu-scale
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
MS = "1 + abs(UNROLL - 5) / 100"
BLOCKS = ["32", "64", "128", "256", "512", "1024"]
STAMP = len(f"{time.time():.6f}\n")  # the bytes of one row's line in FAKE_WORKER_STAMPS (fake_worker_main.py)


def _rows_per_s(stamps: Path, n: int) -> tuple[float, int]:
    """Rows a second after the first ``n`` (they come back together), and how many rows there were."""
    t = sorted(float(x) for x in stamps.read_text().split()) if stamps.exists() else []
    if len(t) <= n or t[-1] <= t[n - 1]:
        return 0.0, len(t)
    return (len(t) - n) / (t[-1] - t[n - 1]), len(t)


def one(engine: str, n: int, rows: int, folder: Path) -> dict[str, float]:
    """One measurement: ``rows`` rows on ``n`` fake GPUs of ``engine``; its figures."""
    import cudalab

    stamps = folder / f"{engine}-{n}.stamps"
    os.environ["FAKE_WORKER_STAMPS"] = str(stamps)
    window = Window(stamps, n, rows)
    t0 = time.monotonic()
    if engine == "local":
        unroll = -(-rows // len(BLOCKS))  # rows = UNROLL values x blocks
        cudalab.run("copy", "vec4", n="1k", defines={"UNROLL": list(range(1, unroll + 1))}, block=BLOCKS,
                    devices=list(range(n)), roofline=False, min_samples=1, budget=0.001)
    else:
        cluster = {"tune-local": {}, "dask": {"cluster": "local", "devices": ",".join(map(str, range(n)))}}[engine]
        res = cudalab.tune("copy", "vec4", n="1k", defines={"UNROLL": "1..64"}, block="32..1024:pow2", strategy="random",
                           trials=rows, seed=1, race=0, build_ahead=0, storage=f"sqlite:///{folder / f'{engine}-{n}.db'}",
                           **cluster)
        assert sum(m.status == "passed" for m in res.trials) == rows, [m.status for m in res.trials]
    wall = time.monotonic() - t0
    cpu = window.per_row()
    rate, seen = _rows_per_s(stamps, n)
    return {"rows": seen, "rows_per_s": round(rate, 2), "wall_s": round(wall, 2), "load": round(os.getloadavg()[0], 1),
            "cpu_ms_per_row": round(cpu[0] * 1e3, 1) if cpu else None,
            "parent_ms_per_row": round(cpu[1] * 1e3, 1) if cpu else None,
            "cpu_bound_rows_per_s": round((os.cpu_count() or 1) / cpu[0], 1) if cpu and cpu[0] else None}


def _tree_cpu() -> tuple[float, float]:
    """CPU-seconds so far of this process and every live process under it (its GPU workers, a local cluster's
    Nannies and Dask workers and theirs), and of this process alone (the driver, with a local cluster's scheduler
    and client in its threads), from /proc."""
    kids: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(f[1]), []).append(int(d.name))
        times[int(d.name)] = (int(f[11]) + int(f[12])) / tick
    todo, total = [os.getpid()], 0.0
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += kids.get(pid, [])
    return total, times.get(os.getpid(), 0.0)


class Window:
    """The process tree's CPU-seconds between the ``n``-th row and the last (``rows``), read as the rows come."""

    def __init__(self, stamps: Path, n: int, rows: int):
        self.stamps, self.n, self.rows, self.marks = stamps, n, rows, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        for goal in (self.n, self.rows):
            while not self._stop.is_set():
                try:  # a stat, not a read: the watch's own CPU is this process's (the parent's figure)
                    seen = self.stamps.stat().st_size // STAMP
                except OSError:
                    seen = 0
                if seen >= goal:
                    self.marks.append((_tree_cpu(), seen))
                    break
                time.sleep(0.005)

    def per_row(self) -> tuple[float, float] | None:
        """CPU-seconds a row over the window, of every process and of this one (None: it was not seen whole)."""
        self._stop.set()
        self._thread.join()
        if len(self.marks) < 2 or self.marks[1][1] <= self.marks[0][1]:
            return None
        rows = self.marks[1][1] - self.marks[0][1]
        return ((self.marks[1][0][0] - self.marks[0][0][0]) / rows, (self.marks[1][0][1] - self.marks[0][0][1]) / rows)


def measure(engines: list[str], counts: list[int], delays: list[float], per_worker: int) -> list[dict]:
    """Every (engine, delay, N) once; the ratio against the same engine's N = 1."""
    out = []
    for delay in delays:
        os.environ["FAKE_WORKER"] = json.dumps({"_delay": delay, "_ms": MS})
        for engine in engines:
            with tempfile.TemporaryDirectory() as tmp:
                got = {}
                for n in ([1] if engine == "tune-local" else counts):
                    got[n] = one(engine, n, per_worker * n, Path(tmp))
                    base = got[1]["rows_per_s"]
                    row = {"engine": engine, "delay_ms": round(delay * 1e3), "gpus": n, **got[n],
                           "ideal_rows_per_s": round(n * base, 2),
                           "ratio": round(got[n]["rows_per_s"] / (n * base), 3) if base else None}
                    out.append(row)
                    print(json.dumps(row), flush=True)
    return out


def markdown(rec: dict) -> str:
    lines = [f"# Scale on the CPU: N fake GPU workers against one ({rec['date']})", "",
             f"Made by `{rec['command']}` on {rec['machine']} ({rec['cores']} cores, shared with other work while "
             "it ran); code " + rec["code"] + ".", "",
             "Each fake GPU worker sleeps the row's time and passes it: what is measured is cudalab's and Dask's "
             "cost per row. `local`: a family sweep over `--devices 0..N-1` (the local pool); `dask`: a random-walk "
             "tune campaign on `--cluster local` with N fake GPU workers; `tune-local`: the same campaign on the "
             "local engine (one GPU). Rows/s from the workers' clocks, after the first N rows. Ratio: rows/s "
             f"over N times the engine's one-worker rows/s; target >= {rec['target']} for 50 ms rows up to N = 8. Load: "
             "the machine's 1-minute load average after the run (other work shares its cores). CPU ms a row: the "
             "CPU time of every process of the run (this one, the GPU workers, a cluster's scheduler, Nannies and "
             "Dask workers) from the N-th row to the last, over those rows; parent's: the same of the user's process alone "
             "(the driver: the study's storage, the strategy, planning, and with `--cluster local` the scheduler and "
             "client in its threads); cores' bound: the rows/s this machine's "
             "cores could give at that cost, were nothing else running. Builds are not measured here (the fakes "
             "build nothing; campaigns run with --build-ahead 0): scripts/bench_campaign_cold.py measures them.", "",
             "| engine | row | N | rows | rows/s | N x one | ratio | wall s | load | CPU ms a row | parent's | cores' bound rows/s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rec["runs"]:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"| {r['engine']} | {r['delay_ms']} ms | {r['gpus']} | {r['rows']} | {r['rows_per_s']:.1f} | "
                     f"{r['ideal_rows_per_s']:.1f} | {ratio} | {r['wall_s']:.1f} | {r['load']} | {r['cpu_ms_per_row']} | "
                     f"{r['parent_ms_per_row']} | "
                     f"{r['cpu_bound_rows_per_s']} |")
    lines += ["", "Verdict, 50 ms rows: " + rec["verdict_50ms"], "", "5 ms rows reach: " + rec["reach_5ms"], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/benchmarks/cpu-scale", help="OUT.json and OUT.md")
    ap.add_argument("--engines", default="local,dask,tune-local")
    ap.add_argument("--gpus", default="1,2,4,8")
    ap.add_argument("--delays-ms", default="50,5")
    ap.add_argument("--rows", type=int, default=40, help="rows per fake GPU worker")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(TESTS))
    os.environ["PYTHONPATH"] = str(TESTS) + os.pathsep + os.environ.get("PYTHONPATH", "")
    os.environ["FAKE_BUILD"] = "instant"
    import dask
    import fake_dask_preload

    fake_dask_preload.dask_setup()  # this process's GPU workers (the local engine's) are fake ones too
    dask.config.set({"distributed.worker.preload": ["fake_dask_preload"]})
    counts = [int(x) for x in args.gpus.split(",")]
    runs = measure(args.engines.split(","), counts, [int(x) / 1e3 for x in args.delays_ms.split(",")], args.rows)
    target = 0.85
    fifty = [r for r in runs if r["delay_ms"] == 50 and r["ratio"] is not None and r["engine"] != "tune-local"]
    worst = min(fifty, key=lambda r: r["ratio"]) if fifty else None
    five = [r for r in runs if r["delay_ms"] == 5 and r["engine"] != "tune-local"]
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    rec = {"date": time.strftime("%Y-%m-%d"), "machine": platform.node() or "this machine", "cores": os.cpu_count(),
           "code": code + ("+dirty" if subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode else ""),
           "command": "python scripts/bench_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "target": target, "runs": runs,
           "verdict_50ms": ("no 50 ms runs" if worst is None else
                            f"{'PASS' if worst['ratio'] >= target else 'FAIL'}: the lowest ratio is {worst['ratio']:.2f} "
                            f"({worst['engine']}, N = {worst['gpus']})"),
           "reach_5ms": ", ".join(f"{r['engine']} N={r['gpus']}: {r['ratio']:.2f}" for r in five if r["ratio"] is not None)
           or "not measured"}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rec, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(rec))
    print(rec["verdict_50ms"])
    print("5 ms:", rec["reach_5ms"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
