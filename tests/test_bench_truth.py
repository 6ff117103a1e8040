"""scripts/bench_truth.py's pure parts (issue 46's record): the verdict per row from a ``cudalab truth`` document,
the pass counts, calibrate's bar, the pairs that fit, the throttle rows and the markdown."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from cudalab.studies.truth import Figure, Row, Truth

_spec = importlib.util.spec_from_file_location("bench_truth", Path(__file__).parents[1] / "scripts" / "bench_truth.py")
B = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(B)


def doc(table_ms: float, ncu_ms: float, graph_ms: float = 0.0030, auto: str = "batch", cupti_by: str = "cupti") -> dict:
    figs = []
    for temp in ("cold", "hot"):
        figs += [(temp, "events", Figure(0.0060, 0.0001, 20, "events")),
                 (temp, "batch", Figure(table_ms, 0.00001, 20, "batch", 64)),
                 (temp, "graph", Figure(graph_ms, 0.00001, 20, "graph", 64)),
                 (temp, "cupti", Figure(ncu_ms * 1.01, 0.00001, 20, cupti_by, 64,
                                        "" if cupti_by == "cupti" else "timed by batch: cupti-python is not installed")),
                 (temp, "ncu", Figure(ncu_ms, 0.00001, 9, "ncu"))]
    t = Truth("smem-square", (Row("1 block", "row-row", "kernel", tuple(figs)),), {"name": "NVIDIA H100 80GB HBM3"}, 10,
              auto_launch=auto)
    return t.to_dict()


def test_a_row_within_five_percent_passes_and_one_beyond_fails():
    good = B.truth_rows("j", doc(table_ms=0.0104, ncu_ms=0.0100))   # +4%
    bad = B.truth_rows("j", doc(table_ms=0.0110, ncu_ms=0.0100))    # +10%, 1 µs
    assert [ln["pass"] for ln in good] == [True, True] and [ln["pass"] for ln in bad] == [False, False]
    assert good[0]["method"] == "batch" and good[0]["diff"] == pytest.approx(0.04)
    assert good[0]["graph"]["pass"] is False and good[0]["events"]["pass"] is False   # 3.0 and 6.0 µs against 10
    s = B.truth_summary(good + bad)
    assert s["cold"] == {"n": 2, "tables_pass": 1, "events_pass": 0, "batch_pass": 1, "graph_pass": 0, "cupti_pass": 2,
                         "events_other": 0, "batch_other": 0, "graph_other": 0, "cupti_other": 0,
                         "worst": pytest.approx(0.10)}
    assert s["all_pass"] is False and B.truth_summary(good)["all_pass"] is True


def test_a_third_of_a_microsecond_passes_a_tiny_kernel_and_long_rows_are_not_counted():
    tiny = B.truth_rows("j", doc(table_ms=0.0025, ncu_ms=0.0023))   # +8.7% but 0.2 µs
    assert all(ln["pass"] for ln in tiny)
    long = B.truth_rows("j", doc(table_ms=0.050, ncu_ms=0.050))      # 50 µs: not a short kernel
    s = B.truth_summary(tiny + long)
    assert s["short"] == 2 and s["over_20us"] == 2 and s["cold"]["n"] == 1


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


def test_the_markdown_names_every_part_and_the_verdicts():
    t = B.truth_rows("smem", doc(table_ms=0.0104, ncu_ms=0.0100))
    floor = {"false_rate": 0.0, "judgements": 200, "detect_rate": 0.9, "planted": 0.02, "min_effect": 0.01,
             "false_by_threshold": {"0.01": 0.0}, "detect_by_threshold": {"0.01": 0.9}}
    rec = {"argv": ["--parts", "truth"], "date": "2026-11-26", "commit": "abc", "gpu": {"name": "NVIDIA H100"},
           "truth": {"ncu_launches": 10, "auto_launch": "batch", "lines": t, "errors": {"x": "ncu: not found"},
                     "summary": B.truth_summary(t)},
           "calibrate": {"wanted": 100, "pairs": 60, "runs": 62, "seconds": 150.0, "budget_s": 150.0, "n": "8k",
                         "medians_ms": {"vec4": [1.0, 1.01, 0.99, 1.0]}, "floor": floor, "verdict": B.calibrate_verdict(floor)},
           "throttle": {"heater": "FMA", "heat_s": 30, "warm_s": 10, "telemetry_note": "", "note": "none flagged",
                        "rows": B.throttle_rows({"points": [{"results": [
                            {"variant": "vec4", "status": "passed", "stats": {"n": 1000},
                             "extra": {"throttled": 12, "sm_mhz_min": 1400, "throttle": "power"}}]}]})}}
    md = B.markdown(rec)
    assert "| smem | 1 block | row-row | cold | batch | 10.400 | 10.000 | +4.0% | pass |" in md
    assert "100 were asked, 60 fit in 150 s" in md and "**0 of 200**" in md and "(`--n 8k`)" in md
    assert "between fresh processes, vec4's median: 1000.00 µs over 4 processes, IQR 0.50%" in md
    assert "| vec4 | passed | 1000 | 12 | 1400 |" in md and "none flagged" in md and "`x`: ncu: not found" in md
    assert B.slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3" and "Every figure below comes from that run." in md


def test_cupti_is_recorded_and_a_line_another_method_timed_is_said():
    own = B.truth_rows("smem", doc(table_ms=0.0104, ncu_ms=0.0100))
    fell = B.truth_rows("smem", doc(table_ms=0.0104, ncu_ms=0.0100, cupti_by="batch"))
    assert own[0]["cupti"]["pass"] is True and own[0]["cupti"]["diff"] == pytest.approx(0.01)
    s = B.truth_summary(own + fell)
    assert s["cold"]["cupti_pass"] == 2 and s["cold"]["cupti_other"] == 1
    md = B.markdown({"argv": [], "gpu": {"name": "GPU"}, "truth": {"ncu_launches": 10, "auto_launch": "batch",
                                                                   "lines": own + fell, "summary": s}})
    assert "| temp | rows | tables pass | events pass | batch pass | graph pass | cupti pass |" in md
    assert "| cold | 2 | 2 | 0 | 2 | 0 | 2 (1 timed by another method) |" in md
    assert "| 10.100 (+1.0%) |" in md and "| 10.100 (+1.0%) (batch) |" in md
    assert "cupti: timed by batch: cupti-python is not installed" in md


def _earlier(tmp_path, name="NVIDIA H200"):
    rec = {"argv": ["--parts", "truth,throttle"], "date": "2026-11-25", "commit": "old1", "gpu": {"name": name,
           "driver_release": "580"}, "truth": {"ncu_launches": 10, "auto_launch": "batch", "lines": [],
           "summary": B.truth_summary([])}, "throttle": {"error": "heater failed"},
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
