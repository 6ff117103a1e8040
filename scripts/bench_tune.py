#!/usr/bin/env python3
"""Issue 43's measurements of ``cudalab tune``: the ground truth, the replayed strategies, the trust check
and kernel_tuner on the same space and GPU. Writes docs/benchmarks/<gpu>-tune.md and .json, and the
ground-truth campaigns (SQLite, the replay data) under docs/benchmarks/tune/<gpu>/.

    python3 scripts/bench_tune.py                        # everything, full size (tens of minutes)
    python3 scripts/bench_tune.py --spaces reduce-modern --trials 60 --repeats 3 --seeds 20 --seconds 0.05
    python3 scripts/bench_tune.py --parts replay         # the replay only, from committed campaigns (no GPU)
    python3 scripts/bench_tune.py --kernel-tuner /path/to/kernel_tuner-1.5   # its folder or wheel on sys.path

Parts (--parts, default all):
  ground  every configuration of each space (``--strategy grid``, no race), at most --trials a space;
  replay  tpe, gp and random replayed against each ground truth, --seeds seeds, budget 10% of the
          configurations measured: the median fraction of the best and the seeds at >= 95% of it. The
          strategies alone: a live campaign measures the family's default first, but a space whose
          default is its best (transpose tiled's, on an H200) would make every strategy look perfect;
  trust   --repeats fresh campaigns of the --trust-space (grid, raced): the same winner, or the same
          set tied within the tolerance, each time;
  kt      kernel_tuner 1.5 (brute force, its default timing) on transpose's tiled space --repeats times
          (how often its winner changes) beside one cudalab campaign of the same space, cold and warm
          build caches, wall time each; skipped, saying so, without --kernel-tuner or its import.

The pure parts (replay summary, trust verdict, record writing) are tested on the CPU
(tests/test_bench_tune.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
#: The ground-truth spaces: name -> (family, variant). Their [[tune]] tables hold >= 200 valid points.
SPACES = {"matmul-warptile": ("matmul", "warptile"), "transpose-tiled": ("transpose", "tiled-64x8"),
          "reduce-modern": ("reduce", "modern")}
STRATEGIES = ("tpe", "gp", "random")
PARTS = ("ground", "replay", "trust", "kt")
#: Options every campaign of this run gets besides its own (``--build-ahead``).
TUNE_KW: dict[str, Any] = {}


# ---- pure: the figures -------------------------------------------------------------------------------

def budget_of(measured: int, share: float = 0.10) -> int:
    """Evaluations a strategy gets in the replay: ``share`` of the configurations measured (at least 1)."""
    return max(1, math.ceil(share * measured))


def replay_summary(curves: Sequence[Sequence[float]], budget: int, target: float = 0.95) -> dict[str, Any]:
    """One strategy's replay at ``budget`` evaluations: the median fraction of the best over seeds, how
    many seeds reached ``target`` and whether that is at least 90% of them (18 of 20)."""
    finals = sorted(float(c[min(budget, len(c)) - 1]) for c in curves)
    if not finals:
        raise ValueError("no seeds")
    mid = len(finals) // 2
    median = finals[mid] if len(finals) % 2 else (finals[mid - 1] + finals[mid]) / 2
    hits = sum(f >= target for f in finals)
    return {"budget": budget, "median": median, "hits": hits, "seeds": len(finals),
            "met": hits >= math.ceil(0.9 * len(finals))}


def trust_verdict(outcomes: Sequence[tuple[str, Sequence[str]]]) -> dict[str, Any]:
    """Repeated campaigns' (winner, configurations tied with it): how many agree with the most common
    answer, where an answer is the winner alone, or the tie set (winner and ties) when there are ties;
    a campaign agrees when its winner is in the common tie set and its own tie set is that set."""
    answers = [frozenset([w, *ties]) for w, ties in outcomes]
    if not answers:
        return {"campaigns": 0, "agree": 0, "answers": [], "stable": False}
    common = max(set(answers), key=answers.count)
    agree = answers.count(common)
    return {"campaigns": len(answers), "agree": agree, "answer": sorted(common),
            "distinct": len(set(answers)), "stable": agree == len(answers)}


def winner_changes(winners: Sequence[str]) -> dict[str, Any]:
    """kernel_tuner's winners over repeated campaigns: the distinct ones and how often each won."""
    counts: dict[str, int] = {}
    for w in winners:
        counts[w] = counts.get(w, 0) + 1
    return {"campaigns": len(winners), "distinct": len(counts), "counts": counts}


