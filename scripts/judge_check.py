#!/usr/bin/env python3
"""The judge's record on a GPU (issue 60): ``cudalab judge`` on built-in families and an own problem (each
JSON validated against docs/judge-schema.json), the exploit suite (every exploit caught with its flag, every
honest twin correct and unflagged), and the timing: ``cudalab.judge`` called CALLS times in one process (the
worker kept warm) and the command run RUNS times. Writes ``<out>/<gpu-slug>-judge.md`` and ``.json`` and the
objects under ``<objects>/``.

    python3 scripts/judge_check.py --out docs/benchmarks --objects /tmp/judge

Targets: a call ≤ 0.3 s on average for a kernel under 1 ms; the command ≤ 1.2 s. Exit 1 when a check fails
(an exploit not caught, a twin flagged, an object that does not validate, an exit code not the expected one).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import exploits  # noqa: E402  (tests/exploits.py: the manifest)
from cudalab.judging import schema as JS  # noqa: E402

CLI = [sys.executable, "-m", "cudalab", "judge"]
EX = "docs/examples"
#: (name, arguments, environment additions, expected exit code)
COMMANDS = [
    ("copy-honest", ["copy", "--n", "4096", "--add",
                     "tests/data/exploits/once_only.cu:once_only@block=32x8,-DHONEST=1,name=my_copy"], {}, 0),
    ("transpose", ["transpose", "--n", "4096", "--add", f"{EX}/my_transpose.cu:my_transpose@block=32x8,tile=32x32"], {}, 0),
    ("transpose-edge", ["transpose", "--n", "4096", "--add",
                        f"{EX}/my_transpose_edge.cu:my_transpose_edge@block=32x8,tile=32x32"], {}, 1),
    ("reduce", ["reduce", "--n", "2^24", "--add", f"{EX}/my_reduce.cu:my_reduce@block=512,per_thread=2"], {}, 0),
    ("reduce-nosync", ["reduce", "--n", "2^24", "--add", f"{EX}/my_reduce_nosync.cu:my_reduce_nosync@block=512,per_thread=2"],
     {}, 1),
    ("histogram-own", ["histogram", "--add", "examples/histogram/histogram.cu:hist_shared@block=512,per_thread=4,grid=sm:4"],
     {"CUDALAB_PATH": "examples"}, 0),
    ("refused", ["copy", "--n", "4096,8192", "--add", f"{EX}/my_transpose.cu:my_transpose"], {}, 2),
]
TIMED = ("reduce", f"{EX}/my_reduce.cu:my_reduce@block=512,per_thread=2", "2^20")
CALL_TARGET_S, COMMAND_TARGET_S = 0.3, 1.2


def nvidia_smi_name() -> str:
    """GPU 0's name (NVML or nvidia-smi: this process opens no CUDA context of its own)."""
    from cudalab.instruments.driverquery import gpu_name  # noqa: PLC0415

    return gpu_name(0) or "unknown GPU"


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run_command(args: list[str], env: dict[str, str], timeout: float = 240) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env=dict(os.environ, **env))
    return time.perf_counter() - t0, proc


def commands(schema: dict, objects: Path, rec: dict) -> bool:
    ok = True
    for name, args, env, want in COMMANDS:
        wall, proc = run_command(args, env)
        lines = proc.stdout.splitlines()
        entry = {"name": name, "command": "cudalab judge " + " ".join(args), "exit": proc.returncode, "want": want,
                 "wall_s": wall, "stderr_tail": proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []}
        if want == 2:
            entry["ok"] = proc.returncode == 2 and not proc.stdout.strip()
        else:
            try:
                obj = json.loads(proc.stdout) if len(lines) == 1 else None
            except ValueError:
                obj = None
            problems = JS.problems(obj, schema) if obj is not None else ["stdout is not one JSON object"]
            (objects / f"{name}.json").write_text(json.dumps(obj, indent=1) if obj is not None else proc.stdout)
            entry.update(verdict=(obj or {}).get("verdict"), flags=(obj or {}).get("flags"), problems=problems,
                         median_ms=((obj or {}).get("time") or {}).get("median_ms"),
                         speedup_ref=((obj or {}).get("reference") or {}).get("speedup"),
                         verdict_ref=((obj or {}).get("reference") or {}).get("verdict"),
                         speedup_best=((obj or {}).get("best") or {}).get("speedup"),
                         verdict_best=((obj or {}).get("best") or {}).get("verdict"),
                         pct_roofline=(obj or {}).get("pct_roofline"))
            entry["ok"] = proc.returncode == want and not problems
        print(f"{name}: exit {proc.returncode} (want {want}) {entry.get('verdict', '')} {entry.get('flags', '')} "
              f"{wall:.2f} s {'ok' if entry['ok'] else 'FAILED ' + str(entry.get('problems', ''))}", flush=True)
        rec["commands"].append(entry)
        ok &= entry["ok"]
    return ok


