#!/usr/bin/env python3
"""Run the families on a GPU and write the benchmark record: <out>/<gpu>.md and <out>/<gpu>.json.

    python3 scripts/benchmark.py --out docs/benchmarks            # everything
    python3 scripts/benchmark.py --out /tmp/b --only copy,transpose

The speed targets of the issues live here (never in tests): each is checked against figures
measured in this same run and reported as met or missed in the record.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cudalab import __version__, catalog, gpu, report, runner  # noqa: E402
from cudalab.bench import Protocol  # noqa: E402

# (job name, family, request keywords). Every family in the catalog without a job here runs at
# its defaults, so a new family shows up in the record without touching this list.
JOBS = [
    ("copy 16384²", "copy", {"n": "16384"}),
    ("transpose 16384²", "transpose", {"n": "16384"}),
    ("reduce 2^24 float64", "reduce", {"n": "2^24", "dtype": "float64"}),
    ("reduce 2^26 float64", "reduce", {"n": "2^26", "dtype": "float64"}),
    ("reduce 2^24 float32", "reduce", {"n": "2^24", "dtype": "float32"}),
    ("reduce 2^24 int32", "reduce", {"n": "2^24", "dtype": "int32"}),
    ("matmul 4096³", "matmul", {"n": "4096"}),
    ("gemm 4096³ α=1.5 β=0.5", "gemm", {"n": "4096", "options": (("alpha", 1.5), ("beta", 0.5))}),
    ("gemv 8192²", "gemv", {"n": "8192"}),
    ("sort 2^24 int32", "sort", {"n": "2^24", "dtype": "int32"}),
    ("search binary 2^24 queries on 2^24", "search",
     {"n": "2^24", "dtype": "int32", "variants": "host-binary,binary", "options": (("queries", 2**24),)}),
]


def best(rows, kind="kernel", key="gbs"):
    """The fastest passed row of a kind (by GB/s or GFLOP/s)."""
    ok = [r for r in rows if r.kind == kind and r.status == runner.PASSED and getattr(r, key)]
    return max(ok, key=lambda r: getattr(r, key)) if ok else None


def best_rate(rows, kind="kernel"):
    """The passed row of a kind with the highest item rate (extra['rate'], families with metric 'rate')."""
    ok = [r for r in rows if r.kind == kind and r.status == runner.PASSED and r.extra.get("rate")]
    return max(ok, key=lambda r: r.extra["rate"]) if ok else None


def targets(runs: dict) -> list[tuple[str, str, bool | None]]:
    """Evaluate every issue target on this run's figures: (target, measured, met)."""
    out = []

    def ratio(name, job, num, den, need, what):
        if job not in runs or runs[job].get("error"):
            out.append((name, "not run", None))
            return
        if num is None or den is None:
            out.append((name, "missing row", False))
            return
        v = num / den
        out.append((name, f"{what}: {v:.1%}", v >= need))

    for job, need, label in (("copy 16384²", 0.95, "copy"), ("transpose 16384²", 0.90, "transpose")):
        run = runs.get(job, {})
        rows = run.get("rows", [])
        b = best(rows)
        roof = run.get("roofline")
        ratio(f"best {label} ≥ {need:.0%} of memcpy_dtod (16384², same run)", job, b.gbs if b else None,
              roof.dtod_gbs if roof else None, need,
              f"{b.variant if b else '?'} {b.gbs if b else 0:,.0f} / dtod {roof.dtod_gbs if roof else 0:,.0f} GB/s")
    for job in ("reduce 2^24 float64", "reduce 2^26 float64"):
        rows = runs.get(job, {}).get("rows", [])
        b, cub = best(rows), best(rows, "library")
        ratio(f"{job}: best kernel ≥ CuPy sum (CUB)", job, b.gbs if b else None, cub.gbs if cub else None, 1.0,
              f"{b.variant if b else '?'} {b.gbs if b else 0:,.0f} / cub {cub.gbs if cub else 0:,.0f} GB/s")
    run = runs.get("reduce 2^26 float64", {})
    b, roof = best(run.get("rows", [])), run.get("roofline")
    ratio("reduce 2^26 float64: best ≥ 90% of memcpy_dtod", "reduce 2^26 float64", b.gbs if b else None,
          roof.dtod_gbs if roof else None, 0.90,
          f"{b.variant if b else '?'} {b.gbs if b else 0:,.0f} / dtod {roof.dtod_gbs if roof else 0:,.0f} GB/s")
    for job, need in (("matmul 4096³", 0.70), ("gemv 8192²", 0.90)):
        rows = runs.get(job, {}).get("rows", [])
        key = "gflops" if job.startswith("matmul") else "gbs"
        b, lib = best(rows, key=key), best(rows, "library", key=key)
        ratio(f"{job}: best ≥ {need:.0%} of cuBLAS", job, getattr(b, key) if b else None,
              getattr(lib, key) if lib else None, need,
              f"{b.variant if b else '?'} {getattr(b, key) if b else 0:,.0f} / cublas {getattr(lib, key) if lib else 0:,.0f}")
    # Rates in keys (queries) per second: a time within 4x is a rate at least 1/4.
    job = "sort 2^24 int32"
    rows = runs.get(job, {}).get("rows", [])
    b, lib = best_rate(rows), best_rate(rows, "library")
    ratio(f"{job}: best GPU sort within 4x of CuPy's sort time", job, b.extra["rate"] if b else None,
          lib.extra["rate"] if lib else None, 0.25,
          f"{b.variant if b else '?'} {b.extra['rate'] if b else 0:.2f} / cupy {lib.extra['rate'] if lib else 0:.2f} "
          "Gkeys/s (rate ratio)")
    job = "search binary 2^24 queries on 2^24"
    rows = runs.get(job, {}).get("rows", [])
    b, host = best_rate(rows), best_rate(rows, "host")
    name = f"{job}: binary ≥ 10x NumPy searchsorted"
    if job not in runs or runs[job].get("error"):
        out.append((name, "not run", None))
    elif b is None or host is None:
        out.append((name, "missing row", False))
    else:
        v = b.extra["rate"] / host.extra["rate"]
        out.append((name, f"{b.variant} {b.extra['rate']:.3f} / numpy {host.extra['rate']:.4f} Gqueries/s: {v:,.0f}x",
                    v >= 10.0))
    return out


