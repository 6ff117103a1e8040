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
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cudalab import __version__, catalog, gpu, report, runner  # noqa: E402
from cudalab.bench import Protocol  # noqa: E402

import bench_ceiling as C  # noqa: E402
import bench_sections as S  # noqa: E402
from bench_record import record_markdown, section_checks  # noqa: E402

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

    # Issue 16: the memory-bound rungs against the roofline (the faster of memcpy_dtod and the copy
    # family's roofline kernel, measured in the same run on the same bytes).
    for job, need, label in (("copy 16384²", 0.98, "copy"), ("transpose 16384²", 0.97, "transpose"),
                             ("gemv 8192²", 0.95, "gemv")):
        run = runs.get(job, {})
        b = best(run.get("rows", []))
        roof = run.get("roofline")
        ratio(f"best {label} ≥ {need:.0%} of the roofline ({job}, same run)", job, b.gbs if b else None,
              roof.gbs if roof else None, need,
              f"{b.variant if b else '?'} {b.gbs if b else 0:,.0f} / roofline {roof.gbs if roof else 0:,.0f} GB/s "
              f"({roof.source if roof else '?'})")
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
    for job, need in (("matmul 4096³", 0.90), ("gemm 4096³ α=1.5 β=0.5", 0.88)):
        rows = runs.get(job, {}).get("rows", [])
        b, lib = best(rows, key="gflops"), best(rows, "library", key="gflops")
        ratio(f"{job}: best ≥ {need:.0%} of cuBLAS (TF32 off, same run)", job, b.gflops if b else None,
              lib.gflops if lib else None, need,
              f"{b.variant if b else '?'} {b.gflops if b else 0:,.0f} / cublas {lib.gflops if lib else 0:,.0f} GFLOP/s")
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


def run_jobs(jobs: list, budget: float) -> tuple[dict, dict]:
    """Run every job on one GPU with telemetry; one job's failure never loses the others' figures."""
    from cudalab import sweep

    first = runner.RunRequest(family=jobs[0][1])
    tele = sweep.open_telemetry(first)
    dev = gpu.Device(0)
    if tele.telemetry is not None:
        tele.telemetry.after_open()
    runs: dict[str, dict] = {}
    for job, fam, kw in jobs:
        t0 = time.time()
        print(f"== {job}", file=sys.stderr, flush=True)
        try:
            req = runner.RunRequest(family=fam, protocol=Protocol(budget_s=budget), seed=None, **kw)
            run = runner.FamilyRun(req, dev, telemetry=tele.telemetry, on_result=lambda r: print(
                f"   {r.variant}: {r.status} {r.median_ms} {r.reason}", file=sys.stderr, flush=True))
            rows = report.pct_column(run.run(), run.spec.metric)
            runs[job] = {"family": fam, "request": kw, "rows": rows, "roofline": run.roofline,
                         "problem": run.problem, "seconds": time.time() - t0}
        except Exception as exc:  # one family's failure must not lose the others' figures
            runs[job] = {"family": fam, "request": kw, "error": f"{type(exc).__name__}: {exc}",
                         "trace": traceback.format_exc()}
    info = dev.info.to_dict()
    info["telemetry"] = tele.telemetry.summary() if tele.telemetry is not None else {"note": tele.note}
    info["free_bytes"] = dev.mem_info()[0]
    if tele.telemetry is not None:
        tele.telemetry.close()
    dev.close()
    return runs, info


def section(name: str, fn, *args):
    """Run one section; its failure is written into the record, not raised."""
    print(f"== section {name}", file=sys.stderr, flush=True)
    try:
        return fn(*args)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                "trace": traceback.format_exc()}


def write_record(out: Path, slug: str, info: dict, cmd: str, checks, runs: dict, extra: dict, cat) -> None:
    """Write <slug>.md and <slug>.json (again after each late section: a cut-off run keeps a record)."""
    md = record_markdown(info, cmd, checks, runs, extra, cat)
    (out / f"{slug}.md").write_text("\n".join(md) + "\n")
    payload = {
        "cudalab": __version__, "date": datetime.date.today().isoformat(), "command": cmd, "device": info,
        "cupy": gpu.cupy_version(),
        "targets": [{"target": n, "measured": m, "met": ok} for n, m, ok in checks],
        **extra,
        "runs": {job: {k: (v if k in ("family", "request", "error", "trace", "seconds") else None) for k, v in run.items()}
                 | ({"problem": run["problem"].to_dict(), "roofline": run["roofline"].__dict__ if run["roofline"] else None,
                     "rows": [r.to_dict() for r in run["rows"]]} if not run.get("error") else {})
                 for job, run in runs.items()},
    }
    report.write_json(out / f"{slug}.json", payload)
    print(f"wrote {out / slug}.md and .json", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/benchmarks")
    ap.add_argument("--only", default=None, help="comma list of families")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--skip", default="", help="comma list of sections to skip: wall,saved,ncu,energy,truth,table36,ceiling,large")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    only = set(args.only.split(",")) if args.only else None
    cat = catalog.load_catalog()
    jobs = [j for j in JOBS if j[1] in cat]
    jobs += [(f"{name} (defaults)", name, {}) for name in cat if name not in {j[1] for j in JOBS}]
    if only:
        jobs = [j for j in jobs if j[1] in only]
    runs, info = run_jobs(jobs, args.budget)
    slug = re.sub(r"[^a-z0-9]+", "-", info["name"].lower()).strip("-")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    checks = targets(runs)
    extra: dict = {}
    if "wall" not in skip:
        extra["time_to_table"] = section("wall", S.time_to_table, out)
    if "saved" not in skip:
        extra["saved_runs"] = section("saved", S.saved_runs, slug, out)
    if "ncu" not in skip:
        extra["ncu_walls"] = section("ncu", S.ncu_walls)
    if "energy" not in skip:
        extra["energy"] = section("energy", S.energy)
    if "truth" not in skip:
        extra["timing_truth"] = section("truth", S.timing_truth, runs)
    if "table36" not in skip:
        extra["table36"] = section("table36", S.table36, runs)
    if "ceiling" not in skip:
        run = runs.get("transpose 16384²", {})
        b = best(run.get("rows", []))
        if b is not None and run.get("roofline") and b.gbs < 0.97 * run["roofline"].gbs:
            extra["ceiling"] = section("ceiling", C.ceiling, runs, "transpose 16384²", "transpose", b.variant, "16384")
    cmd = ("python3 scripts/benchmark.py --out docs/benchmarks" + (f" --only {args.only}" if args.only else "")
           + (f" --skip {args.skip}" if args.skip else ""))
    write_record(out, slug, info, cmd, checks + section_checks(extra), runs, extra, cat)
    if "large" not in skip:  # last, and after a first record: the largest sizes take minutes
        from cudalab import memplan

        extra["large"] = section("large", S.largest, info["free_bytes"], memplan.host_available())
        checks = checks + section_checks(extra)
        write_record(out, slug, info, cmd, checks, runs, extra, cat)
    else:
        checks = checks + section_checks(extra)
    print("\n".join(f"{'MET ' if ok else 'NOT RUN' if ok is None else 'MISSED'}  {n}: {m}" for n, m, ok in checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
