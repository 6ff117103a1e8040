"""A cold campaign against its bound (issue 58, item 3): is a campaign as fast as its builds and its GPU allow?

Runs the 30-trial random campaign of the matmul warptile (seed 7, no race) from an empty build cache, on this
host's engine and with ``--cluster local``, each in a fresh process with ``CUDALAB_CACHE`` pointed at a fresh
folder of its own (one campaign's builds never serve another's), then measures the two terms of the bound:

* builds: the CPU-seconds nvcc takes to build those 30 trials' kernels (built again in one more fresh folder, on
  every core, timed as the children's CPU time), over the cores;
* GPU work: the campaign's seconds in the GPU worker with every cubin built, its trials' and its library row's (the
  same campaign again, warm, in the local run's cache: its ``in_workers``).

Each cold campaign passes when its wall is at most max(builds / cores, GPU work) + 20%: the campaign's own wall,
its time account's (from the campaign's start, its GPU worker open, to its result), since the interpreter's and the
GPU worker's start are no trial's; the command's wall (start to exit) and the warm campaign's are printed beside it.
A campaign on this host's engine begins its first builds while its GPU worker opens (``Executor.prebuild`` of
``tuning.prepare.first_requests``): what they do before the worker is open is in the command's wall and not in the
account's, so the cold command's wall less the warm one's is printed too: the cold campaign's whole extra cost (the interpreter's and the worker's
start are in both and cancel).
Prints one line per campaign and writes ``OUT/<gpu>-campaign.md`` and ``.json``::

    timeout -s KILL 240 python3 scripts/bench_campaign_cold.py --out docs/benchmarks

``--builds-only`` measures the builds term alone, on any machine with nvcc (no GPU): the campaign's first trials as
its own random walk proposes them (the family's configuration first), built for ``--arch``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGN = ["tune", "matmul", "--variant", "warptile", "--strategy", "random", "--seed", "7", "--race", "0", "--quiet"]
SLACK = 0.20


def campaign(folder: Path, trials: int, extra: list[str], cache: Path, timeout: float,
             profile: Path | None = None, timeline: Path | None = None) -> dict:
    """One campaign in a fresh process with its own build cache; its wall, time account and trials. ``profile``: a
    folder for cProfile's files of its processes (``CUDALAB_PROFILE``: the parent's and the GPU worker's);
    ``timeline``: a file for its events (``CUDALAB_TIMELINE``: scripts/campaign_timeline.py reads it)."""
    cache.mkdir(parents=True, exist_ok=True)
    out = folder / "t.json"
    argv = [sys.executable, "-m", "cudalab", *CAMPAIGN, "--trials", str(trials),
            "--storage", f"sqlite:///{folder / 'c.db'}", "--json", str(out), *extra]
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=folder, timeout=timeout,
                          env={**os.environ, "CUDALAB_CACHE": str(cache), "COLUMNS": "160",
                               **({"CUDALAB_PROFILE": str(profile)} if profile is not None else {}),
                               **({"CUDALAB_TIMELINE": str(timeline)} if timeline is not None else {})})
    wall = time.monotonic() - t0
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"campaign {' '.join(extra) or 'local'} failed ({proc.returncode}):\n{proc.stdout[-2000:]}"
                         f"\n{proc.stderr[-2000:]}")
    rec = json.loads(out.read_text())
    from cudalab.instruments.driverquery import gpu_name  # a campaign without a race records no device

    return {"wall_s": round(wall, 2), "account": rec["tune"]["time"], "gpu_busy_pct": rec["tune"]["gpu_busy_pct"],
            "trials": [t["point"] for t in rec["tune"]["trials"] if t["status"] not in ("refused",)],
            "passed": sum(t["status"] == "passed" for t in rec["tune"]["trials"]),
            "gpu": (rec.get("device") or {}).get("name") or gpu_name(0) or "GPU",
            "cc": str((rec.get("device") or {}).get("compute_capability", "9.0"))}


def builds_cpu(points: list[dict], arch: str, cache: Path, cores: int) -> tuple[float, float]:
    """(CPU-seconds, wall seconds) nvcc takes to build these points' kernels into an empty ``cache`` on ``cores``
    threads (the children's CPU time: nvcc and the compilers it starts)."""
    os.environ["CUDALAB_CACHE"] = str(cache)
    from cudalab.tuning.buildpool import build_of
    from cudalab.tuning.drive import plan, trial_request
    from cudalab.tuning.options import TuneOptions

    p = plan(TuneOptions(family="matmul", variant="warptile", strategy="random", seed=7, race=0))
    jobs = [build_of(trial_request(p, pt), arch) for pt in points]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with ThreadPoolExecutor(cores) as pool:
        for f in [pool.submit(j) for j in jobs]:
            f.result()
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def first_build_s(point: dict, arch: str, cache: Path) -> float:
    """Seconds the first trial's build takes alone, into an empty ``cache``: what a cold campaign's GPU waits for
    at least, unless the build began while the GPU worker opened (and what the bound's 20% must cover)."""
    from cudalab.tuning.buildpool import build_of
    from cudalab.tuning.drive import plan, trial_request
    from cudalab.tuning.options import TuneOptions

    os.environ["CUDALAB_CACHE"] = str(cache)
    job = build_of(trial_request(plan(TuneOptions(family="matmul", variant="warptile", strategy="random", seed=7,
                                                  race=0)), point), arch)
    t0 = time.monotonic()
    job()
    return time.monotonic() - t0


def walk_points(trials: int) -> list[dict]:
    """The campaign's first ``trials`` points as its random walk proposes them (what the CPU and the launch rules
    refuse is never built, as in the campaign)."""
    from cudalab.errors import LaunchConfigError, UsageError
    from cudalab.tuning.drive import plan, proposer
    from cudalab.tuning.options import TuneOptions
    from cudalab.tuning.prepare import trial_request
    from cudalab.tuning.runs import precheck

    p = plan(TuneOptions(family="matmul", variant="warptile", strategy="random", seed=7, race=0, trials=trials))
    prop, points = proposer(p), []
    while len(points) < trials and (pt := prop.next_walk(())) is not None:
        try:
            if not p.space.allows(pt):
                precheck(trial_request(p, pt))
                points.append(pt)
        except (UsageError, LaunchConfigError):
            pass
    return points


def profile_summary(folder: Path, top: int = 30) -> str:
    """The top ``top`` functions by cumulative time of each profile under ``folder`` (one folder a campaign), cudalab's
    own and the waits they call: where a cold campaign's extra seconds go, beside the warm one's."""
    import io
    import pstats

    out = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        for prof in sorted(sub.glob("*.prof")):
            text = io.StringIO()
            pstats.Stats(str(prof), stream=text).sort_stats("cumulative").print_stats("cudalab|thread|queue", top)
            out.append(f"=== {sub.name}: {prof.name}\n{text.getvalue().split('function calls', 1)[-1]}")
    return "\n".join(out)


def _busy(pct: float | None) -> str:
    """GPU busy % as the table shows it (a cluster's GPUs are not read from here: -)."""
    return "-" if pct is None else f"{pct:.0f}"


def _prof(root: Path, name: str, asked: str | None) -> Path | None:
    """The folder a campaign's profiles go to (under ``root``) when ``--profile`` asked for them."""
    if not asked:
        return None
    folder = root / "profiles" / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/benchmarks")
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--timeout", type=float, default=150, help="seconds a campaign may take")
    ap.add_argument("--builds-only", action="store_true", help="measure the builds term alone (no GPU)")
    ap.add_argument("--arch", default="sm_90", help="--builds-only: the architecture to build for")
    ap.add_argument("--profile", default=None, metavar="DIR",
                    help="profile each campaign's processes (cProfile) and write DIR/profiles.txt: the top functions "
                         "of each, cold and warm (a question of where the time goes: profiled, a campaign runs slower "
                         "and its verdict is no record's; the record's command names --profile)")
    ap.add_argument("--timeline", action="store_true",
                    help="write OUT/<gpu>-campaign-timeline.txt: where the local cold campaign's GPU waited, and for "
                         "which build (CUDALAB_TIMELINE; scripts/campaign_timeline.py)")
    ap.add_argument("--tune-args", default="", metavar="ARGS",
                    help="more arguments for every campaign (cold and warm, both engines), e.g. '--build-ahead 8': "
                         "a question of what a setting does; the record's command and campaign name them")
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    if args.builds_only:
        points = walk_points(args.trials)
        with tempfile.TemporaryDirectory(prefix="cold-builds-") as tmp:
            first = first_build_s(points[0], args.arch, Path(tmp) / "first")
            cpu, bwall = builds_cpu(points, args.arch, Path(tmp) / "all", cores)
        print(f"builds: {cpu:.1f} CPU-s for {len(points)} trials, {cpu / len(points):.2f} each ({bwall:.1f} s on "
              f"{cores} threads; {cpu / cores:.1f} s a core); the first trial's alone: {first:.2f} s")
        return 0
    with tempfile.TemporaryDirectory(prefix="cold-campaign-") as tmp:
        root = Path(tmp)
        runs = {}
        more = shlex.split(args.tune_args)
        for name, extra in (("local", more), ("cluster", [*more, "--cluster", "local"])):
            (root / name).mkdir()
            runs[name] = campaign(root / name, args.trials, extra, root / f"cache-{name}", args.timeout,
                                  _prof(root, name, args.profile),
                                  root / name / "timeline.jsonl" if args.timeline and name == "local" else None)
            a = runs[name]["account"]
            print(f"{name}: cold {runs[name]['wall_s']:.1f} s (account: {json.dumps(a)}; GPU busy "
                  f"{runs[name]['gpu_busy_pct']})", flush=True)
        (root / "warm").mkdir()
        warm = campaign(root / "warm", args.trials, more, root / "cache-local", args.timeout,
                        _prof(root, "warm", args.profile))
        gpu_work = float(warm["account"].get("in_workers") or warm["account"]["trials"])
        print(f"warm (local, its cache): {warm['wall_s']:.1f} s (account: {json.dumps(warm['account'])}), the "
              f"campaign in the worker {gpu_work:.1f} s", flush=True)
        arch = "sm_" + runs["local"]["cc"].replace(".", "")
        first = first_build_s(runs["local"]["trials"][0], arch, root / "cache-first")
        cpu, bwall = builds_cpu(runs["local"]["trials"], arch, root / "cache-builds", cores)
        told = ""
        if args.timeline:  # the local cold campaign's (the cluster's builds and tasks run in its Dask workers)
            sys.path.insert(0, str(ROOT / "scripts"))
            import campaign_timeline  # noqa: PLC0415

            events = root / "local" / "timeline.jsonl"
            told = campaign_timeline.summary(campaign_timeline.read(events) if events.exists() else [])
            print(told, flush=True)
        if args.profile:
            Path(args.profile).mkdir(parents=True, exist_ok=True)
            (Path(args.profile) / "profiles.txt").write_text(profile_summary(root / "profiles"))
        print(f"builds: {cpu:.1f} CPU-s for {len(runs['local']['trials'])} trials ({bwall:.1f} s on {cores} threads); "
              f"the first trial's alone: {first:.2f} s", flush=True)
    term_builds = cpu / cores
    bound = max(term_builds, gpu_work) * (1 + SLACK)
    verdicts = {n: r["account"]["wall"] <= bound for n, r in runs.items()}
    for n, r in runs.items():
        print(f"{n}: wall {r['account']['wall']:.1f} s (the command's {r['wall_s']:.1f} s; warm {warm['wall_s']:.1f} s); "
              f"builds {cpu:.1f} CPU-s / {cores} cores = {term_builds:.1f} s; GPU work {gpu_work:.1f} s; "
              f"bound max(..) + 20% = {bound:.1f} s: {'PASS' if verdicts[n] else 'FAIL'}; the cold command less the "
              f"warm one: {r['wall_s'] - warm['wall_s']:.1f} s")
    gpu = runs["local"]["gpu"]
    rec = {"date": time.strftime("%Y-%m-%d"), "gpu": gpu, "cores": cores, "trials": args.trials,
           "command": "python3 scripts/bench_campaign_cold.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "campaign": "cudalab " + " ".join([*CAMPAIGN, *shlex.split(args.tune_args)]) + f" --trials {args.trials}",
           "builds_cpu_s": round(cpu, 2), "builds_wall_s": round(bwall, 2), "first_build_s": round(first, 2), "builds_term_s": round(term_builds, 2),
           "gpu_work_s": round(gpu_work, 2), "bound_s": round(bound, 2), "warm_wall_s": warm["wall_s"],
           "warm_account": warm["account"],
           "runs": {n: {k: v for k, v in r.items() if k != "trials"} | {"pass": verdicts[n]} for n, r in runs.items()}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / (re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") + "-campaign")
    stem.with_suffix(".json").write_text(json.dumps(rec, indent=1) + "\n")
    lines = [f"# A cold campaign against its bound on {gpu} ({rec['date']})", "",
             f"Made by `{rec['command']}` ({cores} cores). The campaign: `{rec['campaign']}`, from an empty build "
             "cache of its own each time (`CUDALAB_CACHE`), on this host's engine and with `--cluster local`.", "",
             f"Bound: max(builds {cpu:.1f} CPU-s / {cores} cores = {term_builds:.1f} s, GPU work {gpu_work:.1f} s) "
             f"+ 20% = **{bound:.1f} s** (builds: the trials' kernels built again into an empty cache on every core, "
             "nvcc's CPU time; GPU work: the campaign's seconds in the GPU worker, its trials' and its library row's, the "
             "same campaign warm). Cold wall: the "
             "campaign's time account's (from its start, the GPU worker open, to its result; on this host's engine the "
             "first builds begin earlier, while the worker opens); the command's: from the process's start to its exit.",
             "",
             "| engine | cold wall s | the command's s | trials in worker s | waiting for builds s | search s | "
             "GPU busy % | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for n, r in runs.items():
        a = r["account"]
        lines.append(f"| {n} | {a['wall']:.1f} | {r['wall_s']:.1f} | {a.get('in_workers', a['trials']):.1f} | {a['builds']:.1f} | "
                     f"{a['search']:.1f} | {_busy(r['gpu_busy_pct'])} | "
                     f"{'PASS' if verdicts[n] else 'FAIL'} |")
    lines += ["", f"Warm (the local run's cache, a fresh campaign file): {warm['account']['wall']:.1f} s by its time "
              f"account, {warm['wall_s']:.1f} s the command's. The first trial's build alone (an empty cache): "
              f"{first:.2f} s.", ""]
    stem.with_suffix(".md").write_text("\n".join(lines))
    if told:
        stem.with_name(stem.name + "-timeline.txt").write_text(f"{rec['command']}: the local cold campaign\n{told}\n")
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