def suite(schema: dict, objects: Path, rec: dict) -> bool:
    from cudalab.judging import Judge

    ok = True
    with Judge(timeout=30) as j:
        for e in exploits.load():
            for honest in (False, True):
                t0 = time.perf_counter()
                try:
                    obj = j.judge(e.family, e.add(honest), against="none", reference="none", **e.size)
                except Exception as exc:  # one exploit must not end the record
                    obj = {"verdict": "error", "flags": [], "exit_code": -1, "reason": f"{type(exc).__name__}: {exc}"}
                wall = time.perf_counter() - t0
                caught = set(obj.get("flags", [])) | ({"failed"} if obj.get("verdict") == "failed" else set())
                good = (obj.get("verdict") == "correct" and not obj.get("flags")) if honest else \
                    bool(caught & set(e.expect)) and obj.get("verdict") != "correct"
                problems = JS.problems(obj, schema) if obj.get("verdict") != "error" else ["error"]
                name = f"{e.kernel}{'-honest' if honest else ''}"
                (objects / f"exploit-{name}.json").write_text(json.dumps(obj, indent=1))
                look = (obj.get("checks") or {}).get("second_look") or {}
                rec["exploits"].append({"name": name, "family": e.family, "games": e.games, "expect": list(e.expect),
                                        "verdict": obj.get("verdict"), "flags": obj.get("flags"),
                                        "fresh_repeat": look.get("ratio"),
                                        "median_ms": (obj.get("time") or {}).get("median_ms"),
                                        "exit": obj.get("exit_code"), "ok": good and not problems,
                                        "problems": problems, "wall_s": wall,
                                        "reason": (obj.get("reason") or "")[:160]})
                print(f"{name}: {obj.get('verdict')} {obj.get('flags')} {'ok' if good else 'FAILED'}", flush=True)
                ok &= good and not problems
    return ok


PHASES = re.compile(r"\[(?P<total>[\d.]+) s in the command: plan (?P<plan>[\d.]+), GPU open (?P<open>[\d.]+), "
                    r"(?P<rows>\d+) row\(s\)(?P<roof> \+ roofline)? (?P<rows_s>[\d.]+), verdict (?P<verdict>[\d.]+), "
                    r"close (?P<close>[\d.]+)(?:; rivals and roofline kept from (?P<kept>\d+) s before)?\]")


def command_parts(wall: float, stderr: str) -> dict:
    """Where one command's wall went: its last stderr line's phases (cudalab/cli/judge.py), and the rest (the
    interpreter's start, the imports before the command, the exit) as ``start_exit_s``."""
    m = PHASES.search(stderr or "")
    if m is None:
        return {"wall_s": wall, "parsed": False}
    f = {k: float(v) for k, v in m.groupdict().items() if v is not None and k not in ("roof", "rows")}
    return {"wall_s": wall, "parsed": True, "start_exit_s": wall - f["total"], "plan_s": f["plan"],
            "gpu_open_s": f["open"], "rows": int(m["rows"]), "roofline": bool(m["roof"]), "rows_s": f["rows_s"],
            "verdict_s": f["verdict"], "close_s": f["close"], "kept_s": f.get("kept")}


def fmt_parts(p: dict) -> str:
    if not p.get("parsed"):
        return f"{p['wall_s']:.2f} s (no phases on stderr)"
    return (f"{p['wall_s']:.2f} s = start+imports+exit {p['start_exit_s']:.2f} + plan {p['plan_s']:.2f} + GPU open "
            f"{p['gpu_open_s']:.2f} + {p['rows']} row(s){' + roofline' if p['roofline'] else ''} {p['rows_s']:.2f} "
            f"+ verdict {p['verdict_s']:.2f} + close {p['close_s']:.2f}"
            + (" (rivals kept)" if p.get("kept_s") is not None else " (rivals measured)"))


def forget_kept() -> int:
    """Remove the rivals the judge keeps on disk (cudalab/judging/kept.py): the first command measures them."""
    from cudalab.judging import kept as K

    n = 0
    for f in K.folder().glob(f"{K.PREFIX}*.json"):
        f.unlink(missing_ok=True)
        n += 1
    return n


