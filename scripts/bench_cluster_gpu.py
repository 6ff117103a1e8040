"""A tune campaign on every GPU of this host through ``--cluster local``, against one GPU (issues 44 and 48).

Three campaigns of the same space, trial count and seed: without a cluster (one GPU; it also warms the build
cache, so the two cluster campaigns below both start warm, unless ``--cold`` gives each campaign an empty
cache of its own: then each builds every kernel it runs, the driver's build pool without a cluster, the
workers' hosts' prebuilds with one), ``--cluster local --devices 0`` and ``--cluster local --devices all``;
in each cluster campaign one Dask worker is SIGKILLed after ``--kill-at`` finished trials. Writes
``<gpu>-x<N>-cluster.md`` and ``.json`` (N: the GPUs; ``<gpu>-x<N>`` is bench_devices.py's record) with the
throughput of each, the ratio to N x one GPU, the winners and their medians, and whether every trial was
recorded exactly once::

    python scripts/bench_cluster_gpu.py --trials 40 --out docs/benchmarks
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cudalab
from cudalab.records.results import save_record
from cudalab.tuning.result import point_key


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[1])


def _descends(pid: int, root: int) -> bool:
    while pid > 1:
        if pid == root:
            return True
        pid = _parent(pid)
    return False


def kill_a_dask_worker() -> int:
    """SIGKILL the Dask worker process that hosts one of this campaign's GPU workers; its pid (0: none found)."""
    out = subprocess.run(["pgrep", "-f", "cudalab.worker"], capture_output=True, text=True).stdout.split()
    gpu_workers = [int(p) for p in out if _descends(int(p), os.getpid()) and _parent(int(p)) != os.getpid()]
    if not gpu_workers:
        return 0
    dask_worker = _parent(gpu_workers[0])
    os.kill(dask_worker, signal.SIGKILL)
    return dask_worker


def campaign(label: str, args: argparse.Namespace, folder: Path, **kw) -> dict:
    """One campaign; its figures (wall time, trials per minute, winner, exactly-once check)."""
    killed, marks = [], {}
    if args.cold:  # an empty build cache of its own: every build is cold (the driver's pool, or the hosts' prebuilds)
        os.environ["CUDALAB_CACHE"] = str(folder / f"{label}-cache")
    t0 = time.monotonic()

    def on_event(what: str, d: dict) -> None:
        now = time.monotonic()
        if what in ("start", "cluster"):  # the search starts once the cluster is up
            marks["start"] = now
        if what == "trial":
            marks["last_trial"] = now
            last = d.get("last")
            print(f"[{label}] {now - t0:6.1f}s trial {d.get('done')}: {getattr(last, 'status', '?')} "
                  f"{getattr(last, 'values', None)} {point_key(last.point) if last else ''}", flush=True)
            if kw.get("cluster") and args.kill_at and d.get("done") == args.kill_at and not killed:
                killed.append(kill_a_dask_worker())
                print(f"[{label}] killed Dask worker pid {killed[-1]} after {args.kill_at} trials", flush=True)
        if what == "race":
            marks["race"] = now

    res = cudalab.tune(args.family, args.variant, n=args.n, trials=args.trials, seed=args.seed, strategy=args.strategy,
                       race=args.race, budget=args.budget, storage=f"sqlite:///{folder / (label + '.tune.db')}",
                       on_event=on_event, **kw)
    wall = time.monotonic() - t0
    numbers = [m.number for m in res.trials]
    searched = marks.get("race", marks.get("last_trial", t0 + wall)) - marks.get("start", t0)
    best = res.feasible[0] if res.feasible else None
    fig = {"label": label, "cold": args.cold, "cluster": kw.get("cluster", ""), "devices": kw.get("devices", "0"),
           "wall_s": round(wall, 1),
           "search_s": round(searched, 1), "trials": len(res.trials),
           "passed": sum(m.status == "passed" for m in res.trials),
           "statuses": sorted({m.status for m in res.trials}),
           "trials_per_min": round(60 * len(res.trials) / searched, 2) if searched > 0 else None,
           "exactly_once": len(numbers) == len(set(numbers)) and len(res.trials) == args.trials,
           "killed_pid": killed[0] if killed else None, "winner": res.winner,
           "best_trial": point_key(best.point) if best else "", "best_ms": best.values[0] if best else None,
           "ties": list(res.race.ties) if res.race else [], "exit_code": res.exit_code,
           "winner_ms": _median(res, res.winner)}
    if res.record is not None:
        save_record(folder / f"{label}.json", res.record)
    print(json.dumps(fig), flush=True)
    return fig


