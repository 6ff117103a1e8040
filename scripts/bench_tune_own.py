"""Your own kernel tuned: cudalab against kernel_tuner on two spaces written as a user writes them (issue 56).

    python3 scripts/bench_tune_own.py --kernel-tuner /tmp/kt          # on a GPU machine; kernel_tuner 1.5 there

Two user-style kernels (``docs/examples/tune/``), each a ``.cu`` file, not a family:

- ``sgemm``: a register-blocked SGEMM at 2048³ whose block tile is ``block_x*TX`` by ``block_y*TY`` (138 valid
  configurations), tuned by ``cudalab tune matmul --add ... --strategy grid`` (the command line, as a user runs
  it: the family's problem, inputs, check and work) and once more by ``cudalab.tune_kernel``;
- ``axpy``: a memory-bound ``z = a*x + y`` over 2^24 floats with elements a thread and vector width as defines
  (72 configurations), tuned by ``cudalab.tune_kernel`` (kernel_tuner's call, no family).

For each, on one GPU: kernel_tuner 1.5 brute force with its defaults (PyCUDA's compiler cache empty, then
warm, then warm again) and cudalab's grid campaign raced (its build cache empty, then warm, then warm again):
the walls, the winners (cudalab's tie set), and how far kernel_tuner's winners are from cudalab's best by
cudalab's own measurements. Targets (the issue's): cudalab's wall at most half of kernel_tuner's, cold and warm;
cudalab's winner (or its tie set) the same in 3 of 3. Writes ``docs/benchmarks/<gpu>-tune-own.md/.json`` and the
campaigns and kernel_tuner caches under ``docs/benchmarks/tune-own/<gpu>/`` (``cudalab tune --replay X.db --versus
Y.json`` sets them side by side).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
EX = ROOT / "docs" / "examples" / "tune"

SGEMM_N = 2048
SGEMM_PARAMS = {"block_size_x": [8, 16, 32], "block_size_y": [4, 8, 16], "TX": [1, 2, 4, 8], "TY": [1, 2, 4, 8],
                "BK": [8, 16]}
SGEMM_RULES = ["block_size_x * block_size_y >= 64", "TX * TY <= 32",
               "(block_size_y * TY + block_size_x * TX) * BK * 4 <= 49152", "block_size_x * TX >= 32",
               "block_size_y * TY >= 16"]
AXPY_N = 1 << 24
AXPY_PARAMS = {"block_size_x": [32, 64, 128, 256, 512, 1024], "EPT": [1, 2, 4, 8], "VW": [1, 2, 4]}


def sgemm_args() -> tuple[list[Any], list[Any]]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((SGEMM_N, SGEMM_N), dtype=np.float32)
    b = rng.standard_normal((SGEMM_N, SGEMM_N), dtype=np.float32)
    c = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    n = np.int32(SGEMM_N)
    return [a, b, np.zeros_like(c), n, n, n], [None, None, c, None, None, None]


def axpy_args() -> tuple[list[Any], list[Any]]:
    rng = np.random.default_rng(0)
    x, y = rng.random(AXPY_N, dtype=np.float32), rng.random(AXPY_N, dtype=np.float32)
    alpha = np.float32(2.5)
    return [np.zeros_like(x), x, y, alpha, np.int32(AXPY_N)], [alpha * x + y, None, None, None, None]


SPACES = {
    "sgemm": dict(kernel="my_sgemm", file=EX / "my_sgemm.cu", size=(SGEMM_N, SGEMM_N), params=SGEMM_PARAMS,
                  rules=SGEMM_RULES, div=(["block_size_x", "TX"], ["block_size_y", "TY"]), args=sgemm_args, atol=0.05),
    "axpy": dict(kernel="my_axpy", file=EX / "my_axpy.cu", size=AXPY_N, params=AXPY_PARAMS, rules=[],
                 div=(["block_size_x", "EPT", "VW"], None), args=axpy_args, atol=1e-5),
}


def kt_campaign(kt: Any, space: dict[str, Any], cache: Path) -> tuple[str, float, dict[str, float]]:
    """One kernel_tuner brute-force campaign with its defaults: (winner, wall seconds, config -> time ms)."""
    args, answer = space["args"]()
    t0 = time.perf_counter()
    results, _ = kt.tune_kernel(space["kernel"], space["file"].read_text(), space["size"], args, space["params"],
                                grid_div_x=space["div"][0], grid_div_y=space["div"][1], restrictions=space["rules"],
                                answer=answer, atol=space["atol"], lang="CUDA", quiet=True, cache=str(cache))
    wall = time.perf_counter() - t0
    times = {key(r, space): r["time"] for r in results if isinstance(r.get("time"), (int, float))}
    return min(times, key=times.get), wall, times


def key(r: dict[str, Any], space: dict[str, Any]) -> str:
    """A configuration as cudalab names a point (its names sorted: either tool's order)."""
    from cudalab.tuning.interchange import space_of  # noqa: PLC0415

    point = space_of(space["params"]).point_of(r)
    return " ".join(sorted(f"{k}={v}" for k, v in point.items()))


def cudalab_cli(space: dict[str, Any], db: Path, out: Path) -> tuple[dict[str, Any], float]:
    """``cudalab tune matmul --add ... --strategy grid`` as a user runs it: (its --json record, wall seconds)."""
    from cudalab.tuning.interchange import space_of  # noqa: PLC0415

    kt = space_of(space["params"], space["rules"], (*space["div"], None))
    argv = [sys.executable, "-m", "cudalab", "tune", "matmul", "--n", str(SGEMM_N), "--add",
            f"{space['file']}:{space['kernel']}@tile={' x '.join(kt.tile[:2])}", "--block", kt.block,
            "--strategy", "grid", "--storage", f"sqlite:///{db}", "--json", str(out), "--quiet"]
    for name, values in kt.defines:
        argv += ["-D", f"{name}={values}"]
    for rule in kt.require:
        argv += ["--require", rule]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    print(f"$ {' '.join(argv[1:])}\n{proc.stdout}{proc.stderr[-3000:]}", flush=True)
    return json.loads(out.read_text()) if out.exists() else {}, wall


def cudalab_call(space: dict[str, Any], db: Path) -> tuple[dict[str, Any], float]:
    """``cudalab.tune_kernel`` with kernel_tuner's arguments (grid, raced): (facts, wall seconds)."""
    import cudalab  # noqa: PLC0415

    args, answer = space["args"]()
    t0 = time.perf_counter()
    res = cudalab.tune_kernel(space["kernel"], str(space["file"]), space["size"], args, space["params"],
                              grid_div_x=space["div"][0], grid_div_y=space["div"][1], restrictions=space["rules"],
                              answer=answer, atol=space["atol"], storage=f"sqlite:///{db}", name=db.stem)
    wall = time.perf_counter() - t0
    race = res.race
    return {"tune": {"winner": res.winner, "time": res.time_account, "gpu_busy_pct": res.gpu_busy_pct,
                     "race": {"ties": race.ties if race else []},
                     "trials": [{"point": m.point, "status": m.status, "values": list(m.values) if m.values else None}
                                for m in res.trials]}}, wall


def summary(rec: dict[str, Any], wall: float) -> dict[str, Any]:
    t = rec.get("tune", {})
    ok = [x for x in t.get("trials", []) if x.get("values")]
    return {"wall_s": round(wall, 2), "winner": t.get("winner", ""), "ties": t.get("race", {}).get("ties", []) if t.get("race") else [],
            "trials": len(t.get("trials", [])), "passed": len(ok), "time": t.get("time"),
            "gpu_busy_pct": t.get("gpu_busy_pct"),
            "times": {" ".join(sorted(f"{k}={v}" for k, v in x["point"].items())): x["values"][0] for x in ok}}


def run_space(name: str, kt: Any, folder: Path, tmp: Path, repeats: int) -> dict[str, Any]:
    space = SPACES[name]
    out: dict[str, Any] = {"kernel": space["kernel"], "params": space["params"], "restrictions": space["rules"]}
    ours = []
    for i in range(repeats):  # cudalab: an empty build cache first, then warm
        os.environ["CUDALAB_CACHE"] = str(tmp / f"cache-{name}")
        if i == 0:
            shutil.rmtree(tmp / f"cache-{name}", ignore_errors=True)
        db = folder / f"{name}-cudalab-{i + 1}.tune.db"
        db.unlink(missing_ok=True)
        if name == "sgemm":
            rec, wall = cudalab_cli(space, db, tmp / f"{name}-{i}.json")
        else:
            rec, wall = cudalab_call(space, db)
        ours.append(summary(rec, wall))
        print(f"{name} cudalab {i + 1}: {wall:.1f} s, winner {ours[-1]['winner']}", flush=True)
    if name == "sgemm":  # the same space by the Python call, warm: both of cudalab's doors measured
        db = folder / "sgemm-tune_kernel.tune.db"
        db.unlink(missing_ok=True)
        rec, wall = cudalab_call(space, db)
        out["tune_kernel_warm"] = summary(rec, wall)
    out["cudalab"] = ours
    if kt is not None:
        theirs = []
        os.environ["PYCUDA_CACHE_DIR"] = str(tmp / f"pycuda-{name}")
        shutil.rmtree(tmp / f"pycuda-{name}", ignore_errors=True)
        for i in range(repeats):  # PyCUDA's compiler cache empty first, then warm
            cache = folder / f"{name}-kernel_tuner-{i + 1}.json"
            cache.unlink(missing_ok=True)
            w, wall, times = kt_campaign(kt, space, cache)
            theirs.append({"wall_s": round(wall, 2), "winner": w, "configs": len(times), "times": times})
            print(f"{name} kernel_tuner {i + 1}: {wall:.1f} s, winner {w}", flush=True)
        out["kernel_tuner"] = theirs
    return out


def verdicts(part: dict[str, Any]) -> dict[str, Any]:
    ours, theirs = part["cudalab"], part.get("kernel_tuner") or []
    tie_sets = [{o["winner"], *o["ties"]} for o in ours]
    stable = all(o["winner"] in s for o in ours for s in tie_sets)  # each winner inside every campaign's tie set
    v: dict[str, Any] = {"cudalab_winners": [o["winner"] for o in ours], "cudalab_stable": stable}
    if theirs:
        v.update(cold_ratio=ours[0]["wall_s"] / theirs[0]["wall_s"],
                 warm_ratio=statistics.median(o["wall_s"] for o in ours[1:]) / statistics.median(t["wall_s"] for t in theirs[1:]))
        best = min(ours[-1]["times"].values()) if ours[-1]["times"] else None
        kw = [t["winner"] for t in theirs]
        v["kt_winners"] = kw
        v["kt_distinct"] = len(set(kw))
        # kernel_tuner's winners by cudalab's measurement (its last campaign): how much slower than cudalab's best
        v["kt_winner_vs_cudalab_best"] = {w: (ours[-1]["times"].get(w) / best if best and ours[-1]["times"].get(w) else None)
                                          for w in set(kw)}
    return v


def write(record: dict[str, Any], out: Path, gpu: str) -> None:
    (out / f"{gpu}-tune-own.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    lines = [f"# Your own kernel tuned on {record['device']}: cudalab against kernel_tuner", "",
             f"Written by `{record['command']}` (code {record.get('code', '?')}, {record['date']}). Two kernels written as "
             "a user writes them (`docs/examples/tune/`), each tuned by kernel_tuner 1.5 (brute force, its defaults: "
             "7 runs a configuration, their mean, no L2 flush) and by cudalab (grid, every trial verified and timed "
             "by the run tables' protocol, the best five raced). Cold: cudalab's build cache or PyCUDA's compiler "
             "cache empty; then warm twice.", ""]
    for name, part in record["spaces"].items():
        v = part.get("verdicts", {})
        ours, theirs = part["cudalab"], part.get("kernel_tuner") or []
        lines += [f"## {name}: `{part['kernel']}` ({ours[0]['passed']} configurations passed of {ours[0]['trials']})", "",
                  "| campaign | cudalab wall s | its winner (tie set) | kernel_tuner wall s | its winner |", "|---|---|---|---|---|"]
        for i in range(max(len(ours), len(theirs))):
            o = ours[i] if i < len(ours) else {}
            t = theirs[i] if i < len(theirs) else {}
            ties = f" (tied: {', '.join(o.get('ties', []))})" if o.get("ties") else ""
            lines.append(f"| {'cold' if i == 0 else f'warm {i}'} | {o.get('wall_s', '–')} | {o.get('winner', '–')}{ties} | "
                         f"{t.get('wall_s', '–')} | {t.get('winner', '–')} |")
        if "tune_kernel_warm" in part:
            tk = part["tune_kernel_warm"]
            lines += ["", f"The same space by `cudalab.tune_kernel` (warm): {tk['wall_s']} s, winner {tk['winner']}."]
        if v:
            lines += ["", f"- cudalab's wall / kernel_tuner's: cold **{v.get('cold_ratio', float('nan')):.2f}**, warm "
                      f"**{v.get('warm_ratio', float('nan')):.2f}** (target ≤ 0.5)",
                      f"- cudalab's winner inside every campaign's tie set: **{'yes' if v['cudalab_stable'] else 'no'}** "
                      f"({', '.join(v['cudalab_winners'])})"]
            if "kt_distinct" in v:
                slow = ", ".join(f"{w}: {r:.3f}x" if r else f"{w}: –" for w, r in v["kt_winner_vs_cudalab_best"].items())
                lines.append(f"- kernel_tuner's winner changed: {v['kt_distinct']} distinct in {len(theirs)} campaigns; "
                             f"by cudalab's measurement each is this much slower than cudalab's best: {slow}")
            t = ours[1].get("time") if len(ours) > 1 else None
            if t:
                lines.append(f"- where cudalab's warm wall went: {', '.join(f'{k} {s:.1f} s' for k, s in t.items())}; "
                             f"{ours[1]['trials']} trials, {1000 * ours[1]['wall_s'] / max(1, ours[1]['trials']):.0f} ms a trial in all")
        lines.append("")
    (out / f"{gpu}-tune-own.md").write_text("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spaces", default="sgemm,axpy")
    ap.add_argument("--repeats", type=int, default=3, help="campaigns a tool and space (the first cold)")
    ap.add_argument("--kernel-tuner", default=None, help="a folder kernel_tuner 1.5 imports from")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"))
    a = ap.parse_args()
    kt = None
    if a.kernel_tuner:
        sys.path.insert(0, a.kernel_tuner)
        import kernel_tuner as kt  # noqa: PLC0415
    from cudalab.records import machine  # noqa: PLC0415

    from cudalab.instruments.driverquery import gpu_name  # noqa: PLC0415

    name = gpu_name(0) or "gpu"
    gpu = name.lower().replace(" ", "-")
    out = Path(a.out)
    folder = out / "tune-own" / gpu
    folder.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"device": name, "date": time.strftime("%Y-%m-%d"), "code": machine.code_revision(),
                              "command": "python3 scripts/bench_tune_own.py " + " ".join(sys.argv[1:]),
                              "kernel_tuner": getattr(kt, "__version__", None), "spaces": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for s in a.spaces.split(","):
            part = run_space(s, kt, folder, Path(tmp), a.repeats)
            part["verdicts"] = verdicts(part)
            record["spaces"][s] = part
            write(record, out, gpu)  # after each space: a call cut short keeps what it measured
    print((out / f"{gpu}-tune-own.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