def timing(calls: int, runs: int, rec: dict) -> bool:
    import cudalab

    fam, add, n = TIMED
    walls, medians = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        obj = cudalab.judge(fam, add, n=n)
        walls.append(time.perf_counter() - t0)
        medians.append(((obj.get("time") or {}).get("median_ms")) or 0.0)
    forget_kept()  # the loop above kept this point's rivals: the first command measures them afresh
    parts = []
    for i in range(runs):
        wall, proc = run_command([fam, "--n", n, "--add", add], {})
        parts.append(command_parts(wall, proc.stderr))
        print(f"command {i + 1}: exit {proc.returncode}, {fmt_parts(parts[-1])}", flush=True)
    cmd = [p["wall_s"] for p in parts]
    warm = [p["wall_s"] for p in parts if p.get("kept_s") is not None]
    mean_of = lambda key, ps: statistics.fmean(p[key] for p in ps) if ps else None  # noqa: E731
    parsed = [p for p in parts if p.get("parsed")]
    rec["timing"] = {"family": fam, "add": add, "n": n, "calls": calls, "first_call_s": walls[0],
                     "mean_call_s": statistics.fmean(walls), "mean_warm_call_s": statistics.fmean(walls[1:] or walls),
                     "median_call_s": statistics.median(walls), "kernel_median_ms": statistics.median(medians),
                     "command_runs": runs, "mean_command_s": statistics.fmean(cmd) if cmd else None,
                     "first_command_s": cmd[0] if cmd else None,
                     "mean_kept_command_s": statistics.fmean(warm) if warm else None,
                     "command_parts_mean": {k: mean_of(k, parsed) for k in ("start_exit_s", "plan_s", "gpu_open_s",
                                                                             "rows_s", "verdict_s", "close_s")},
                     "command_parts": parts, "command_walls_s": cmd, "call_walls_s": walls}
    t = rec["timing"]
    print(f"timing: {calls} calls, mean {t['mean_call_s']:.3f} s (first {t['first_call_s']:.2f} s), kernel "
          f"{t['kernel_median_ms']:.4f} ms; command mean {t['mean_command_s'] or 0:.2f} s over {runs} (the first, "
          f"measuring the rivals, {t['first_command_s'] or 0:.2f} s; those with rivals kept "
          f"{t['mean_kept_command_s'] or 0:.2f} s)", flush=True)
    return t["mean_call_s"] <= CALL_TARGET_S and (t["mean_command_s"] or 0) <= COMMAND_TARGET_S


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def markdown(rec: dict) -> str:
    out = [f"# cudalab judge on {rec['gpu']} ({rec['date']}, code {rec['code']})", "",
           "`python3 scripts/judge_check.py` (issue 60): `cudalab judge` on built-in families and an own problem, the "
           "exploit suite, the timing. Objects validated against docs/judge-schema.json.", ""]
    if rec["commands"]:
        out += ["## The command", "", "| run | exit (want) | verdict | flags | median ms | speedup ref (verdict) | "
                "speedup best (verdict) | % roofline | wall s | ok |", "|" + " --- |" * 10]
        for c in rec["commands"]:
            f = lambda x: "–" if x is None else f"{x:.3g}"  # noqa: E731
            out.append(f"| `{c['name']}` | {c['exit']} ({c['want']}) | {c.get('verdict') or '–'} | "
                       f"{', '.join(c.get('flags') or []) or '–'} | {f(c.get('median_ms'))} | "
                       f"{f(c.get('speedup_ref'))} ({c.get('verdict_ref') or '–'}) | {f(c.get('speedup_best'))} "
                       f"({c.get('verdict_best') or '–'}) | {f(c.get('pct_roofline'))} | {c['wall_s']:.2f} | "
                       f"{'✓' if c['ok'] else '✗'} |")
        out += ["", "Commands: " + "; ".join(f"`{c['command']}`" for c in rec["commands"]), ""]
    if rec["exploits"]:
        out += ["## The exploit suite", "",
                "fresh/repeat: the paired launches' ratio of medians (a fresh launch on the other input set than the "
                "launch before, a repeat on the same; `memo` above 1.1).", "",
                "| kernel | games | expected | verdict | flags | fresh/repeat | median ms | exit | ok |",
                "|" + " --- |" * 9]
        for e in rec["exploits"]:
            out.append(f"| `{e['name']}` | {e['games'] if not e['name'].endswith('-honest') else 'honest twin'} | "
                       f"{', '.join(e['expect']) if not e['name'].endswith('-honest') else 'correct, no flag'} | "
                       f"{e['verdict']} | {', '.join(e['flags'] or []) or '–'} | {_f(e.get('fresh_repeat'))} | "
                       f"{_f(e.get('median_ms'))} | {e['exit']} | {'✓' if e['ok'] else '✗'} |")
        out.append("")
    t = rec.get("timing")
    if t:
        out += ["## Timing", "",
                f"`cudalab.judge(\"{t['family']}\", \"{t['add']}\", n=\"{t['n']}\")` {t['calls']} times in one process "
                f"(kernel median {t['kernel_median_ms']:.4f} ms): mean {t['mean_call_s']:.3f} s a call (target ≤ "
                f"{CALL_TARGET_S} s), the first {t['first_call_s']:.2f} s (the worker starting), the others "
                f"{t['mean_warm_call_s']:.3f} s. The command, {t['command_runs']} runs: mean "
                f"{t['mean_command_s'] or 0:.2f} s (target ≤ {COMMAND_TARGET_S} s); the first, which measured the "
                f"reference and best rows and the roofline, {t.get('first_command_s') or 0:.2f} s; the others, with "
                f"those kept from it (cudalab/judging/kept.py), {t.get('mean_kept_command_s') or 0:.2f} s.", ""]
        cp = t.get("command_parts") or []
        if cp:
            out += ["Where each command's wall went (s; its stderr's phases; start+imports+exit = wall − the time "
                    "inside the command):", "",
                    "| run | wall | start+imports+exit | plan | GPU open | rows | rows s | verdict | close | rivals |",
                    "|" + " --- |" * 10]
            for i, p in enumerate(cp, 1):
                if not p.get("parsed"):
                    out.append(f"| {i} | {p['wall_s']:.2f} | – | – | – | – | – | – | – | – |")
                    continue
                out.append(f"| {i} | {p['wall_s']:.2f} | {p['start_exit_s']:.2f} | {p['plan_s']:.2f} | "
                           f"{p['gpu_open_s']:.2f} | {p['rows']}{' + roofline' if p['roofline'] else ''} | "
                           f"{p['rows_s']:.2f} | {p['verdict_s']:.2f} | {p['close_s']:.2f} | "
                           f"{'kept' if p.get('kept_s') is not None else 'measured'} |")
            out.append("")
    took = f" The script ran {rec['elapsed_s']:.0f} s." if rec.get("elapsed_s") else ""
    out.append(f"Result: {'all checks passed' if rec['ok'] else 'SOME CHECKS FAILED'}.{took}")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/benchmarks")
    ap.add_argument("--objects", default="/tmp/judge-objects", help="folder for every JSON object the judge gave")
    ap.add_argument("--parts", default="commands,exploits,timing")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    out, objects = Path(a.out), Path(a.objects)
    out.mkdir(parents=True, exist_ok=True)
    objects.mkdir(parents=True, exist_ok=True)
    schema = json.loads(JS.schema_path().read_text())
    gpu = nvidia_smi_name()
    rec = {"gpu": gpu, "date": datetime.date.today().isoformat(),
           "code": os.environ.get("CUDALAB_CODE", "HEAD"), "commands": [], "exploits": [], "timing": None, "ok": True}
    parts = a.parts.split(",")
    started = time.perf_counter()
    for part, fn in (("commands", lambda: commands(schema, objects, rec)),
                     ("exploits", lambda: suite(schema, objects, rec)),
                     ("timing", lambda: timing(a.calls, a.runs, rec))):
        if part in parts:
            try:
                rec["ok"] &= bool(fn())
            except Exception as exc:  # the record still comes out, saying what broke
                rec["ok"] = False
                rec.setdefault("errors", []).append(f"{part}: {type(exc).__name__}: {exc}")
                print(f"{part}: {type(exc).__name__}: {exc}", flush=True)
    rec["elapsed_s"] = time.perf_counter() - started
    base = out / f"{slug(gpu)}-judge"
    base.with_suffix(".json").write_text(json.dumps(rec, indent=1) + "\n")
    base.with_suffix(".md").write_text(markdown(rec))
    print(f"wrote {base}.md and .json: {'ok' if rec['ok'] else 'FAILED'} ({rec['elapsed_s']:.0f} s)")
    return 0 if rec["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
