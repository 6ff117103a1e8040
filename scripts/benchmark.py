#!/usr/bin/env python3
"""Run the families on a GPU and write the benchmark record: <out>/<gpu>.md and <out>/<gpu>.json.

    python3 scripts/benchmark.py --out docs/benchmarks            # everything, one process (~17 min)
    python3 scripts/benchmark.py --out /tmp/b --only copy,transpose --sections jobs

The speed targets of the issues live in bench_record.py (never in tests): each is checked against
figures measured in this same run and reported as met, missed or not run in the record.

Sections, in the order they run: jobs (every family at the sizes of JOBS, in this process), large
(the largest size the memory plan allows, whole commands), wall (time to table, and a profile of the
slowest command), saved, ncu, energy, truth, table36, ceiling (only when the transpose target is
missed). ``--sections`` picks some, ``--skip`` leaves some out.

One record in two calls. The whole benchmark takes about 17 minutes on an H100 or H200 (jobs about
5 min, large about 3, the rest about 8.5; estimates from the records of 2026-11-23 plus the new jobs),
more than one 10-minute GPU call. ``--merge EARLIER`` (a record's .json, or the folder holding it, of
which <gpu>.json is taken) starts from an earlier call's record on the same GPU and adds this call's
jobs and sections (this call's replace the earlier call's of the same name; runs.tar.gz is copied
along); the record names both commands. On each GPU, from the repository root:

    # call 1: the jobs and the large sizes
    timeout -s KILL 580 python3 scripts/benchmark.py --out $OUT/bench --sections jobs,large --deadline 540
    # call 2: call 1's bench/ folder (its <gpu>.json) copied to .bench1/ (ignored; carried along)
    timeout -s KILL 580 python3 scripts/benchmark.py --out $OUT/bench --merge .bench1 \
        --sections wall,saved,ncu,energy,truth,table36,ceiling --deadline 540

(through scripts/gpu-check.sh: STAGE_TIMEOUT=580 BENCH_ARGS='--sections jobs,large --deadline 540'
bash scripts/gpu-check.sh bench, then the same with call 2's arguments.) The record is call 2's
<gpu>.md, <gpu>.json and runs.tar.gz.

One record from two GPUs at once. On a machine with two GPUs of one model the two calls run side by side,
each on its own GPU, and a third merges their records without a GPU (``--sections none``; ``--merge``
again, or a comma list, for several records: a later one's jobs and sections replace an earlier one's of
the same name). truth, table36 and ceiling read jobs' figures (SECTION_JOBS), so the second call runs
those jobs itself; a section whose jobs neither its call ran nor a merged record holds is not started,
and the record says so. Merging records of two GPU models is refused. The record lists each call
(``calls``: command, host, GPU bus id, CUDA_VISIBLE_DEVICES, start and end, sections, jobs) and its
header says which GPU ran what and whether at the same time:

    CUDA_VISIBLE_DEVICES=0 python3 scripts/benchmark.py --out $OUT/bench-gpu0 --sections jobs,large &
    CUDA_VISIBLE_DEVICES=1 python3 scripts/benchmark.py --out $OUT/bench-gpu1 --only copy,transpose,reduce \
        --sections jobs,wall,saved,ncu,energy,truth,table36,ceiling &
    wait; python3 scripts/benchmark.py --sections none --merge $OUT/bench-gpu0 --merge $OUT/bench-gpu1 --out $OUT/bench

(``bash scripts/gpu-check.sh bench-lanes`` runs these three, with ``--deadline``; its header says how.)

``--deadline S``: a section is not started when the seconds since this script began plus the
section's expected seconds (EXPECTED_S) would pass S; the record says "not run" for it, with the call
that adds it: ``--sections NAME --merge`` the record so far (a third call, if one of the two ran
long). The record is rewritten after every section, so a call cut off keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cudalab import plan as planning
from cudalab import __version__, catalog, report  # noqa: E402
from cudalab.families.model import cupy_version  # noqa: E402
from cudalab.worker import gpu  # noqa: E402
from cudalab.worker import executor as runner  # noqa: E402
from cudalab.bench import Protocol  # noqa: E402

import bench_ceiling as C  # noqa: E402
import bench_merge as M  # noqa: E402
import bench_sections as S  # noqa: E402
from bench_merge import SECTION_KEY, SECTIONS, refuse, slug_of  # noqa: E402
from bench_record import best, best_rate, record_markdown, section_checks, targets  # noqa: E402,F401

#: The GEMM ladders without the host row (NumPy on the CPU: seconds a call at 4096³, skipped above).
HGEMM_RUNGS = "wmma,mma,wgmma,cublas"

# (job name, family, request keywords). Every family in the catalog without a job here runs at
# its defaults, so a new family shows up in the record without touching this list. Jobs that carry a
# target are named in bench_record.targets.
JOBS = [
    ("copy 16384²", "copy", {"n": "16384"}),
    ("transpose 16384²", "transpose", {"n": "16384"}),
    ("reduce 2^24 float64", "reduce", {"n": "2^24", "dtype": "float64"}),
    ("reduce 2^26 float64", "reduce", {"n": "2^26", "dtype": "float64"}),
    ("reduce 2^24 float32", "reduce", {"n": "2^24", "dtype": "float32"}),
    ("reduce 2^24 int32", "reduce", {"n": "2^24", "dtype": "int32"}),
    ("matmul 4096³", "matmul", {"n": "4096"}),
    # the rungs near cuBLAS only (naive is ~1 s a launch here); checked on NumPy's full product (the
    # sketch starts above 8192³)
    ("matmul 8192³", "matmul", {"n": "8192", "variants": "dbuf,async,warptile,streamk,cublas"}),
    ("gemm 4096³ α=1.5 β=0.5", "gemm", {"n": "4096", "options": (("alpha", 1.5), ("beta", 0.5))}),
    ("gemv 8192²", "gemv", {"n": "8192"}),
    # wmma is ~10 ms a launch at 8192³ (about 110 TFLOP/s): its ≥10 samples stay inside the 0.5 s budget
    ("hgemm 8192³ bf16", "hgemm", {"n": "8192", "dtype": "bfloat16", "variants": HGEMM_RUNGS}),
    ("hgemm 8192³ fp16", "hgemm", {"n": "8192", "dtype": "float16", "variants": HGEMM_RUNGS}),
    ("hgemm 4096³ bf16", "hgemm", {"n": "4096", "dtype": "bfloat16", "variants": HGEMM_RUNGS}),
    ("hgemm 4096³ fp16", "hgemm", {"n": "4096", "dtype": "float16", "variants": HGEMM_RUNGS}),
    ("sort 2^24 int32", "sort", {"n": "2^24", "dtype": "int32"}),
    # the radix sorts and CuPy: NumPy's sort of 2^28 keys and the comparison sorts would take minutes
    ("sort 2^28 int32", "sort", {"n": "2^28", "dtype": "int32", "variants": "radix,onesweep,cupy"}),
    ("search binary 2^24 queries on 2^24", "search",
     {"n": "2^24", "dtype": "int32", "variants": "host-binary,binary", "options": (("queries", 2**24),)}),
]

#: The jobs a section reads (its kernels, Table 3-5's times, the transpose's figure against its target): a call that
#: runs the section neither runs nor merges any of them -> the section is not started, and the record says why.
SECTION_JOBS = {"truth": S.TRUTH_JOBS, "table36": ("reduce 2^24 int32",), "ceiling": ("transpose 16384²",)}
#: Rough seconds of each section on an H100/H200 (records of 2026-11-23: large 255 s with cuBLAS's 46340³ row;
#: truth 15 kernels x 2 processes under ncu; ceiling's sweeps, spread and probe). --deadline uses them.
EXPECTED_S = {"large": 190, "wall": 60, "saved": 20, "ncu": 80, "energy": 10, "truth": 190, "table36": 15,
              "ceiling": 140}


def run_jobs(jobs: list, budget: float) -> tuple[dict, dict]:
    """Run every job on one GPU with telemetry; one job's failure never loses the others' figures. With no
    jobs, only the device's description (and its free memory, for the large section)."""
    from cudalab.execute.local.engine import open_telemetry

    tele = open_telemetry(planning.RunRequest(family=jobs[0][1])) if jobs else None
    dev = gpu.Device(0)
    if tele is not None and tele.telemetry is not None:
        tele.telemetry.after_open()
    runs: dict[str, dict] = {}
    for job, fam, kw in jobs:
        t0 = time.time()
        print(f"== {job}", file=sys.stderr, flush=True)
        try:
            req = planning.RunRequest(family=fam, protocol=Protocol(budget_s=budget), seed=None, **kw)
            run = runner.FamilyRun(planning.precheck(req), dev, telemetry=tele.telemetry, on_result=lambda r: print(
                f"   {r.variant}: {r.status} {r.median_ms} {r.reason}", file=sys.stderr, flush=True))
            rows = report.pct_column(run.run(), run.spec.metric)
            runs[job] = {"family": fam, "request": kw, "rows": rows, "roofline": run.roofline,
                         "problem": run.problem, "seconds": time.time() - t0}
        except Exception as exc:  # one family's failure must not lose the others' figures
            runs[job] = {"family": fam, "request": kw, "error": f"{type(exc).__name__}: {exc}",
                         "trace": traceback.format_exc(), "seconds": time.time() - t0}
    _release_cupy()  # CuPy's pools (cuBLAS, CUB rows) keep blocks the large section's commands need
    info = dev.info.to_dict()
    try:  # which GPU of the host this was (a record merged from several calls names each call's)
        info["pci_bus_id"] = gpu.pci_bus_id(0)
    except Exception:  # the record is still worth writing without it
        info["pci_bus_id"] = None
    if tele is not None:
        info["telemetry"] = tele.telemetry.summary() if tele.telemetry is not None else {"note": tele.note}
    info["free_bytes"] = dev.mem_info()[0]
    info["cupy"] = cupy_version()   # the measuring call's: a merge may run where CuPy is not
    if tele is not None and tele.telemetry is not None:
        tele.telemetry.close()
    dev.close()
    return runs, info


