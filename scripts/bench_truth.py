#!/usr/bin/env python3
"""Issues 46 and 59's record: short kernels against CUPTI (with and without cupti-python), verdicts, throttling.
Writes <out>/<gpu>-truth.md and .json (docs/benchmarks/ by default).

    python3 scripts/bench_truth.py --parts truth                    # the short-kernel part, ~3-4 minutes
    python3 scripts/bench_truth.py --parts truth --jobs smem-square,transpose-1k
    python3 scripts/bench_truth.py --parts calibrate --pairs 100 --calibrate-seconds 240
    python3 scripts/bench_truth.py --parts throttle --heat-seconds 40
    python3 scripts/bench_truth.py --parts truth --merge docs/benchmarks/nvidia-h200-truth.json

``--merge EARLIER`` keeps the parts this call does not run from an earlier record of the same GPU, each with
the command, date and code that made it (the record's markdown says so under the part's heading).

Parts (--parts, default all):
  truth      ``cudalab truth`` of each job (built-in kernels under 20 µs: the smem demos, small copies,
             transposes and reductions), twice: once as installed (``--methods events,batch,graph,cupti,auto``:
             CUPTI's span is the reference; ncu beside it), once with ``CUDALAB_NO_CUPTI=1`` (``--methods auto
             --no-ncu``: the tables' default without cupti-python, the graph fallback). Pass = the tables' figure
             within 5% or 0.1 µs of CUPTI's span, cold and hot, both passes, over at least 20 rows under 20 µs.
             ncu's offset on the GPU = the median of (ncu - CUPTI) over every row.
  calibrate  ``cudalab calibrate``'s A/A pairs (fresh processes, the same kernels): --pairs if they fit in
             --calibrate-seconds (one run timed first), else as many as fit, saying so; faster/slower
             verdicts among the A/A judgements and the planted ~2% slowdown's catch rate at the floor.
  throttle   a run of copy while another process (this script, ``--heat``: an FMA loop on every SM through
             pycuda) heats the same GPU: each row's throttled samples (NVML), or a note that none were.

The pure parts (verdicts, summaries, the markdown) are tested on the CPU (tests/test_bench_truth.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling, also when loaded from a file (the tests)

from bench_truth_judge import (FALLBACK_METHODS, FIRST_METHODS, METHODS, MIN_ROWS, WITHIN, WITHIN_MS,  # noqa: E402,F401
                               ncu_offsets, truth_rows, truth_summary, within)
from bench_truth_record import (PARTS, _gpu_name, _part_gpu, keep, load_earlier, markdown,  # noqa: E402,F401
                                process_spread)
#: name -> the ``cudalab truth`` arguments (family first). Sizes picked to land under 20 µs on an H200.
JOBS: dict[str, list[str]] = {
    "smem-square": ["smem-square"],
    "smem-rect": ["smem-rect", "--variant", "row-row,col-col,row-col-pad"],
    "smem-square-132": ["smem-square", "--blocks", "132", "--variant", "row-row,col-col,row-col-pad"],
    "copy-512": ["copy", "--n", "512", "--variant", "naive,shared,vec4,block"],
    "reduce-64k": ["reduce", "--n", "2^16", "--variant", "neighbored,unrolling8,complete-unroll,modern"],
    "reduce-1m": ["reduce", "--n", "2^20", "--variant", "unrolling8,modern"],
    "transpose-256": ["transpose", "--n", "256", "--variant", "naive,bankopt,tiled-32x8"],
    "transpose-1k": ["transpose", "--n", "1024", "--variant", "naive,bankopt,tiled-32x8,vec4-band"],
    "transpose-2k": ["transpose", "--n", "2048", "--variant", "bankopt,tiled-64x8"],
    "gemv-1k": ["gemv", "--shape", "1024x1024", "--variant", "coalesced,warp-row"],
    "search-binary-4k": ["search", "--n", "2^20", "--variant", "binary", "--queries", "4096"],
    "search-binary-64k": ["search", "--n", "2^20", "--variant", "binary", "--queries", "65536"],
    "search-linear-1m": ["search", "--n", "2^20", "--variant", "linear"],
}
#: The jobs run by default: the smem families, small copies, transposes and reductions (24 kernel rows).
DEFAULT_JOBS = ("smem-square", "smem-rect", "copy-512", "reduce-64k", "transpose-256", "transpose-1k")
#: calibrate's bar (issue 46): at most 1% faster/slower verdicts A/A, a 2% slowdown caught in 80% of pairs.
MAX_FALSE, MIN_DETECT = 0.01, 0.80


# ---- pure: the figures ------------------------------------------------------------------------------

def slug(gpu: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3`` (the records' file names)."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"


def calibrate_verdict(floor: dict[str, Any]) -> dict[str, Any]:
    """The issue's bar on a floor: false verdicts at most 1%, the planted slowdown caught in at least 80%."""
    false_n = round(floor["false_rate"] * floor["judgements"])
    return {"false_verdicts": false_n, "judgements": floor["judgements"], "false_rate": floor["false_rate"],
            "detect_rate": floor["detect_rate"], "planted": floor["planted"], "threshold": floor["min_effect"],
            "false_ok": floor["false_rate"] <= MAX_FALSE, "detect_ok": floor["detect_rate"] >= MIN_DETECT}


