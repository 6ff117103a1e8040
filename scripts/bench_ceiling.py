"""The benchmark's evidence when the transpose target is missed (issue 16; see benchmark.py).

Four pieces, each from the run that writes the record: ncu's DRAM throughput and bytes of the best
transpose and of the copy kernels; the tile orders and shapes of existing variants swept against the
job's roofline; the same command in fresh processes (one process's figure is one draw); and the
transpose's own DRAM traffic without the transpose (scripts/probe_transpose_spread.py), timed and
under ncu: what the access pattern alone gets from DRAM, beside what the kernel gets.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_sections as S
from cudalab import plan as planning
from cudalab.ncu.metrics import DRAM_PCT

#: The tile orders and shapes tried against the transpose target, each a sweep of existing
#: variants (--block, -D) at 16384², timed in the benchmark's run.
CEILING_SWEEPS = (
    ["--variant", "band-64x8", "--block", "64x8,64x4", "-D", "TS_BAND=0,1,2,4,16"],
    ["--variant", "vec4-band", "--block", "16x16,16x32", "-D", "TV_BAND=0,1,2,4,16", "-D", "TV_WX=8,16"],
    ["--variant", "tiled-64x8", "-D", "STREAM=0,1"],
)
CEILING_METRICS = f"{DRAM_PCT},dram__bytes_read.sum,dram__bytes_write.sum"


def _dram(x) -> dict:
    """CEILING_METRICS of one ncu row or launch (anything with ``value(name)``): DRAM % of peak, bytes."""
    return {"pct": x.value(DRAM_PCT),
            "read": x.value("dram__bytes_read.sum"), "write": x.value("dram__bytes_write.sum")}


def ceiling(runs: dict, job: str, family: str, variant: str, n: str) -> dict:
    """The evidence when a bandwidth target is out of reach: ncu's DRAM throughput (% of peak) and
    DRAM bytes of a variant and of the copy kernels at the same size, every tile order and shape
    of CEILING_SWEEPS timed against the job's roofline, the variant in fresh processes, and the
    transpose's traffic alone (:func:`traffic`)."""
    from cudalab import ncu

    def dram(rep) -> dict:
        return {r.variant: _dram(r) for r in rep.rows}

    ours = dram(ncu.profile(planning.RunRequest(family=family, variants=variant, n=n), metrics=CEILING_METRICS))
    copies = dram(ncu.profile(planning.RunRequest(family="copy", variants="block,vec4", n=n), metrics=CEILING_METRICS))
    roof = runs[job]["roofline"].gbs if runs.get(job, {}).get("roofline") else None
    tried = []
    for argv in CEILING_SWEEPS:
        for pt in S._saved_points([family, "--n", n, "--no-roofline", "-q", *argv])[1]:
            for r in pt.get("results", ()):
                tried.append({"variant": r["variant"], "block": r.get("block"), "status": r["status"],
                              "defines": " ".join(f"{k}={v}" for k, v in pt.get("defines") or ()),
                              "median_ms": (r.get("stats") or {}).get("median"), "gbs": r.get("gbs"),
                              "pct": 100 * r["gbs"] / roof if roof and r.get("gbs") else None})
    tried.sort(key=lambda t: -(t["pct"] or 0))
    return {"job": job, "variant": variant, "dram": ours, "copy_dram": copies, "roofline_gbs": roof, "tried": tried,
            "processes": process_spread(family, variant, n), "traffic": traffic()}


#: Fresh processes of one command in ``process_spread``: on one H200 six read one config at 96.4-96.8%
#: (scripts/probe_transpose_spread.py procs), each with an IQR under 0.1%.
SPREAD_PROCESSES = 8


def process_spread(family: str, variant: str, n: str, count: int = SPREAD_PROCESSES) -> list[dict]:
    """``cudalab FAMILY --variant V --n N`` in ``count`` fresh processes, each with its own roofline:
    the variant's % of it in each (one process's figure is one draw of this spread)."""
    out = []
    for _ in range(count):
        proc, points = S._saved_points([family, "--variant", variant, "--n", n, "-q"])
        if not points:
            out.append({"pct": None, "rc": proc.returncode})
            continue
        point = points[0]
        row = next((r for r in point.get("results", ()) if r["variant"] == variant), {})
        out.append({"pct": row.get("pct_roofline"), "gbs": row.get("gbs"), "rc": proc.returncode,
                    "roofline_gbs": (point.get("roofline") or {}).get("gbs")})
    return out


#: The probe's kernels: its traffic-only ``pat_*`` kernels and vec4-band (compiled twice: 16 x 2 and
#: 8 x 4 warps), each launched once by its ``launch`` mode.
TRAFFIC_KERNELS = "regex:^(pat_|transpose_vec4_cf$)"


def _traffic_kernel(case: str) -> str:
    """The kernel symbol ncu names for one of the probe's cases."""
    return "transpose_vec4_cf" if case.startswith("vec4-band") else case


def traffic() -> dict:
    """scripts/probe_transpose_spread.py ``pattern 1`` (each traffic-only kernel and vec4-band timed as
    % of memcpy_dtod, one process) and its ``launch 1`` under ncu (DRAM throughput and bytes of each,
    one launch each, caches flushed before each as ncu does by default)."""
    from cudalab.ncu.profile import find_ncu

    script = str(Path(__file__).with_name("probe_transpose_spread.py"))
    exe = find_ncu()
    plain = subprocess.run([sys.executable, script, "pattern", "1"], capture_output=True, text=True, timeout=600)
    timed = next((json.loads(ln) for ln in plain.stdout.splitlines() if ln.startswith('{"run"')), {})
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "traffic"
        under = subprocess.run([exe, "-o", str(report), "-f", "--clock-control", "none", "--kernel-name",
                                TRAFFIC_KERNELS, "--metrics", CEILING_METRICS, sys.executable, script, "launch", "1"],
                               capture_output=True, text=True, timeout=600)
        launches = S._report_launches(exe, report)
    order = next((json.loads(ln)["launched"] for ln in under.stdout.splitlines() if ln.startswith('{"launched"')), [])
    dram, problems = {}, []
    if len(order) != len(launches):
        problems.append(f"{len(launches)} launches profiled for {len(order)} launched")
    for case, x in zip(order, launches):
        if x.kernel != _traffic_kernel(case):  # out of step: no figure is kept under a wrong name
            problems.append(f"profiled {x.kernel} where {case} was launched")
            dram = {}
            break
        dram[case] = _dram(x)
    return {"timed": {k: v for k, v in timed.items() if k != "run"}, "dram": dram, "problems": problems,
            "rc": [plain.returncode, under.returncode],
            "tail": (plain.stderr + under.stderr).strip().splitlines()[-3:] if problems or not timed else []}