#: Timing truth (issue 4): event median vs ncu's gpu__time_duration for every variant above 0.5 ms.
TRUTH_JOBS = (("transpose 16384²", "transpose", ["--n", "16384"]), ("reduce 2^26 float64", "reduce",
              ["--n", "2^26", "--dtype", "float64"]))


def timing_truth(runs: dict) -> list[dict]:
    """Profile the transpose and reduce variants with ncu (metric set 'time') and compare with events."""
    from cudalab import ncu

    out = []
    for job, fam, args in TRUTH_JOBS:
        if job not in runs or runs[job].get("error"):
            continue
        events = {r.variant: r.median_ms for r in runs[job]["rows"] if r.kind == "kernel" and r.median_ms}
        slow = [v for v, ms in events.items() if ms > 0.5]
        if not slow:
            continue
        rep = ncu.profile(fam, ",".join(slow), args, metrics="time")
        for row in rep.rows:
            ev, nc = events.get(row.variant), row.duration_ms
            diff = (ev - nc) / nc if ev and nc else None
            out.append({"job": job, "variant": row.variant, "event_ms": ev, "ncu_ms": nc,
                        "diff": diff, "ok": diff is not None and abs(diff) <= 0.03, "note": row.note})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/benchmarks")
    ap.add_argument("--only", default=None, help="comma list of families")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--no-ncu", action="store_true", help="skip the timing-truth comparison with ncu")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    cat = catalog.load_catalog()
    jobs = [j for j in JOBS if j[1] in cat]
    jobs += [(f"{name} (defaults)", name, {}) for name in cat if name not in {j[1] for j in JOBS}]
    if only:
        jobs = [j for j in jobs if j[1] in only]

    dev = gpu.Device(0)
    info = dev.info
    runs: dict[str, dict] = {}
    for job, fam, kw in jobs:
        t0 = time.time()
        print(f"== {job}", file=sys.stderr, flush=True)
        try:
            req = runner.RunRequest(family=fam, protocol=Protocol(budget_s=args.budget), seed=None, **kw)
            run = runner.FamilyRun(req, dev, on_result=lambda r: print(
                f"   {r.variant}: {r.status} {r.median_ms} {r.reason}", file=sys.stderr, flush=True))
            rows = report.pct_column(run.run(), cat[fam].metric)
            runs[job] = {"family": fam, "request": kw, "rows": rows, "roofline": run.roofline,
                         "problem": run.problem, "seconds": time.time() - t0}
        except Exception as exc:  # one family's failure must not lose the others' figures
            runs[job] = {"family": fam, "request": kw, "error": f"{type(exc).__name__}: {exc}",
                         "trace": traceback.format_exc()}
    dev.close()

    checks = targets(runs)
    truth: list[dict] = []
    if not args.no_ncu:
        try:
            truth = timing_truth(runs)
        except Exception as exc:  # ncu missing or refused: say so in the record, keep the rest
            truth = [{"job": "ncu", "variant": "–", "event_ms": None, "ncu_ms": None, "diff": None, "ok": False,
                      "note": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}]
        if truth:
            worst = max((abs(t["diff"]) for t in truth if t["diff"] is not None), default=None)
            checks.append(("event median within 3% of ncu gpu__time_duration (transpose, reduce; > 0.5 ms)",
                           f"{len(truth)} variants, worst {worst:.1%}" if worst is not None else "no figures",
                           all(t["ok"] for t in truth)))
    slug = re.sub(r"[^a-z0-9]+", "-", info.name.lower()).strip("-")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    today = datetime.date.today().isoformat()
    cmd = "python3 scripts/benchmark.py --out docs/benchmarks" + (f" --only {args.only}" if args.only else "")
    md = [f"# cudalab benchmark record: {info.name}", "",
          f"Measured {today} with cudalab {__version__} by `{cmd}` (a real run; nothing typed in).", "",
          f"GPU: {info.name}, {info.arch}, {info.sm_count} SMs, SM clock {info.sm_clock_mhz} MHz, memory clock "
          f"{info.mem_clock_mhz} MHz, L2 {info.l2_bytes / 2**20:.0f} MiB, {info.total_memory / 2**30:.0f} GiB; "
          f"driver {info.driver_release or '?'} (CUDA {info.driver_version} driver API), CUDA {info.cuda_version} "
          f"(pycuda build), CuPy {gpu.cupy_version() or 'absent'}.", "",
          "Timing: CUDA events around one launch, L2 flushed before each sample, median of ≥10 samples "
          "(until IQR/median < 1% or the budget), after a warm-up. GB/s counts each necessary byte once.", "",
          "## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for name, measured, met in checks:
        md.append(f"| {name} | {measured} | {'yes' if met else 'not run' if met is None else '**no**'} |")
    if truth:
        md += ["", "## Timing truth: CUDA events vs Nsight Compute", "",
               "Each variant above 0.5 ms profiled by `cudalab ncu FAMILY --metrics time` (one ncu run per variant, "
               "`--clock-control none`, ncu's own cache control) against the event median of the table below.", "",
               "| job | variant | event median ms | ncu gpu__time_duration ms | difference | within 3% |",
               "|---|---|---|---|---|---|"]
        for t in truth:
            ev = "–" if t["event_ms"] is None else f"{t['event_ms']:.4f}"
            nc = "–" if t["ncu_ms"] is None else f"{t['ncu_ms']:.4f}"
            md.append(f"| {t['job']} | {t['variant']} | {ev} | {nc} | "
                      f"{'' if t['diff'] is None else format(t['diff'], '+.2%')} | {'yes' if t['ok'] else 'no'} {t['note']} |")
    for job, run in runs.items():
        md += ["", f"## {job}", ""]
        if run.get("error"):
            md.append(f"Failed: `{run['error']}`")
            continue
        roof = run["roofline"]
        if roof:
            md += [f"Roofline {roof.gbs:,.0f} GB/s ({roof.source}; memcpy_dtod {roof.dtod_gbs:,.0f}"
                   + (f", copy kernel {roof.kernel_gbs:,.0f}" if roof.kernel_gbs else "") + " GB/s, same run).", ""]
        md.append(report.markdown_table(run["rows"], cat[run["family"]].metric))
    (out / f"{slug}.md").write_text("\n".join(md) + "\n")
    payload = {
        "cudalab": __version__, "date": today, "command": cmd, "device": info.to_dict(),
        "cupy": gpu.cupy_version(),
        "targets": [{"target": n, "measured": m, "met": ok} for n, m, ok in checks],
        "timing_truth": truth,
        "runs": {job: {k: (v if k in ("family", "request", "error", "trace", "seconds") else None) for k, v in run.items()}
                 | ({"problem": run["problem"].to_dict(), "roofline": run["roofline"].__dict__ if run["roofline"] else None,
                     "rows": [r.to_dict() for r in run["rows"]]} if not run.get("error") else {})
                 for job, run in runs.items()},
    }
    report.write_json(out / f"{slug}.json", payload)
    print(f"wrote {out / slug}.md and .json", file=sys.stderr)
    print("\n".join(f"{'MET ' if ok else 'NOT RUN' if ok is None else 'MISSED'}  {n}: {m}" for n, m, ok in checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