def _median(res, key: str) -> float | None:
    import numpy as np

    if res.race is not None and res.race.samples.get(key):
        return round(float(np.median(res.race.samples[key])), 5)
    hits = [m.values[0] for m in res.trials if point_key(m.point) == key and m.values]
    return hits[0] if hits else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="matmul")
    ap.add_argument("--variant", default="warptile")
    ap.add_argument("--n", default="4096")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--strategy", default="tpe")
    ap.add_argument("--race", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.1)
    ap.add_argument("--kill-at", type=int, default=10, help="SIGKILL a Dask worker after this many trials (0: none)")
    ap.add_argument("--gpus", type=int, default=None, help="GPUs on this host (default: nvidia-smi's count)")
    ap.add_argument("--gpu", default=None, help="the record's GPU name (default: nvidia-smi's)")
    ap.add_argument("--cold", action="store_true", help="each campaign starts with an empty build cache of its own "
                    "(cold builds: the driver's build pool without a cluster against the hosts' prebuilds with one)")
    ap.add_argument("--work", default="/tmp/bench-cluster", help="campaign files and run records")
    ap.add_argument("--campaigns", default="plain,one,all", help="which of plain, one, all, in this order")
    ap.add_argument("--out", default=None, help="folder for <gpu>-x<N>-cluster.md/.json")
    args = ap.parse_args()
    try:
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True).stdout.split("\n")
    except FileNotFoundError:  # no driver here: --gpus and --gpu say what the fake cluster is
        names = []
    names = [n.strip() for n in names if n.strip()]
    gpus = args.gpus or len(names)
    gpu = args.gpu or (names[0] if names else "unknown")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    kinds = {"plain": {}, "one": {"cluster": "local", "devices": "0"}, "all": {"cluster": "local", "devices": "all"}}
    figs = []
    for label in args.campaigns.split(","):
        figs.append(campaign(label, args, work, **kinds[label]))
        write(figs, args, gpu, gpus)  # after each campaign: a stage stopped later keeps what was measured


def write(figs: list[dict], args: argparse.Namespace, gpu: str, gpus: int) -> None:
    """Print the record so far and, with ``--out``, write ``<gpu>-x<N>-cluster.md`` and ``.json``."""
    by = {f["label"]: f for f in figs}
    one, many = (by.get("one") or {}).get("trials_per_min"), (by.get("all") or {}).get("trials_per_min")
    ratio = round(many / (gpus * one), 3) if one and many else None
    ref = (by.get("one") or by.get("plain") or {}).get("winner_ms")
    within = {f["label"]: (round(100 * (f["winner_ms"] / ref - 1), 2) if f["winner_ms"] and ref else None)
              for f in figs}
    from cudalab.records import machine  # noqa: PLC0415

    rec = {"gpu": gpu, "gpus": gpus, "date": time.strftime("%Y-%m-%d"), "code": machine.code_revision(),
           "campaigns": figs, "ratio": ratio,
           "winner_delta_pct": within,
           "command": "python scripts/bench_cluster_gpu.py " + " ".join(sys.argv[1:]),
           "space": f"{args.family} --variant {args.variant} --n {args.n}", "strategy": args.strategy,
           "cpu_cores": os.cpu_count()}
    print(json.dumps(rec, indent=1), flush=True)
    if not args.out:
        return
    slug = gpu.lower().replace(" ", "-") + f"-x{gpus}-cluster"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{slug}.json").write_text(json.dumps(rec, indent=1) + "\n")
    rows = "\n".join(f"| {f['label']} | {f['cluster'] or '-'} | {f['devices']} | {f['trials']} | {f['passed']} | "
                     f"{f['search_s']} | {f['trials_per_min']} | {f['winner']} | {f['winner_ms']} | "
                     f"{'yes' if f['exactly_once'] else 'NO'} | {f['killed_pid'] or '-'} |" for f in figs)
    (out / f"{slug}.md").write_text(
        f"# {gpu} x{gpus}: a tune campaign through `--cluster local`\n\n"
        f"{rec['date']}, {rec['space']}, strategy {args.strategy}, {args.trials} trials, seed {args.seed}, "
        f"{'each campaign from an empty build cache, ' if args.cold else ''}"
        f"{os.cpu_count()} CPU cores, code {rec['code'] or '?'}.\n\n`{rec['command']}`\n\n"
        "| campaign | cluster | GPUs | trials | passed | search s | trials/min | winner | winner ms | "
        "each trial once | killed worker |\n|---|---|---|---|---|---|---|---|---|---|---|\n" + rows +
        f"\n\nThroughput on {gpus} GPUs / ({gpus} x one GPU): **{ratio}** (target 0.85). Winner medians against "
        f"the one-GPU cluster campaign's winner (else the plain one's), %: {within}.\n")

if __name__ == "__main__":
    main()
