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
    load_before = round(os.getloadavg()[0], 1)
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
    ms = {f"{'cpu' if k == 'all' else k}_ms_per_row": round(cpu[k] * 1e3, 1) if cpu else None for k in PARTS}
    return {"rows": seen, "rows_per_s": round(rate, 2), "wall_s": round(wall, 2), "load_before": load_before,
            "load": round(os.getloadavg()[0], 1), **ms,
            "cpu_bound_rows_per_s": round((os.cpu_count() or 1) / cpu["all"], 1) if cpu and cpu["all"] else None}


#: Where a run's CPU goes: every process of the run, this one, the GPU workers (fake_worker_main.py), the rest
#: (a local cluster's Dask worker processes, Python's resource tracker).
PARTS = ("all", "parent", "gpu_workers", "dask_workers")


Proc = tuple[str, int, float, float]  # its part, its parent's pid, its own CPU-seconds, its reaped children's


def _tree_cpu() -> dict[tuple[int, str], Proc]:
    """This process and every process under it (its GPU workers, a local cluster's Dask workers and theirs), by
    (pid, start time): its part of :data:`PARTS` (``parent``: this process, the driver, with a local cluster's
    scheduler, Nannies and client in its threads; Python's resource tracker too), its parent, its CPU-seconds so
    far, and those of its children that ended and were reaped (``cutime``, ``cstime``), from /proc."""
    kids: dict[int, list[int]] = {}
    stat: dict[int, list[str]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        kids.setdefault(int(f[1]), []).append(int(d.name))
        stat[int(d.name)] = f
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[tuple[int, str], Proc] = {}
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        f = stat[pid]
        kind = "parent" if pid == os.getpid() else _kind(pid, f[19])
        if kind is not None:  # None: ended since the scan, never seen alive (its time is its reaper's)
            out[(pid, f[19])] = (kind, int(f[1]), (int(f[11]) + int(f[12])) / tick, (int(f[13]) + int(f[14])) / tick)
        todo += [k for k in kids.get(pid, []) if k in stat]
    return out


def _split(a: dict[tuple[int, str], Proc], b: dict[tuple[int, str], Proc]) -> dict[str, float]:
    """CPU-seconds from snapshot ``a`` to ``b`` by :data:`PARTS`. A process that ended between them and was
    reaped has its time in its reaper's children's times at ``b``: that growth is counted as the part of the
    processes the reaper lost (a GPU worker that ends inside the window, the last row's, is not lost from it)."""
    out = dict.fromkeys(PARTS, 0.0)
    gone: dict[int, list[str]] = {}  # reaper's pid -> the parts of its children gone since a
    for key, (kind, ppid, own, _) in a.items():
        if key not in b:
            out[kind] -= own  # its whole time is in its reaper's at b
            gone.setdefault(ppid, []).append(kind)
    for key, (kind, _, own, reaped) in b.items():
        before = a.get(key, (kind, 0, 0.0, 0.0))  # a process new since a: all its time is the window's
        out[kind] += own - before[2]
        grew = reaped - before[3]
        if grew:
            lost = gone.get(key[0]) or ["gpu_workers"]  # children ended since a; else those of the window's start
            out[max(set(lost), key=lost.count)] += grew
    out["all"] = sum(out[k] for k in PARTS if k != "all")
    return out


_KINDS: dict[tuple[int, str], str] = {}  # (pid, start time) -> its part, as first seen alive


def _kind(pid: int, started: str) -> str | None:
    """A process's part by its command line, remembered: an ended process not yet reaped (a zombie) has none."""
    if (pid, started) not in _KINDS:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        if not cmd:
            return None
        _KINDS[(pid, started)] = ("gpu_workers" if b"fake_worker_main" in cmd else
                                  "parent" if b"resource_tracker" in cmd else "dask_workers")  # Python's, serving this one
    return _KINDS[(pid, started)]


class Window:
    """The process tree's CPU-seconds between the ``n``-th row and the ``n``-th before the last (``rows``), read as the
    rows come: the workers all started and none ending (a snapshot taken while a run ends its workers could read
    a worker's parent before the worker was reaped and the worker after: its time in neither; seen as a GPU
    worker's 0.6 ms a row against 2.4 in the runs beside it)."""

    def __init__(self, stamps: Path, n: int, rows: int):
        self.stamps, self.n, self.rows, self.marks = stamps, n, rows, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        for goal in (self.n, max(self.n + 1, self.rows - self.n)):
            while not self._stop.is_set():
                try:  # a stat, not a read: the watch's own CPU is this process's (the parent's figure)
                    seen = self.stamps.stat().st_size // STAMP
                except OSError:
                    seen = 0
                if seen >= goal:
                    self.marks.append((_tree_cpu(), seen))
                    break
                time.sleep(0.005)

    def per_row(self) -> dict[str, float] | None:
        """CPU-seconds a row over the window, by :data:`PARTS` (None: it was not seen whole)."""
        self._stop.set()
        self._thread.join()
        if len(self.marks) < 2 or self.marks[1][1] <= self.marks[0][1]:
            return None
        rows = self.marks[1][1] - self.marks[0][1]
        return {k: v / rows for k, v in _split(self.marks[0][0], self.marks[1][0]).items()}


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
    start = rec.get("load_at_start") or []
    shared = ("idle when it started" if start and start[0] < 0.5 else
              f"its load average {', '.join(map(str, start))} (1, 5, 15 min) when it started: other work shared "
              "its cores" if start else "its load not recorded")
    lines = [f"# Scale on the CPU: N fake GPU workers against one ({rec['date']})", "",
             f"Made by `{rec['command']}` on {rec['machine']} ({rec['cores']} cores, {shared}); code "
             + rec["code"] + ".", "",
             "Each fake GPU worker sleeps the row's time and passes it: what is measured is cudalab's and Dask's "
             "cost per row. `local`: a family sweep over `--devices 0..N-1` (the local pool); `dask`: a random-walk "
             "tune campaign on `--cluster local` with N fake GPU workers; `tune-local`: the same campaign on the "
             "local engine (one GPU). Rows/s from the workers' clocks, after the first N rows. Ratio: rows/s "
             f"over N times the engine's one-worker rows/s; target >= {rec['target']} for 50 ms rows up to N = 8. Load: "
             "the machine's 1-minute load average before and after the run (it lags: it carries this benchmark's own "
             "runs before it too; the load when it started says whether other work shared the cores). CPU ms a row: the CPU time of the run's processes from the N-th row to the N-th before the last, over those "
             "rows (it does not depend on the load as the rows/s do): all of them; the parent (the user's process: "
             "the study's storage, the strategy, planning, and with `--cluster local` the scheduler, the Nannies and "
             "the client in its threads); the Dask worker processes; the GPU workers (the fakes: each reads the "
             "plan and sends its rows as a real one does). Cores' bound: the rows/s this machine's cores could give "
             "at that cost, were nothing else running. Builds are not measured here (the fakes build nothing; "
             "campaigns run with --build-ahead 0): scripts/bench_campaign_cold.py measures them.", "",
             "| engine | row | N | rows | rows/s | N x one | ratio | wall s | load before, after | CPU ms a row: all "
             "| parent | Dask workers | GPU workers | cores' bound rows/s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rec["runs"]:
        ratio = "" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"| {r['engine']} | {r['delay_ms']} ms | {r['gpus']} | {r['rows']} | {r['rows_per_s']:.1f} | "
                     f"{r['ideal_rows_per_s']:.1f} | {ratio} | {r['wall_s']:.1f} | {r.get('load_before', '')}, {r['load']} | "
                     f"{r['cpu_ms_per_row']} | {r['parent_ms_per_row']} | {r.get('dask_workers_ms_per_row', '')} | "
                     f"{r.get('gpu_workers_ms_per_row', '')} | {r['cpu_bound_rows_per_s']} |")
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
    load_at_start = [round(x, 1) for x in os.getloadavg()]
    runs = measure(args.engines.split(","), counts, [int(x) / 1e3 for x in args.delays_ms.split(",")], args.rows)
    target = 0.85
    fifty = [r for r in runs if r["delay_ms"] == 50 and r["ratio"] is not None and r["engine"] != "tune-local"]
    worst = min(fifty, key=lambda r: r["ratio"]) if fifty else None
    five = [r for r in runs if r["delay_ms"] == 5 and r["engine"] != "tune-local"]
    code = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    rec = {"date": time.strftime("%Y-%m-%d"), "machine": platform.node() or "this machine", "cores": os.cpu_count(),
           "code": code + ("+dirty" if subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode else ""),
           "command": "python scripts/bench_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "load_at_start": load_at_start, "target": target, "runs": runs,
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