def pairs_that_fit(wanted: int, seconds_left: float, per_run_s: float) -> int:
    """A/A pairs whose runs (pairs + 5 at most: the probe, the checks, one more) fit in ``seconds_left``, at most ``wanted``."""
    if per_run_s <= 0:
        return wanted
    return max(1, min(wanted, int(seconds_left / per_run_s) - 5))


def throttle_rows(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Each row of a run record: samples, throttled samples, the SM clock's low and the throttle reasons."""
    out = []
    for p in record.get("points", ()):
        for r in p.get("results", ()):
            ex = r.get("extra") or {}
            n = (r.get("stats") or {}).get("n")
            out.append({"variant": r["variant"], "status": r["status"], "samples": n, "throttled": ex.get("throttled"),
                        "sm_mhz_min": ex.get("sm_mhz_min"), "sm_mhz": ex.get("sm_mhz"), "power_w": ex.get("power_w"),
                        "temp_c": ex.get("temp_c"), "reasons": ex.get("throttle") or ex.get("clock_events") or ""})
    return out


# ---- the GPU parts ----------------------------------------------------------------------------------

def _cli() -> list[str]:
    return [sys.executable, "-m", "cudalab"]


def _env() -> dict[str, str]:
    env = dict(os.environ, COLUMNS="200", LC_ALL="C", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _truth_json(argv: list[str], out: Path, env: dict[str, str], timeout: float) -> tuple[dict[str, Any] | None, str]:
    """One ``cudalab truth`` call (its table on stdout as it goes): its JSON document, or why there is none."""
    print(f"=== {'CUDALAB_NO_CUPTI=1 ' if env.get('CUDALAB_NO_CUPTI') else ''}cudalab {' '.join(argv[3:])}", flush=True)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"past {timeout:g} s"
    print(proc.stdout[-6000:], proc.stderr[-2000:], f"({time.monotonic() - t0:.1f} s)", sep="\n", flush=True)
    if not out.is_file():
        return None, f"exit {proc.returncode}: " + " ".join(proc.stderr.strip().splitlines()[-1:])
    return json.loads(out.read_text()), ""


def run_truth(jobs: Sequence[str], budget: float, launches: int, timeout: float, fallback: bool = True,
              deadline: float = 0.0) -> dict[str, Any]:
    """``cudalab truth`` of each job as installed, then (``fallback``) with ``CUDALAB_NO_CUPTI=1``; the lines,
    the summary, the GPU. With ``deadline`` (s), a job is not started once the next one would pass it (at the
    pace of the slowest job so far); it is listed as not run."""
    lines: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    gpu: dict[str, Any] = {}
    t_start, slowest = time.monotonic(), 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for job in jobs:
            if deadline and time.monotonic() - t_start + slowest > deadline:
                errors[job] = f"not run: the next job would pass --truth-deadline {deadline:g} s"
                continue
            t0 = time.monotonic()
            first, second = Path(tmp) / f"{job}.json", Path(tmp) / f"{job}-nocupti.json"
            base = [*_cli(), "truth", *JOBS[job], "--budget", str(budget), "-q"]
            doc, why = _truth_json([*base, "--methods", FIRST_METHODS, "--ncu-launches", str(launches), "--json",
                                    str(first)], first, _env(), timeout)
            if doc is None:
                errors[job] = why
                continue
            gpu = doc.get("gpu") or gpu
            other = None
            if fallback:
                other, why = _truth_json([*base, "--methods", FALLBACK_METHODS, "--no-ncu", "--json", str(second)],
                                         second, dict(_env(), CUDALAB_NO_CUPTI="1"), timeout)
                if other is None:
                    errors[job] = f"without cupti-python: {why}"
            got = truth_rows(job, doc, other if fallback else None)
            lines += got
            notes = [f"ncu: {doc['ncu']['note']}"] if doc.get("ncu", {}).get("note") else []
            if got and all(ln["cupti_ms"] is None for ln in got):
                notes.append("no CUPTI span (cupti-python not installed, or CUPTI refused): "
                             + (got[0]["cupti_note"] or "no note"))
            if notes:
                errors[job] = "; ".join(([errors[job]] if job in errors else []) + notes)
            slowest = max(slowest, time.monotonic() - t0)
    return {"jobs": list(jobs), "budget_s": budget, "ncu_launches": launches, "reference": "cupti",
            "methods": FIRST_METHODS,
            "within": {"fraction": WITHIN, "ms": WITHIN_MS, "min_rows": MIN_ROWS}, "gpu": gpu,
            "fallback_env": "CUDALAB_NO_CUPTI=1" if fallback else "", "lines": lines, "errors": errors,
            "summary": truth_summary(lines)}


def run_calibrate(wanted: int, seconds: float, n: str = "4k") -> dict[str, Any]:
    """calibrate's pairs, as many as fit in ``seconds`` (one run timed first, its build included before), the
    copies of size ``n`` (as ``cudalab calibrate --n``); each run's median per row is kept (the spread between
    fresh processes is what the floor is made of)."""
    from dataclasses import asdict

    from cudalab import catalog
    from cudalab.families import load
    from cudalab.studies import calibrate as C
    from cudalab.session.options import RunOptions

    spec = catalog.family("copy")
    opts = RunOptions(variants=C.BUILTIN, n=n, budget=0.2, min_samples=20, roofline=False)
    once = C.gpu_run(spec, load(spec.module), opts)
    t0 = time.monotonic()
    once(0)                     # the builds, not timed as a run
    t1 = time.monotonic()
    once(0)
    per_run = (time.monotonic() - t1) * 1.1 + opts.budget  # the pairs' runs time one row more (the slowed one)
    pairs = pairs_that_fit(wanted, seconds - (time.monotonic() - t0), per_run)
    print(f"calibrate: one run {per_run:.2f} s: {pairs} pairs of the {wanted} asked", flush=True)
    done = C.calibrate(pairs, once, on_run=lambda i, n: print(f"calibrate: run {i}/{n}", flush=True) if i % 10 == 0 else None)
    floor = asdict(done.floor)
    medians = {name: [r.rows[name].stats.median if name in r.rows and r.rows[name].stats else None for r in done.runs]
               for name in (C.BUILTIN, C.PLAIN, C.SLOW, C.BUILTIN + C.SHORT, C.PLAIN + C.SHORT)}
    return {"wanted": wanted, "pairs": pairs, "runs": 1 + len(done.sizing) + pairs + 1, "n": n, "medians_ms": medians,
            "sizing": [{"delay_cycles": d, "planted": p} for d, p in done.sizing],
            "budget_s": seconds, "per_run_s": per_run,
            "seconds": time.monotonic() - t0, "delay_cycles": done.delay_cycles, "floor": floor,
            "verdict": calibrate_verdict(floor), "gpu": done.floor.gpu}


HEAT_SRC = r"""
extern "C" __global__ void heat(float *out, int iters)
{
    float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f, d = blockIdx.x * 1e-3f;
    for (int i = 0; i < iters; ++i) {
        a = fmaf(a, b, c); d = fmaf(d, c, b); b = fmaf(b, a, d); c = fmaf(c, d, a);
    }
    if (a + b + c + d == 12345.678f) out[0] = a;  // never true: keeps the loop
}
"""


def heat(seconds: float) -> None:
    """``--heat``: an FMA loop on every SM for ``seconds`` (pycuda; a process of its own on the same GPU)."""
    import numpy as np
    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as drv
    from pycuda.compiler import SourceModule

    k = SourceModule(HEAT_SRC).get_function("heat")
    out = drv.mem_alloc(4)
    sms = drv.Context.get_device().get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(8):
            k(out, np.int32(200_000), block=(1024, 1, 1), grid=(sms * 2, 1))
        drv.Context.synchronize()


def run_throttle(heat_s: float, warm_s: float) -> dict[str, Any]:
    """A copy run while ``--heat`` runs beside it on the same GPU; each row's throttled samples."""
    heater = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--heat", str(heat_s)], env=_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(warm_s)
        if heater.poll() is not None:
            return {"error": f"the heater ended at once: {(heater.stdout.read() if heater.stdout else '')[-400:]}"}
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run.json"
            argv = [*_cli(), "copy", "--n", "16k", "--variant", "naive,shared,vec4,block", "--budget", "10",
                    "--min-samples", "1000", "--no-roofline", "-q", "--json", str(out)]
            proc = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=max(120.0, heat_s * 3))
            print(proc.stdout[-4000:], proc.stderr[-1000:], sep="\n", flush=True)
            if not out.is_file():
                return {"error": f"the run wrote no record (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"}
            record = json.loads(out.read_text())
    finally:
        heater.kill()
        heater.wait()
    rows = throttle_rows(record)
    tele = (record.get("device") or {}).get("telemetry") or {}
    flagged = sum(r["throttled"] or 0 for r in rows)
    if tele.get("source") != "nvml":
        note = f"No NVML telemetry ({tele.get('note', 'none')}): throttled samples cannot be judged here."
    elif flagged:
        note = f"{flagged} samples flagged throttled across {len(rows)} rows: the table's 'throttled' column shows them."
    else:
        note = (f"No sample was flagged: the heater did not push the SM clock under 75% of nominal nor raise a power or "
                f"thermal clock event while the rows were sampled (a throttle could not be provoked in {heat_s:.0f} s).")
    return {"heater": "FMA loop on every SM (pycuda, another process)", "heat_s": heat_s, "warm_s": warm_s,
            "rows": rows, "flagged": flagged, "telemetry_note": tele.get("note", ""), "note": note}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"), help="Folder of the record.")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"Comma list of {', '.join(PARTS)}.")
    ap.add_argument("--jobs", default=",".join(DEFAULT_JOBS), help=f"Comma list of truth jobs: {', '.join(JOBS)}.")
    ap.add_argument("--budget", type=float, default=0.1, help="truth: seconds of sampling per variant and method.")
    ap.add_argument("--ncu-launches", type=int, default=6, help="truth: launches of each variant under ncu.")
    ap.add_argument("--job-timeout", type=float, default=120.0, help="truth: seconds one cudalab truth call may take.")
    ap.add_argument("--no-fallback", action="store_true",
                    help="truth: leave out the second pass (the same rows with CUDALAB_NO_CUPTI=1).")
    ap.add_argument("--truth-deadline", type=float, default=0.0,
                    help="truth: start no job that would end past this many seconds (0: no limit).")
    ap.add_argument("--pairs", type=int, default=100, help="calibrate: A/A pairs wanted.")
    ap.add_argument("--calibrate-n", default="4k", help="calibrate: the copies' size (as cudalab calibrate --n).")
    ap.add_argument("--calibrate-seconds", type=float, default=150.0, help="calibrate: seconds the pairs may take.")
    ap.add_argument("--heat-seconds", type=float, default=40.0, help="throttle: seconds the heater runs.")
    ap.add_argument("--warm-seconds", type=float, default=10.0, help="throttle: seconds of heat before the run.")
    ap.add_argument("--merge", default=None, metavar="EARLIER",
                    help="An earlier record of the same GPU (its .json, or the folder holding one *-truth.json): the "
                         "parts this call does not run are kept from it, each with the command that made it.")
    ap.add_argument("--heat", type=float, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.heat is not None:
        heat(a.heat)
        return 0
    parts = [p for p in a.parts.split(",") if p]
    jobs = [j for j in a.jobs.split(",") if j]
    bad = [p for p in parts if p not in PARTS] + [j for j in jobs if j not in JOBS]
    if bad:
        print(f"bench_truth: unknown part or job {', '.join(bad)}", file=sys.stderr)
        return 2
    rec: dict[str, Any] = {"argv": list(sys.argv[1:] if argv is None else argv), "date": time.strftime("%Y-%m-%d"),
                           "commit": _commit()}
    try:
        earlier = load_earlier(a.merge) if a.merge else None
    except ValueError as exc:
        print(f"bench_truth: {exc}", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = {"truth": lambda: run_truth(jobs, a.budget, a.ncu_launches, a.job_timeout, not a.no_fallback,
                                       a.truth_deadline),
            "calibrate": lambda: run_calibrate(a.pairs, a.calibrate_seconds, a.calibrate_n),
            "throttle": lambda: run_throttle(a.heat_seconds, a.warm_seconds)}
    base = out / "gpu-truth"
    made = {k: rec[k] for k in ("argv", "date", "commit")}
    if earlier is not None:
        keep(rec, earlier, parts)
    for part in parts:  # the record is written after each part: a stage killed later keeps what was measured
        try:
            rec[part] = runs[part]()
        except Exception as exc:  # the other parts' figures are kept
            rec[part] = {"error": f"{type(exc).__name__}: {exc}"}
        rec[part]["made"] = made
        if part == "truth" and rec[part].get("gpu"):  # this call's device, over an earlier record's
            rec["gpu"] = rec[part]["gpu"]
        rec.setdefault("gpu", {})
        here, there = _part_gpu(rec[part]), _gpu_name(earlier or {})
        if here and there and here != there:  # nothing written: the earlier record's parts are another GPU's
            print(f"bench_truth: --merge {a.merge} is a record of {there}, this GPU is {here}", file=sys.stderr)
            return 2
        base = out / f"{slug(_gpu_name(rec) or 'gpu')}-truth"
        (out / f"{base.name}.json").write_text(json.dumps(rec, indent=2) + "\n")
        (out / f"{base.name}.md").write_text(markdown(rec))
        print(f"{part} done: wrote {base}.md and .json", flush=True)
    s = (rec.get("truth") or {}).get("summary")
    if s:
        off = s["ncu_offset"]
        print(f"truth: the tables' figure within 5% or 0.1 us of CUPTI: cold {s['cold']['tables_pass']}/{s['cold']['n']}, "
              f"hot {s['hot']['tables_pass']}/{s['hot']['n']}; without cupti-python: cold "
              f"{s['cold']['nocupti_pass']}/{s['cold']['n']}, hot {s['hot']['nocupti_pass']}/{s['hot']['n']}; "
              f"ncu offset cold {_us_or(off['cold']['offset_ms'])} us, hot {_us_or(off['hot']['offset_ms'])} us; "
              f"claim (>= {MIN_ROWS} rows each, all within): {'PASS' if s['all_pass'] else 'FAIL'}")
    return 0


def _us_or(ms: float | None) -> str:
    return "-" if ms is None else f"{ms * 1e3:+.3f}"


def _commit() -> str:
    """The code that ran: HEAD, ``+dirty`` when the checkout's code differs from it (``machine.code_revision``)."""
    from cudalab.records import machine  # noqa: PLC0415

    return machine.code_revision() or "?"


if __name__ == "__main__":
    sys.exit(main())
