#!/usr/bin/env python3
"""Do two sets of benchmark records agree within noise? (issue 42 item 8: nothing a user sees gets slower)

    python3 scripts/bench_agree.py OLD [OLD...] --vs NEW [NEW...] [--out DIR]

Each argument is a benchmark record (scripts/benchmark.py's <gpu>.json, gzipped or not, or the folder holding it). A side of
several records (rounds of the same code, run alternately with the other side's on one GPU: gpu-check's ``ab``
stage) is pooled row by row: the median of the rounds' medians. Only GPU rows that passed on both sides are
judged (NumPy's host rows time the CPU, not cudalab). The bar is the issue's: the median over the rows of
new / old within 1%, every row within 5%; the wall section's time to table (its warm seconds per command),
when both sides have it, against the same bar. With two or more rounds a side, the spread between one side's own
rounds (old round 1 against old round 2) is printed as the noise the comparison stands in.

Writes agree.md and agree.json to --out when given; exit 0 when the bar is met, 1 when not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's cudalab, as benchmark.py

from cudalab.records.compare import method_of  # noqa: E402

#: The bar: the median row ratio within this of 1, every row within ROW_BAR.
MEDIAN_BAR, ROW_BAR = 0.01, 0.05
#: Rows that time the CPU (NumPy) or nothing: not judged.
HOST_KINDS = ("host", "cpu")


def load(path: str) -> dict[str, Any]:
    """A benchmark record from its .json (or .json.gz: committed rounds are kept compressed) or its folder (the
    one such file there that has ``runs``)."""
    p = Path(path)
    files = [p] if p.is_file() else sorted(p.glob("*.json")) + sorted(p.glob("*.json.gz"))
    for f in files:
        data = json.loads(gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_text())
        if isinstance(data, dict) and (isinstance(data.get("runs"), dict) or data.get("time_to_table")):
            return data
    raise ValueError(f"{path}: no benchmark record (a .json with 'runs' or 'time_to_table')")


def medians(record: dict[str, Any]) -> dict[tuple[str, str], float]:
    """(job, variant) -> median ms of every GPU row that passed."""
    out = {}
    for job, run in (record.get("runs") or {}).items():
        for r in run.get("rows", []):
            st = r.get("stats") or {}
            if r.get("kind") not in HOST_KINDS and r.get("status") == "passed" and st.get("median"):
                out[(job, r["variant"])] = float(st["median"])
    return out


def methods(records: Sequence[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """(job, variant) -> how its samples were timed in these records, as ``cudalab compare`` reads a row
    (:func:`cudalab.records.compare.method_of`)."""
    out: dict[tuple[str, str], set[str]] = {}
    for rec in records:
        for job, run in (rec.get("runs") or {}).items():
            for r in run.get("rows", []):
                out.setdefault((job, r["variant"]), set()).add(method_of(r.get("kind"), r.get("extra")))
    return out


def pooled(records: Sequence[dict[str, Any]],
           rows_of: Callable[[dict[str, Any]], dict[tuple[str, str], float]] = medians) -> dict[tuple[str, str], float]:
    """Each row's figure (``rows_of``: GPU rows' medians, or :func:`walls`) as the median over the records that
    have it (rounds of one side)."""
    per: dict[tuple[str, str], list[float]] = {}
    for rec in records:
        for k, v in rows_of(rec).items():
            per.setdefault(k, []).append(v)
    return {k: statistics.median(v) for k, v in per.items()}


def walls(record: dict[str, Any]) -> dict[tuple[str, str], float]:
    """("time to table", command) -> its warm wall seconds (the wall section's), for commands that exited 0."""
    return {("time to table", t["command"]): float(t["wall_s"]) for t in record.get("time_to_table") or []
            if t.get("rc") == 0 and t.get("wall_s")}


def agree(old: dict[tuple[str, str], float], new: dict[tuple[str, str], float],
          differ: set[tuple[str, str]] = frozenset()) -> dict[str, Any]:
    """The rows of both, their ratios new / old, and the verdict against the bar. Rows in ``differ`` (timed by
    one method on one side and another on the other: a kernel near 20 µs batched in one run, timed alone in the
    next) are listed, not judged, as ``compare`` leaves them unsure."""
    both = old.keys() & new.keys()
    apart = [dict(job=k[0], variant=k[1], old_ms=old[k], new_ms=new[k], ratio=new[k] / old[k])
             for k in sorted(both & differ)]
    rows = sorted((k[0], k[1], old[k], new[k], new[k] / old[k]) for k in both - differ)
    if not rows:
        return {"rows": [], "judged": 0, "met": False, "median_ratio": None, "worst": None, "timed_apart": apart}
    ratios = [r[4] for r in rows]
    med = statistics.median(ratios)
    worst = max(rows, key=lambda r: abs(r[4] - 1))
    return {"rows": [dict(job=j, variant=v, old_ms=o, new_ms=n, ratio=x) for j, v, o, n, x in rows],
            "judged": len(rows), "median_ratio": med, "worst": dict(job=worst[0], variant=worst[1], ratio=worst[4]),
            "outside_row_bar": sum(abs(x - 1) > ROW_BAR for x in ratios), "timed_apart": apart,
            "met": abs(med - 1) <= MEDIAN_BAR and all(abs(x - 1) <= ROW_BAR for x in ratios)}


def summary(name: str, a: dict[str, Any]) -> str:
    if not a["judged"]:
        return f"{name}: no row on both sides"
    w = a["worst"]
    apart = f" ({len(a['timed_apart'])} timed by different methods, not judged)" if a.get("timed_apart") else ""
    return (f"{name}: {a['judged']} rows, median new/old {a['median_ratio']:.4f}, worst {w['ratio']:.4f} "
            f"({w['job']} / {w['variant']}), {a['outside_row_bar']} outside ±{ROW_BAR:.0%}{apart}: "
            + ("within noise" if a["met"] else "NOT within the bar"))


def source(side: str, path: str, rec: dict[str, Any]) -> dict[str, Any]:
    """Where one record came from: its date, GPU, bus ids and code revision (as its calls name them)."""
    calls = rec.get("calls") or []
    dev = rec.get("device") or {}
    buses = sorted({c.get("pci_bus_id") for c in calls if c.get("pci_bus_id")} or ({dev["pci_bus_id"]} if dev.get("pci_bus_id") else set()))
    codes = sorted({c.get("code") for c in calls if c.get("code")} | ({rec["code"]} if rec.get("code") else set()))
    return {"side": side, "path": path, "date": rec.get("date"), "gpu": dev.get("name"), "buses": buses,
            "codes": codes, "started": min((c["started"] for c in calls if c.get("started")), default=None)}


def markdown(result: dict[str, Any], argv: Sequence[str]) -> str:
    a = result["agree"]
    names = result.get("names") or {}
    md = ["# Benchmark records: do they agree?", "", f"Made by `python3 scripts/bench_agree.py {' '.join(argv)}`.", "",
          f"old: {names.get('old', 'old')}; new: {names.get('new', 'new')}.", "",
          f"Bar: the median row ratio new / old within {MEDIAN_BAR:.0%}, every GPU row within {ROW_BAR:.0%}.", "",
          *([f"- {summary('old vs new', a)}"] if a["judged"] or "agree_walls" not in result else [])]
    if "agree_walls" in result:
        md.append(f"- {summary('time to table, old vs new', result['agree_walls'])}")
    md += [f"- {summary(name, s)}" for name, s in result.get("self", {}).items()]
    rows = a["rows"] + (result["agree_walls"]["rows"] if "agree_walls" in result else [])
    md += ["", "| job | variant | old | new | new / old |", "|---|---|---:|---:|---:|"]
    md += [f"| {r['job']} | {r['variant']} | {r['old_ms']:.4f} | {r['new_ms']:.4f} | {r['ratio']:.4f} |"
           for r in sorted(rows, key=lambda r: -abs(r["ratio"] - 1))]
    md += ["", "(GPU rows in ms; time to table in seconds.)"]
    if result.get("records"):
        md += ["", "Records (the code as each record names it; '–' where its code predates naming it):", "",
               "| side | record | date | started | GPU | bus | code |", "|---|---|---|---|---|---|---|"]
        md += [f"| {r['side']} | {r['path']} | {r['date'] or '–'} | {r['started'] or '–'} | {r['gpu'] or '–'} | "
               f"{', '.join(r['buses']) or '–'} | {', '.join(r['codes']) or '–'} |" for r in result["records"]]
    if a.get("timed_apart"):
        md += ["", "Timed by different methods on the two sides (not judged; `cudalab compare` calls them unsure):", ""]
        md += [f"- {r['job']} / {r['variant']}: {r['old_ms']:.4f} -> {r['new_ms']:.4f} ms ({r['ratio']:.4f})"
               for r in a["timed_apart"]]
    return "\n".join(md) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", nargs="+", help="the old side's records (.json or folders)")
    ap.add_argument("--vs", nargs="+", required=True, metavar="NEW", help="the new side's records")
    ap.add_argument("--out", default=None, help="write agree.md and agree.json here")
    ap.add_argument("--names", nargs=2, default=("old", "new"), metavar=("OLD", "NEW"),
                    help="what each side is (a revision, say), named in the record")
    a = ap.parse_args(argv)
    try:
        olds, news = [load(p) for p in a.old], [load(p) for p in a.vs]
    except (OSError, ValueError) as exc:
        print(f"bench_agree: {exc}", file=sys.stderr)
        return 2
    mo, mn = methods(olds), methods(news)
    differ = {k for k in mo.keys() & mn.keys() if mo[k] != mn[k]}
    result: dict[str, Any] = {"agree": agree(pooled(olds), pooled(news), differ), "self": {}}
    if any(r.get("time_to_table") for r in olds) and any(r.get("time_to_table") for r in news):
        # time to table: the same bar, on the warm wall of each command (a row whose "time" is the user's wait)
        result["agree_walls"] = agree(pooled(olds, walls), pooled(news, walls))
    for name, side in (("old round 1 vs old round 2", olds), ("new round 1 vs new round 2", news)):
        if len(side) >= 2 and medians(side[0]):
            result["self"][name] = agree(medians(side[0]), medians(side[1]))
        if len(side) >= 2 and "agree_walls" in result:
            result["self"][f"{name}, time to table"] = agree(walls(side[0]), walls(side[1]))
    result["names"] = {"old": a.names[0], "new": a.names[1]}
    result["records"] = [source(side, path, rec) for side, paths, recs in (("old", a.old, olds), ("new", a.vs, news))
                         for path, rec in zip(paths, recs)]
    gpu_rows = result["agree"]["judged"] or "agree_walls" not in result  # a wall-only A/B has no GPU rows to say
    if gpu_rows:
        print(summary("old vs new", result["agree"]))
    if "agree_walls" in result:
        print(summary("time to table, old vs new", result["agree_walls"]))
    for name, s in result["self"].items():
        print(summary(name, s))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        args = list(sys.argv[1:] if argv is None else argv)
        (out / "agree.json").write_text(json.dumps(result, indent=1) + "\n")
        (out / "agree.md").write_text(markdown(result, args))
    judged = [x for x in (result["agree"], result.get("agree_walls")) if x and x["judged"]]
    return 0 if judged and all(x["met"] for x in judged) else 1


if __name__ == "__main__":
    sys.exit(main())