def gpu_slug(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3`` (docs/benchmarks' file names)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def summary_rows(record: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The short table printed last: (part, what, figure)."""
    rows = []
    for space, g in record.get("ground", {}).items():
        rows.append(("ground", space, f"{g['measured']} measured, {g['passed']} passed, best {g['best_ms']:.4g} ms, "
                                      f"{g['wall_s']:.0f} s"))
    for space, per in record.get("replay", {}).items():
        for strat, r in per.items():
            if "skipped" in r:
                rows.append(("replay", f"{space} {strat}", f"skipped: {r['skipped']}"))
                continue
            rows.append(("replay", f"{space} {strat}", f"{r['hits']}/{r['seeds']} seeds >= 95% in {r['budget']} "
                                                       f"evaluations (median {r['median']:.1%})" + (" ok" if r["met"] else "")))
    t = record.get("trust")
    if t:
        rows.append(("trust", t["space"], f"{t['agree']}/{t['campaigns']} campaigns agree ({t['distinct']} answers)"))
    k = record.get("kt")
    if k:
        if k.get("skipped"):
            rows.append(("kt", "kernel_tuner", f"skipped: {k['skipped']}"))
        else:
            if k.get("winners"):
                warm = f", warm {k['kt_warm_s']:.0f} s" if k.get("kt_warm_s") is not None else ""
                cold = f"first (cold) {k['kt_cold_s']:.0f} s{warm}" if "kt_cold_s" in k else f"{k['wall_s']:.0f} s a campaign"
                n = k["winners"]["campaigns"]
                how, won = f" (of {k.get('asked', n)})", ""
                if k.get("calls"):  # joined calls (join_kt): the walls are medians, each winner counted
                    how = f" in {len(k['calls'])} calls"
                    cold = cold.replace("first (cold)", "cold (each call's first, median)").replace(", warm", ", warm (median)")
                    won = f"; won: {_counts(k['winners']['counts'])}"
                rows.append(("kt", "kernel_tuner", f"{k['winners']['distinct']} winners in {n} campaigns{how}, "
                                                   f"{cold}{won}"))
            if "cudalab_cold_s" in k:
                busy = [f"{k.get(f'cudalab_{c}_gpu_busy_pct'):.0f}% {c}" for c in ("cold", "warm")
                        if k.get(f"cudalab_{c}_gpu_busy_pct") is not None]
                rows.append(("kt", "cudalab", f"cold {k['cudalab_cold_s']:.0f} s, warm {k['cudalab_warm_s']:.0f} s"
                                              + (f" (GPU busy {', '.join(busy)})" if busy else "")))
    return rows


def _counts(counts: dict[str, int]) -> str:
    """``a 5, b 3`` (most wins first)."""
    return ", ".join(f"{w} {n}" for w, n in sorted(counts.items(), key=lambda x: -x[1]))


def earlier_record(path: Path) -> dict[str, Any]:
    """The record an earlier run wrote at ``path`` ({} when there is none or it is not a record)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_record(record: dict[str, Any], out: Path, gpu: str) -> tuple[Path, Path]:
    """``<gpu>-tune.json`` and ``.md`` under ``out``, each written whole (a temporary file renamed), so
    a failed run never leaves half a record over the last good one."""
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / f"{gpu}-tune.json", out / f"{gpu}-tune.md"
    # a part's command (a ground truth's and a replay's: per space, "ground SPACE") stands beside its figures
    # only: a run stopped before a part's end added none
    def measured(key: str) -> bool:
        part, _, space = key.partition(" ")
        return part in record and (not space or space in record[part])

    record = {**record, "commands": {k: c for k, c in record.get("commands", {}).items() if measured(k)}}
    lines = [f"# cudalab tune on {record.get('device', gpu)}", "",
             *[f"- {part}: `{cmd}`" for part, cmd in sorted(record["commands"].items())], "",
             "| part | what | figure |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in summary_rows(record)]
    for path, text in ((js, json.dumps(record, indent=1, sort_keys=True) + "\n"), (md, "\n".join(lines) + "\n")):
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{path.name}.")
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return js, md


# ---- the GPU parts -----------------------------------------------------------------------------------

def _best(res: Any) -> float | None:
    times = [m.values[0] for m in res.trials if m.values is not None]
    return min(times) if times else None


def ground(space: str, db: Path, trials: int | None, seconds: float) -> dict[str, Any]:
    """Measure every configuration of ``space`` (at most ``trials``) into the campaign ``db``."""
    import cudalab  # noqa: PLC0415

    family, variant = SPACES[space]
    db.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    res = cudalab.tune(family, variant, strategy="grid", trials=trials, storage=f"sqlite:///{db}", name=space,
                       seed=0, race=0, budget=seconds, **TUNE_KW)
    passed = [m for m in res.trials if m.values is not None]
    return {"family": family, "variant": variant, "db": str(db.relative_to(ROOT)) if db.is_relative_to(ROOT) else str(db),
            "measured": len([m for m in res.trials if m.status not in ("refused", "interrupted")]),
            "passed": len(passed), "best_ms": _best(res) or float("nan"), "wall_s": time.perf_counter() - t0,
            "infeasible": sorted({m.status for m in res.trials if m.values is None})}


def replay_part(space: str, db: Path, seeds: int, share: float, strategies: Sequence[str] = STRATEGIES) -> dict[str, Any]:
    """Replay each strategy against the ground truth in ``db``."""
    from cudalab.tuning import replay as RP  # noqa: PLC0415

    from cudalab.errors import UsageError  # noqa: PLC0415

    sp, table, _ = RP.load_campaign(f"sqlite:///{db}", space)
    budget = budget_of(len(table), share)
    out: dict[str, Any] = {}
    for s in strategies:
        try:
            # the strategy alone, without the default a live campaign measures first (the module doc says why)
            out[s] = replay_summary(RP.replay(sp, table, s, seeds, budget, first=None).curves.tolist(), budget)
        except UsageError as exc:  # gp without torch and scipy: said, not fatal
            out[s] = {"skipped": str(exc)}
    return out


def trust(space: str, repeats: int, trials: int | None, seconds: float, tmp: Path) -> dict[str, Any]:
    """``repeats`` fresh campaigns (grid, raced): the same winner, or the same tie set, each time?"""
    import cudalab  # noqa: PLC0415

    family, variant = SPACES[space]
    outcomes, walls = [], []
    for i in range(repeats):
        t0 = time.perf_counter()
        res = cudalab.tune(family, variant, strategy="grid", trials=trials, storage=f"sqlite:///{tmp / f'trust{i}.db'}",
                           name=f"trust{i}", seed=0, budget=seconds, **TUNE_KW)  # one seed: the same points, measured afresh
        walls.append(time.perf_counter() - t0)
        race = res.race
        ties = [k for k, v in (race.verdicts.items() if race else ()) if v.verdict == "same"]
        outcomes.append((race.winner if race else "", ties))
    return {"space": space, **trust_verdict(outcomes), "outcomes": [[w, t] for w, t in outcomes], "wall_s": walls}


def _transpose_kt(kt: Any, n: int) -> tuple[str, float]:
    """One kernel_tuner brute-force campaign of transpose tiled: its winner and wall time."""
    import numpy as np  # noqa: PLC0415

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    args = [np.zeros((n, n), np.float32), a, np.int32(n), np.int32(n), np.int32(n), np.int32(n)]
    xs = [4, 8, 16, 24, 32, 40, 48, 56, 64]
    ys = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 32]
    params = {"block_size_x": xs, "block_size_y": ys, "STREAM": [0, 1], "TS_LDHINT": [0, 1]}
    defines = {"TILE": lambda p: p["block_size_x"], "ROWS": lambda p: p["block_size_y"],
               "STREAM": lambda p: p["STREAM"], "TS_LDHINT": lambda p: p["TS_LDHINT"]}
    src = (ROOT / "cuda_src" / "transpose" / "transpose.cu").read_text()
    t0 = time.perf_counter()
    results, _ = kt.tune_kernel("transpose_tiled", src, (n, n), args, params, grid_div_x=["block_size_x"],
                                grid_div_y=["block_size_x"], defines=defines, answer=[a.T.copy(), None, None, None, None, None],
                                restrictions=["block_size_x % block_size_y == 0", "block_size_x * block_size_y <= 1024",
                                              "block_size_x <= 64"], lang="CUDA", quiet=True)
    wall = time.perf_counter() - t0
    ok = [r for r in results if isinstance(r.get("time"), (int, float))]
    best = min(ok, key=lambda r: r["time"])
    return f"block={best['block_size_x']}x{best['block_size_y']} STREAM={best['STREAM']} TS_LDHINT={best['TS_LDHINT']}", wall


def kernel_tuner_part(path: str | None, repeats: int, seconds: float, tmp: Path,
                      on_progress: Callable[[dict[str, Any]], None] = lambda part: None,
                      with_cudalab: bool = True) -> dict[str, Any]:
    """kernel_tuner beside cudalab on transpose's tiled space (8192², the [[tune]] table's size): cudalab's
    campaign with a cold and a warm build cache, then ``repeats`` kernel_tuner campaigns (the first with
    PyCUDA's compiler cache as the machine has it, on a fresh machine empty: cold). ``on_progress`` gets the
    part as measured so far after each campaign, so a call stopped by its time limit keeps them. Without
    ``with_cudalab``, kernel_tuner's campaigns alone (more of them for the winner count, cudalab's side measured
    by another call of the same GPU: ``--merge`` joins them)."""
    if not path:
        return {"skipped": "no --kernel-tuner PATH given (kernel_tuner 1.5 is not installed on the GPU machine)"}
    sys.path.insert(0, str(Path(path).resolve()))
    try:
        import kernel_tuner as kt  # noqa: PLC0415
    except ImportError as exc:
        return {"skipped": f"kernel_tuner does not import from {path}: {exc}"}
    import cudalab  # noqa: PLC0415

    out: dict[str, Any] = {"version": getattr(kt, "__version__", "?"), "asked": repeats}
    for kind in ("cold", "warm") if with_cudalab else ():  # cold: an empty build cache; warm: the same again
        env_cache = os.environ.get("CUDALAB_CACHE")
        os.environ["CUDALAB_CACHE"] = str(tmp / "cache")
        if kind == "cold":
            shutil.rmtree(tmp / "cache", ignore_errors=True)
        t0 = time.perf_counter()
        res = cudalab.tune("transpose", "tiled-64x8", strategy="grid", storage=f"sqlite:///{tmp / f'kt-{kind}.db'}",
                           name=f"kt-{kind}", seed=0, race=0, budget=seconds, **TUNE_KW)
        out[f"cudalab_{kind}_s"] = time.perf_counter() - t0
        out[f"cudalab_{kind}_gpu_busy_pct"] = getattr(res, "gpu_busy_pct", None)  # NVML's, while the trials ran
        out[f"cudalab_{kind}_time"] = getattr(res, "time_account", None)  # where the rest goes
        if env_cache is None:
            os.environ.pop("CUDALAB_CACHE", None)
        else:
            os.environ["CUDALAB_CACHE"] = env_cache
    on_progress(dict(out))
    winners: list[str] = []
    walls: list[float] = []
    for _ in range(repeats):
        w, s = _transpose_kt(kt, 8192)
        winners.append(w)
        walls.append(s)
        out.update(winners=winner_changes(winners), walls_s=list(walls), wall_s=sum(walls) / len(walls),
                   kt_cold_s=walls[0], kt_warm_s=statistics.median(walls[1:]) if len(walls) > 1 else None)
        on_progress(dict(out))
    return out


def _kt_calls(part: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The kernel_tuner calls a kt part holds: its ``calls`` when it joins several, else itself (when it ran)."""
    if not part or not part.get("walls_s"):
        return []
    return list(part["calls"]) if "calls" in part else [part]


def join_kt(mine: dict[str, Any] | None, theirs: dict[str, Any]) -> dict[str, Any]:
    """Two records' kernel_tuner parts as one (more campaigns from another call or lane): every call kept whole in
    ``calls`` (a call met twice, the same walls, counted once), the winners counted over all campaigns, the cold
    figure the median of each call's first campaign (each call starts with PyCUDA's cache as its machine has it),
    the warm one the median of the others, cudalab's the medians of the calls'. A part that did not run (skipped)
    gives way to one that did."""
    calls = _kt_calls(mine)
    for c in _kt_calls(theirs):
        if all(c["walls_s"] != k["walls_s"] for k in calls):
            calls.append(c)
    if len(calls) < 2:
        return calls[0] if calls else theirs
    counts: dict[str, int] = {}
    for c in calls:
        for w, n in c["winners"]["counts"].items():
            counts[w] = counts.get(w, 0) + n
    walls = [w for c in calls for w in c["walls_s"]]
    rest = [w for c in calls for w in c["walls_s"][1:]]
    out: dict[str, Any] = {
        "version": calls[0].get("version"),  # no "asked": a call cut short asked more than it ran (see calls)
        "winners": {"campaigns": len(walls), "distinct": len(counts), "counts": counts}, "walls_s": walls,
        "wall_s": sum(walls) / len(walls), "kt_cold_s": statistics.median(c["walls_s"][0] for c in calls),
        "kt_warm_s": statistics.median(rest) if rest else None, "calls": calls}
    for key in ("cudalab_cold_s", "cudalab_warm_s", "cudalab_cold_gpu_busy_pct", "cudalab_warm_gpu_busy_pct"):
        have = [c[key] for c in calls if isinstance(c.get(key), (int, float))]
        if have:
            out[key] = statistics.median(have)
    return out


def merge_into(record: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Add another call's record of the same GPU (two calls at once, one GPU each) to ``record``: its ground
    truths and replays space by space, its trust and kt parts whole, each with its command. Returns what it
    added (``ground SPACE``, ``trust``...).

    Raises:
        ValueError: the records name different GPUs.
    """
    if other.get("device") and record.get("device") and other["device"] != record["device"]:
        raise ValueError(f"a record of {other['device']} cannot go into one of {record['device']}")
    added: list[str] = []
    for part in ("ground", "replay"):
        for space, figures in other.get(part, {}).items():
            record.setdefault(part, {})[space] = figures
            added.append(f"{part} {space}")
    if "trust" in other:
        record["trust"] = other["trust"]
        added.append("trust")
    if "kt" in other:
        record["kt"] = join_kt(record.get("kt"), other["kt"])
        added.append("kt")
    theirs = other.get("commands", {})
    for key in added:  # an old record's command is per part ("ground"), a newer one's per space
        cmd = theirs.get(key) or theirs.get(key.split()[0]) or other.get("command")
        if cmd:
            record.setdefault("commands", {})[key] = cmd
    return added


def _device_name() -> str:
    from cudalab.instruments.driverquery import gpu_name  # noqa: PLC0415  (NVML or nvidia-smi, no CUDA context)

    return gpu_name(0) or "gpu"


def main(argv: Sequence[str] | None = None, device_name: Callable[[], str] = _device_name) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    ap.add_argument("--spaces", default=",".join(SPACES), help=f"ground truths: comma list of {', '.join(SPACES)}")
    ap.add_argument("--trials", type=int, default=None, help="at most this many configurations a ground truth (default: all)")
    ap.add_argument("--seeds", type=int, default=20, help="replay seeds a strategy (default 20)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="replayed strategies (default tpe,gp,random)")
    ap.add_argument("--share", type=float, default=0.10, help="the replay's budget: this share of the configurations")
    ap.add_argument("--repeats", type=int, default=10, help="trust campaigns, and kernel_tuner campaigns (default 10)")
    ap.add_argument("--kt-repeats", type=int, default=None, help="kernel_tuner campaigns (default: --repeats)")
    ap.add_argument("--kt-alone", action="store_true",
                    help="kt: kernel_tuner's campaigns only (cudalab's side from another call, joined by --merge)")
    ap.add_argument("--trust-space", default="reduce-modern", choices=sorted(SPACES))
    ap.add_argument("--trust-trials", type=int, default=None, help="configurations a trust campaign measures (default: all)")
    ap.add_argument("--seconds", type=float, default=0.1, help="timing budget of one trial (the protocol's, default 0.1)")
    ap.add_argument("--kernel-tuner", default=None, help="a folder (or wheel) kernel_tuner 1.5 imports from")
    ap.add_argument("--build-ahead", type=int, default=None, help="build threads ahead of the GPU (default: the cores less one)")
    ap.add_argument("--merge", action="append", default=[], metavar="JSON",
                    help="add another call's record of the same GPU (repeatable; with --parts none, only merge)")
    ap.add_argument("--gpu", default=None, help="the record's name (default: the GPU's, as nvidia-smi names it)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "benchmarks"), help="where the record goes")
    a = ap.parse_args(argv)
    parts = [p.strip() for p in a.parts.split(",") if p.strip() and p.strip() != "none"]
    spaces = [s.strip() for s in a.spaces.split(",") if s.strip()]
    bad = [p for p in parts if p not in PARTS] + [s for s in spaces if s not in SPACES]
    if bad or (a.trials is not None and a.trials < 1) or a.seeds < 1 or a.repeats < 1 or not 0 < a.share <= 1:
        print(f"bench_tune: bad arguments {bad or ''} (parts: {', '.join(PARTS)}; spaces: {', '.join(SPACES)}; "
              "--trials, --seeds and --repeats at least 1, --share in (0, 1])", file=sys.stderr)
        return 2
    if a.build_ahead is not None:
        TUNE_KW["build_ahead"] = a.build_ahead
    name = a.gpu or device_name()
    gpu = gpu_slug(name)
    out = Path(a.out)
    dbs = out / "tune" / gpu
    command = " ".join(["python3 scripts/bench_tune.py", *(sys.argv[1:] if argv is None else argv)])
    record = earlier_record(out / f"{gpu}-tune.json")  # a part not run now keeps its earlier figures
    from cudalab.records import machine  # noqa: PLC0415

    # the code of this call (a part measured by an earlier call keeps its command; the code is the last call's)
    record.update({"device": name, "command": command, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                   "code": machine.code_revision()})
    for path in a.merge:
        try:
            print(f"[bench_tune] merged from {path}: {', '.join(merge_into(record, json.loads(Path(path).read_text())))}")
        except (OSError, ValueError) as exc:
            print(f"bench_tune: cannot merge {path}: {exc}", file=sys.stderr)
            return 2
    commands = record.setdefault("commands", {})  # a part's command is recorded with its figures
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmpname:
        tmp = Path(tmpname)
        # the record is written after each part (and each ground truth): a run stopped later keeps them
        if "ground" in parts:
            record.setdefault("ground", {})  # a space measured by an earlier call keeps its figures
            for s in spaces:
                t0 = time.monotonic()
                record["ground"][s] = ground(s, dbs / f"{s}.db", a.trials, a.seconds)
                print(f"[bench_tune] ground {s}: {time.monotonic() - t0:.0f} s", flush=True)
                commands[f"ground {s}"] = command
                write_record(record, out, gpu)
        if "replay" in parts:
            have = [s for s in spaces if (dbs / f"{s}.db").is_file()]
            strategies = [x.strip() for x in a.strategies.split(",") if x.strip()]
            record.setdefault("replay", {}).update(
                {s: replay_part(s, dbs / f"{s}.db", a.seeds, a.share, strategies) for s in have})
            commands.update({f"replay {s}": command for s in have})
            write_record(record, out, gpu)
        if "trust" in parts:
            t0 = time.monotonic()
            record["trust"] = trust(a.trust_space, a.repeats, a.trust_trials, a.seconds, tmp)
            print(f"[bench_tune] trust {a.trust_space} x{a.repeats}: {time.monotonic() - t0:.0f} s", flush=True)
            commands["trust"] = command
            write_record(record, out, gpu)
        if "kt" in parts:
            def kt_so_far(part: dict[str, Any]) -> None:
                record["kt"] = part
                commands["kt"] = command
                write_record(record, out, gpu)

            record["kt"] = kernel_tuner_part(a.kernel_tuner, a.kt_repeats or a.repeats, a.seconds, tmp, kt_so_far,
                                             with_cudalab=not a.kt_alone)
            commands["kt"] = command
    js, md = write_record(record, out, gpu)
    width = max((len(f"{p}  {w}") for p, w, _ in summary_rows(record)), default=10)
    print(f"\nwrote {js} and {md}")
    for p, w, f in summary_rows(record):
        print(f"{(p + '  ' + w).ljust(width)}  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
