"""scripts/bench_truth.py's pure parts (issues 46 and 59's record): the verdict per row against CUPTI's span from
``cudalab truth`` documents made with and without cupti-python, ncu's offset, the pass counts and the claim,
calibrate's bar, the pairs that fit, the throttle rows and the markdown."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cudalab.studies.truth import Figure, Row, Truth

_spec = importlib.util.spec_from_file_location("bench_truth", Path(__file__).parents[1] / "scripts" / "bench_truth.py")
B = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(B)


def doc(cupti_ms: float, auto_ms: float | None = None, ncu_ms: float | None = None, graph_ms: float = 0.0030,
        cupti_by: str = "cupti", auto_by: str = "cupti", variant: str = "row-row") -> dict:
    """A ``cudalab truth --json`` document of one row: an auto run (the tables' figure) beside every method."""
    auto_ms = cupti_ms if auto_ms is None else auto_ms
    figs = []
    for temp in ("cold", "hot"):
        figs += [(temp, "events", Figure(0.0060, 0.0001, 20, "events")),
                 (temp, "batch", Figure(cupti_ms + 0.0007, 0.00001, 20, "batch", 64)),
                 (temp, "graph", Figure(graph_ms, 0.00001, 20, "graph", 64)),
                 (temp, "cupti", Figure(cupti_ms, 0.00001, 20, cupti_by, 64,
                                        "" if cupti_by == "cupti" else "timed by graph: cupti-python is not installed")),
                 (temp, "auto", Figure(auto_ms, 0.00001, 20, auto_by, 64))]
        if ncu_ms is not None:
            figs.append((temp, "ncu", Figure(ncu_ms + (0.0002 if temp == "hot" else 0.0), 0.00001, 9, "ncu")))
    t = Truth("smem-square", (Row("1 block", variant, "kernel", tuple(figs)),), {"name": "NVIDIA H200"}, 10,
              methods=("events", "batch", "graph", "cupti", "auto"))
    return t.to_dict()


def test_a_row_within_five_percent_passes_and_one_beyond_fails_with_and_without_cupti():
    ref = doc(cupti_ms=0.0100)
    good = B.truth_rows("j", ref, doc(cupti_ms=0.0100, auto_ms=0.0104, cupti_by="graph", auto_by="graph"))  # +4%
    bad = B.truth_rows("j", ref, doc(cupti_ms=0.0100, auto_ms=0.0106, cupti_by="graph", auto_by="graph"))   # +6%
    assert [ln["pass"] for ln in good] == [True, True]            # as installed: auto is cupti
    assert [ln["nocupti"]["pass"] for ln in good] == [True, True] and good[0]["nocupti"]["method"] == "graph"
    assert [ln["nocupti"]["pass"] for ln in bad] == [False, False]
    assert good[0]["nocupti"]["diff"] == pytest.approx(0.04) and good[0]["cupti_ms"] == 0.0100
    assert good[0]["graph"]["pass"] is False and good[0]["batch"]["pass"] is False   # 3.0 µs; +0.7 µs
    s = B.truth_summary(good + bad)
    assert s["cold"] == {"n": 2, "tables_pass": 2, "nocupti_pass": 1, "events_pass": 0, "batch_pass": 0,
                         "graph_pass": 0, "events_other": 0, "batch_other": 0, "graph_other": 0,
                         "worst": pytest.approx(0.0), "worst_nocupti": pytest.approx(0.06)}
    assert s["all_pass"] is False


def test_a_tenth_of_a_microsecond_passes_a_tiny_kernel_and_long_rows_are_not_counted():
    tiny = B.truth_rows("j", doc(cupti_ms=0.0010, auto_ms=0.00109))   # +9% but 90 ns
    assert all(ln["pass"] for ln in tiny)
    assert not any(ln["pass"] for ln in B.truth_rows("j", doc(cupti_ms=0.0010, auto_ms=0.00112)))   # 120 ns
    long = B.truth_rows("j", doc(cupti_ms=0.050))      # 50 µs: not a short kernel
    s = B.truth_summary(tiny + long)
    assert s["short"] == 2 and s["over_20us"] == 2 and s["cold"]["n"] == 1


def test_the_claim_needs_both_passes_and_twenty_rows_each():
    def rows(k, fallback=True):
        out = []
        for i in range(k):
            d = doc(cupti_ms=0.0010, variant=f"v{i}")
            out += B.truth_rows("j", d, doc(cupti_ms=0.0010, cupti_by="graph", auto_by="graph", variant=f"v{i}")
                                if fallback else None)
        return out
    assert B.truth_summary(rows(B.MIN_ROWS))["all_pass"] is True
    assert B.truth_summary(rows(B.MIN_ROWS - 1))["all_pass"] is False           # too few rows
    assert B.truth_summary(rows(B.MIN_ROWS, fallback=False))["all_pass"] is False   # no run without cupti
    missing = rows(B.MIN_ROWS)
    missing[0]["nocupti"] = {"method": "", "ms": None, "note": "", "diff": None, "pass": None}
    assert B.truth_summary(missing)["all_pass"] is False                         # a row the fallback lost


def test_a_figure_another_method_stood_in_for_is_no_reference():
    lines = B.truth_rows("j", doc(cupti_ms=0.0010, cupti_by="graph", auto_by="graph"))
    assert all(ln["cupti_ms"] is None and ln["pass"] is None for ln in lines)
    s = B.truth_summary(lines)
    assert s["short"] == 0 and s["no_cupti"] == 2 and s["all_pass"] is False


def test_ncus_offset_is_the_median_of_ncu_less_cupti_per_temperature():
    lines = []
    for i, over in enumerate((0.0010, 0.0009, 0.0030)):   # one row strays: the median holds
        lines += B.truth_rows("j", doc(cupti_ms=0.0020, ncu_ms=0.0020 + over, variant=f"v{i}"))
    off = B.ncu_offsets(lines)
    assert off["cold"] == {"offset_ms": pytest.approx(0.0010), "rows": 3, "low_ms": pytest.approx(0.0009),
                           "high_ms": pytest.approx(0.0030)}
    assert off["hot"]["offset_ms"] == pytest.approx(0.0012)
    assert B.ncu_offsets(B.truth_rows("j", doc(cupti_ms=0.002)))["cold"]["offset_ms"] is None   # no ncu


def test_calibrate_bar_and_pairs_that_fit():
    floor = {"false_rate": 0.005, "judgements": 200, "detect_rate": 0.85, "planted": 0.021, "min_effect": 0.0125}
    v = B.calibrate_verdict(floor)
    assert v["false_verdicts"] == 1 and v["false_ok"] and v["detect_ok"]
    assert not B.calibrate_verdict(dict(floor, false_rate=0.02))["false_ok"]
    assert not B.calibrate_verdict(dict(floor, detect_rate=0.79))["detect_ok"]
    assert B.pairs_that_fit(100, 240.0, 2.0) == 100
    assert B.pairs_that_fit(100, 150.0, 2.0) == 70      # 75 runs fit: 70 pairs + the probe, 3 checks, one more
    assert B.pairs_that_fit(100, 1.0, 2.0) == 1


def test_the_spread_between_processes_is_relative_to_the_median():
    s = B.process_spread({"vec4": [0.010, 0.0102, 0.0098, 0.0100, None, 0.0110], "calib": [0.02, None]})
    assert list(s) == ["vec4"]   # under 4 processes: no line
    assert s["vec4"] == "10.00 µs over 5 processes, IQR 2.00%, range -2.00% to +10.00%"


def _truth_part(lines):
    return {"ncu_launches": 6, "reference": "cupti", "methods": B.FIRST_METHODS, "fallback_env": "CUDALAB_NO_CUPTI=1",
            "within": {"fraction": 0.05, "ms": 1e-4, "min_rows": 20}, "lines": lines, "errors": {"x": "ncu: not found"},
            "summary": B.truth_summary(lines)}


def test_the_markdown_names_every_part_and_the_verdicts():
    t = B.truth_rows("smem", doc(cupti_ms=0.0100, ncu_ms=0.0110),
                     doc(cupti_ms=0.0100, auto_ms=0.0104, cupti_by="graph", auto_by="graph"))
    floor = {"false_rate": 0.0, "judgements": 200, "detect_rate": 0.9, "planted": 0.02, "min_effect": 0.01,
             "false_by_threshold": {"0.01": 0.0}, "detect_by_threshold": {"0.01": 0.9}}
    rec = {"argv": ["--parts", "truth"], "date": "2026-11-26", "commit": "abc", "gpu": {"name": "NVIDIA H100"},
           "truth": _truth_part(t),
           "calibrate": {"wanted": 100, "pairs": 60, "runs": 62, "seconds": 150.0, "budget_s": 150.0, "n": "8k",
                         "medians_ms": {"vec4": [1.0, 1.01, 0.99, 1.0]}, "floor": floor, "verdict": B.calibrate_verdict(floor)},
           "throttle": {"heater": "FMA", "heat_s": 30, "warm_s": 10, "telemetry_note": "", "note": "none flagged",
                        "rows": B.throttle_rows({"points": [{"results": [
                            {"variant": "vec4", "status": "passed", "stats": {"n": 1000},
                             "extra": {"throttled": 12, "sm_mhz_min": 1400, "throttle": "power"}}]}]})}}
    md = B.markdown(rec)
    assert ("| smem | 1 block | row-row | cold | 10.000 | cupti | 10.000 (+0.0%) pass | 10.400 (+4.0%) graph pass | "
            in md)
    assert "| 11.000 (+1.000) |" in md and "cold **+1.000 µs** over 1 rows" in md and "hot **+1.200 µs**" in md
    assert "| cold | 1 | 1 | 1 | 0 | 0 | 0 | +0.0% | +4.0% |" in md
    assert "over at least 20 rows each: **no**" in md and "`CUDALAB_NO_CUPTI=1`" in md
    assert "100 were asked, 60 fit in 150 s" in md and "**0 of 200**" in md and "(`--n 8k`)" in md
    assert "between fresh processes, vec4's median: 1000.00 µs over 4 processes, IQR 0.50%" in md
    assert "| vec4 | passed | 1000 | 12 | 1400 |" in md and "none flagged" in md and "`x`: ncu: not found" in md
    assert B.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3" and "Every figure below comes from that run." in md


def test_a_record_judged_against_ncu_before_is_not_misread():
    md = B.markdown({"argv": [], "gpu": {"name": "GPU"}, "truth": {"ncu_launches": 10, "auto_launch": "batch",
                                                                   "lines": [], "summary": {}}})
    assert "judged against ncu (before issue 59)" in md


def _earlier(tmp_path, name="NVIDIA H200"):
    rec = {"argv": ["--parts", "truth,throttle"], "date": "2026-11-25", "commit": "old1", "gpu": {"name": name,
           "driver_release": "580"}, "truth": _truth_part([]), "throttle": {"error": "heater failed"},
           "calibrate": {"error": "the old calibrate"}}
    p = tmp_path / "old" / f"{B.slug(name)}-truth.json"
    p.parent.mkdir()
    p.write_text(__import__("json").dumps(rec))
    return p


def test_merge_keeps_the_parts_not_run_with_the_call_that_made_them(tmp_path, monkeypatch):
    import json

    floor = {"false_rate": 0.0, "judgements": 200, "detect_rate": 1.0, "planted": 0.021, "min_effect": 0.01,
             "false_by_threshold": {"0.01": 0.0}, "detect_by_threshold": {"0.01": 1.0}, "short_min_effect": None,
             "short_judgements": 200, "short_false_by_threshold": {"0.05": 0.4, "0.2": 0.02}}
    monkeypatch.setattr(B, "run_calibrate", lambda *a: {
        "wanted": 100, "pairs": 100, "runs": 103, "seconds": 80.0, "budget_s": 300.0, "n": "4k", "medians_ms": {},
        "sizing": [{"delay_cycles": 5000, "planted": 0.017}, {"delay_cycles": 6200, "planted": 0.0205}],
        "delay_cycles": 6200, "floor": floor, "verdict": B.calibrate_verdict(floor), "gpu": "NVIDIA H200"})
    old = _earlier(tmp_path)
    assert B.main(["--out", str(tmp_path / "new"), "--parts", "calibrate", "--merge", str(old.parent)]) == 0
    rec = json.loads((tmp_path / "new" / "nvidia-h200-truth.json").read_text())
    assert rec["calibrate"]["floor"]["min_effect"] == 0.01 and rec["calibrate"]["made"]["argv"][:2] == ["--out", str(tmp_path / "new")]
    assert rec["truth"]["made"]["commit"] == "old1" and rec["throttle"] == {"error": "heater failed", "made": rec["truth"]["made"]}
    assert rec["gpu"]["driver_release"] == "580"
    md = (tmp_path / "new" / "nvidia-h200-truth.md").read_text()
    assert md.count("Made by an earlier call: `python3 scripts/bench_truth.py --parts truth,throttle` on 2026-11-25 "
                    "(cudalab old1)") == 2
    assert "the delay's checks (cycles: slowdown planted): 5000: 1.70%, 6200: 2.05%; the pairs' delay 6200" in md
    assert ("rows under 20 µs (the same rows on a 64x64 copy, 200 A/A judgements): **no threshold** up to 20% keeps "
            "their false verdicts to 1%: compare leaves such rows unsure on this GPU; false verdicts by threshold: "
            "0.05: 40.0%, 0.2: 2.0%") in md
    assert "comes from that run, except the parts that name an earlier call (kept by `--merge`)." in md
    # the part run now is the new one, not the earlier's error
    assert "the old calibrate" not in md
    # another GPU's record, a folder of none, or a file that is not a record: refused, nothing written
    other = _earlier(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path, "NVIDIA H100")
    assert B.main(["--out", str(tmp_path / "o2"), "--parts", "calibrate", "--merge", str(other)]) == 2
    assert B.main(["--out", str(tmp_path / "o3"), "--parts", "calibrate", "--merge", str(tmp_path)]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert B.main(["--out", str(tmp_path / "o4"), "--parts", "calibrate", "--merge", str(bad)]) == 2
    assert not (tmp_path / "o3").exists() and not (tmp_path / "o4").exists()


def test_the_truth_part_runs_each_job_with_and_without_cupti(fake_workers, invoke, monkeypatch):
    """run_truth end to end on fake workers (cupti 'loads' in them unless CUDALAB_NO_CUPTI is set): the second pass
    is the fallback's figure beside the first pass's CUPTI span, row by row."""
    import subprocess

    monkeypatch.setenv("FAKE_CUPTI_LOADS", "1")
    monkeypatch.delenv("CUDALAB_NO_CUPTI", raising=False)
    fake_workers({"_ms": "{'events': 0.005, 'batch': 0.0037, 'graph': 0.00305, 'cupti': 0.003, 'auto': 0.00304}[launch]"})
    calls = []

    def run(argv, env, **kw):
        calls.append((argv[3:], env.get("CUDALAB_NO_CUPTI")))
        with monkeypatch.context() as m:
            if env.get("CUDALAB_NO_CUPTI"):
                m.setenv("CUDALAB_NO_CUPTI", "1")
            res = invoke(*argv[3:])
        return subprocess.CompletedProcess(argv, res.exit_code, res.output, "")

    monkeypatch.setattr(B.subprocess, "run", run)
    got = B.run_truth(["transpose-256"], 0.01, 3, 60.0)
    assert [c[1] for c in calls] == [None, "1"]
    assert "--methods" in calls[0][0] and calls[0][0][calls[0][0].index("--methods") + 1] == B.FIRST_METHODS
    assert calls[1][0][calls[1][0].index("--methods") + 1] == "auto" and "--no-ncu" in calls[1][0]
    lines = got["lines"]
    assert len(lines) == 6 and got["summary"]["short"] == 6
    for ln in lines:
        assert ln["method"] == "cupti" and ln["nocupti"]["method"] == "graph"
        assert ln["nocupti"]["ms"] == pytest.approx(0.00304 * 1.001) and ln["nocupti"]["pass"] is True
        assert ln["cupti_ms"] == pytest.approx(0.003 * 1.001)
        assert ln["batch"]["pass"] is False
    assert got["summary"]["all_pass"] is False    # 3 rows a temperature: fewer than MIN_ROWS
    md = B.markdown({"argv": ["--parts", "truth"], "gpu": got["gpu"], "truth": got})
    assert "| transpose-256 | 256x256 | naive | cold | 3.003 | cupti | 3.043 (+1.3%) pass | 3.043 (+1.3%) graph pass |" in md