def _release_cupy() -> None:
    mod = sys.modules.get("cupy")
    if mod is None:
        return
    try:
        mod.get_default_memory_pool().free_all_blocks()
        mod.get_default_pinned_memory_pool().free_all_blocks()
    except Exception:  # no pools to free is no reason to lose the record
        pass


def section(name: str, fn, *args):
    """Run one section; its failure is written into the record, not raised."""
    print(f"== section {name}", file=sys.stderr, flush=True)
    t0 = time.time()
    try:
        return fn(*args)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                "trace": traceback.format_exc()}
    finally:
        print(f"   section {name}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)


def _problem(p):
    return p.to_dict() if hasattr(p, "to_dict") else p


def record_payload(info: dict, cmd: str, checks, runs: dict, extra: dict, calls=()) -> dict:
    """The JSON record (what --merge reads back)."""
    return {
        "cudalab": __version__, "date": datetime.date.today().isoformat(), "command": cmd, "calls": list(calls),
        "device": info, "cupy": info.get("cupy", cupy_version()),
        "targets": [{"target": n, "measured": m, "met": ok} for n, m, ok in checks],
        **extra,
        "runs": {job: {k: (v if k in ("family", "request", "error", "trace", "seconds") else None) for k, v in run.items()}
                 | ({"problem": _problem(run["problem"]), "roofline": run["roofline"].__dict__ if run["roofline"] else None,
                     "rows": [r.to_dict() for r in run["rows"]]} if not run.get("error") else {})
                 for job, run in runs.items()},
    }


def write_record(out: Path, slug: str, info: dict, cmd: str, checks, runs: dict, extra: dict, cat, calls=()) -> None:
    """Write <slug>.md and <slug>.json (again after each section: a cut-off run keeps a record)."""
    md = record_markdown(info, cmd, checks, runs, extra, cat, made=M.describe(list(calls), runs, info))
    (out / f"{slug}.md").write_text("\n".join(md) + "\n")
    report.write_json(out / f"{slug}.json", record_payload(info, cmd, checks, runs, extra, calls))
    print(f"wrote {out / slug}.md and .json", file=sys.stderr)


def chosen_sections(sections: str, skip: str) -> list[str]:
    """The sections this call runs, in SECTIONS' order ("none": none, for a call that only merges records).

    Raises:
        SystemExit: (exit 2, one line) a name that is no section.
    """
    want = (set(SECTIONS) if sections in ("", "all") else set() if sections == "none"
            else set(filter(None, sections.split(","))))
    drop = set(filter(None, skip.split(",")))
    unknown = (want | drop) - set(SECTIONS)
    if unknown:
        refuse(f"no section {', '.join(sorted(unknown))}; sections: {', '.join(SECTIONS)} (or none)")
    return [s for s in SECTIONS if s in want and s not in drop]


def over_deadline(name: str, elapsed: float, deadline: float | None) -> str | None:
    """Why section ``name`` is not started at ``elapsed`` seconds (None: start it)."""
    if deadline is None or elapsed + EXPECTED_S.get(name, 0) <= deadline:
        return None
    return (f"not started: {elapsed:.0f} s into the call plus its expected {EXPECTED_S.get(name, 0)} s would pass "
            f"--deadline {deadline:g}; add it with `--sections {name} --merge` this record")


def missing_jobs(name: str, runs: dict) -> str | None:
    """Why section ``name`` is not started: it reads jobs of which ``runs`` holds none (None: start it)."""
    need = SECTION_JOBS.get(name)
    if not need or any(job in runs for job in need):
        return None
    families = ",".join(dict.fromkeys(fam for job, fam, _ in JOBS if job in need))
    return (f"not started: it reads the job{'s' if len(need) > 1 else ''} {', '.join(need)}, which this call did not "
            f"run and no merged record holds; run {'them' if len(need) > 1 else 'it'} in the same call: "
            f"`--sections jobs,{name} --only {families}`")


def own_command(args, merges: int) -> str:
    """This call's command as the record names it (the output folder as docs/benchmarks, merged records as
    EARLIER, and the GPU it was given where CUDA_VISIBLE_DEVICES says)."""
    cmd = "python3 scripts/benchmark.py --out docs/benchmarks" + "".join(
        f" --{k} {v}" for k, v in (("only", args.only), ("sections", None if args.sections == "all" else args.sections),
                                   ("skip", args.skip), ("deadline", args.deadline and f"{args.deadline:g}")) if v)
    cmd += " --merge EARLIER" if merges == 1 else "".join(f" --merge EARLIER{i + 1}" for i in range(merges))
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    return (f"CUDA_VISIBLE_DEVICES={cvd} " if cvd is not None else "") + cmd


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/benchmarks")
    ap.add_argument("--only", default=None, help="comma list of families (the jobs section)")
    ap.add_argument("--budget", type=float, default=0.5)
    ap.add_argument("--sections", default="all",
                    help=f"comma list of sections to run: {','.join(SECTIONS)} (default all; none: only merge)")
    ap.add_argument("--skip", default="", help="comma list of sections to leave out")
    ap.add_argument("--merge", action="append", default=None,
                    help="an earlier call's record (.json, or its folder) of this GPU model to add to; again (or a "
                         "comma list) for several, later ones replacing earlier ones' jobs and sections")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds: start no section that would end after this (see EXPECTED_S)")
    args = ap.parse_args()
    t_start, started = time.monotonic(), M.now()
    chosen = chosen_sections(args.sections, args.skip)
    paths = M.merge_paths(args.merge)
    if not chosen and not paths:
        refuse("--sections none runs nothing: name the records to merge (--merge A --merge B)")
    only = set(args.only.split(",")) if args.only else None
    cat = catalog.load_catalog()
    jobs = [j for j in JOBS if j[1] in cat]
    jobs += [(f"{name} (defaults)", name, {}) for name in cat if name not in {j[1] for j in JOBS}]
    if only:
        jobs = [j for j in jobs if j[1] in only]
    # a call that only merges opens no GPU: its record's device is the earlier calls'
    runs, gpu_info = run_jobs(jobs if "jobs" in chosen else [], args.budget) if chosen else ({}, None)
    own_jobs = list(runs)
    earlier = M.load_all(paths, gpu_info["name"] if gpu_info else None)
    info = gpu_info or M.device_of(earlier, {})
    own = own_command(args, len(paths))
    slug = slug_of(info["name"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra: dict = {}
    calls: list[dict] = []
    cmd = own
    if earlier:
        earlier_runs, extra, calls = M.combine(earlier)
        runs = earlier_runs | runs
        if "jobs" not in chosen:  # the clocks and telemetry of the call whose jobs' figures the record holds
            info = M.device_of(earlier, runs) | ({"free_bytes": gpu_info["free_bytes"]} if gpu_info else {})
        cmd = f"{'; '.join(e['command'] for e in earlier)}, then {own}"
        tar = M.runs_tar(earlier)
        if tar is not None and "saved" not in chosen and tar.resolve() != (out / "runs.tar.gz").resolve():
            shutil.copyfile(tar, out / "runs.tar.gz")
    me = M.this_call(own, gpu_info, [s for s in chosen if s == "jobs"], own_jobs, started)
    calls = [*calls, me]

    def write():
        me["ended"] = M.now()
        write_record(out, slug, info, cmd, targets(runs) + section_checks(extra), runs, extra, cat, calls)

    write()
    for name in chosen:
        if name == "jobs":
            continue
        key = SECTION_KEY[name]
        why = over_deadline(name, time.monotonic() - t_start, args.deadline) or missing_jobs(name, runs)
        if why:
            print(f"== section {name}: {why}", file=sys.stderr, flush=True)
            if not M.has_figures(extra.get(key)):
                extra[key] = {"skipped": why, "section": name}
            me["not_started"].append(name)
            write()
            continue
        if name == "large":
            from cudalab import memplan

            extra[key] = section("large", S.largest, info["free_bytes"], memplan.host_available())
        elif name == "wall":
            extra[key] = section("wall", S.time_to_table, out)
            if isinstance(extra[key], list):
                extra["time_profile"] = section("wall profile", S.profile_slowest, extra[key])
        elif name == "saved":
            extra[key] = section("saved", S.saved_runs, slug, out)
        elif name == "ncu":
            extra[key] = section("ncu", S.ncu_walls)
        elif name == "energy":
            extra[key] = section("energy", S.energy)
        elif name == "truth":
            extra[key] = section("truth", S.timing_truth, runs)
        elif name == "table36":
            extra[key] = section("table36", S.table36, runs)
        elif name == "ceiling":
            run = runs.get("transpose 16384²", {})
            b = best(run.get("rows", []))
            if b is not None and run.get("roofline") and b.gbs < 0.97 * run["roofline"].gbs:
                extra[key] = section("ceiling", C.ceiling, runs, "transpose 16384²", "transpose", b.variant, "16384")
            else:
                extra.pop(key, None)
        me["sections"].append(name)
        write()
    checks = targets(runs) + section_checks(extra)
    print(f"benchmark.py: {time.monotonic() - t_start:.0f} s", file=sys.stderr)
    print("\n".join(f"{'MET ' if ok else 'NOT RUN' if ok is None else 'MISSED'}  {n}: {m}" for n, m, ok in checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
