"""scripts/bench_agree.py: two sets of benchmark records judged row by row against issue 42's bar (median ratio
within 1%, every GPU row within 5%), host rows left out, rounds of one side pooled."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def A(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    return importlib.import_module("bench_agree")


def record(times: dict[str, float], host_ms: float = 5.0, failed: str = "") -> dict:
    rows = [{"variant": v, "kind": "kernel", "status": "failed" if v == failed else "passed",
             "stats": {"median": ms}} for v, ms in times.items()]
    rows.append({"variant": "cpu", "kind": "host", "status": "passed", "stats": {"median": host_ms}})
    return {"runs": {"reduce 2^24": {"rows": rows}}}


def write(tmp_path: Path, name: str, rec: dict) -> str:
    d = tmp_path / name
    d.mkdir()
    (d / "nvidia-h200.json").write_text(json.dumps(rec))
    return str(d)


def test_rows_within_noise_pass_and_host_rows_do_not_count(A, tmp_path, capsys):
    old = write(tmp_path, "old", record({"a": 1.0, "b": 2.0, "c": 3.0}, host_ms=5.0))
    new = write(tmp_path, "new", record({"a": 1.01, "b": 1.98, "c": 3.0}, host_ms=9.0))   # NumPy twice as slow
    assert A.main([old, "--vs", new, "--out", str(tmp_path / "o")]) == 0
    res = json.loads((tmp_path / "o" / "agree.json").read_text())["agree"]
    assert res["judged"] == 3 and res["median_ratio"] == pytest.approx(1.0) and res["met"]
    assert "| reduce 2^24 | a | 1.0000 | 1.0100 | 1.0100 |" in (tmp_path / "o" / "agree.md").read_text()


def test_one_row_six_percent_slower_fails_the_bar(A, tmp_path, capsys):
    old = write(tmp_path, "old", record({"a": 1.0, "b": 2.0, "c": 3.0}))
    new = write(tmp_path, "new", record({"a": 1.0, "b": 2.12, "c": 3.0}))
    assert A.main([old, "--vs", new]) == 1
    assert "worst 1.0600 (reduce 2^24 / b), 1 outside ±5%: NOT within the bar" in capsys.readouterr().out


def test_the_median_ratio_over_one_percent_fails_though_every_row_is_within_five(A):
    a = A.agree({("j", v): 1.0 for v in "abc"}, {("j", v): 1.02 for v in "abc"})
    assert not a["met"] and a["outside_row_bar"] == 0


def test_rounds_of_a_side_are_pooled_and_compared_among_themselves(A, tmp_path, capsys):
    olds = [write(tmp_path, f"old{i}", record({"a": t})) for i, t in enumerate((1.0, 1.01, 1.2))]
    new = write(tmp_path, "new", record({"a": 1.01}))
    assert A.main([*olds, "--vs", new]) == 0   # the median of the rounds, 1.01, not the 1.2 outlier
    out = capsys.readouterr().out
    assert "old round 1 vs old round 2: 1 rows, median new/old 1.0100" in out


def test_a_failed_row_is_not_judged_and_no_record_is_exit_2(A, tmp_path, capsys):
    old = write(tmp_path, "old", record({"a": 1.0, "b": 2.0}))
    new = write(tmp_path, "new", record({"a": 1.0, "b": 9.0}, failed="b"))
    assert A.main([old, "--vs", new]) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert A.main([old, "--vs", str(empty)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_time_to_table_is_judged_when_both_sides_timed_it(A, tmp_path, capsys):
    def wall(s: float, rc: int = 0) -> dict:
        return {"time_to_table": [{"command": "cudalab reduce --all", "wall_s": s, "rc": rc},
                                  {"command": "cudalab list", "wall_s": 0.15, "rc": 0}]}
    old = write(tmp_path, "old", wall(1.30))
    assert A.main([old, "--vs", write(tmp_path, "same", wall(1.32))]) == 0
    assert A.main([old, "--vs", write(tmp_path, "slow", wall(1.49))]) == 1
    out = capsys.readouterr().out
    assert "time to table, old vs new: 2 rows, median new/old 1.0731, worst 1.1462 (time to table / cudalab reduce --all)" in out
    assert A.main([old, "--vs", write(tmp_path, "failed", wall(9.0, rc=1))]) == 0   # a command that failed: not judged


def test_a_row_timed_by_different_methods_is_listed_not_judged(A, tmp_path, capsys):
    def rec(ms: float, how: str) -> dict:
        r = record({"modern": ms, "b": 2.0, "c": 3.0})
        for i in (0, 2):
            r["runs"]["reduce 2^24"]["rows"][i]["extra"] = {"timed_by": how}
        return r
    old = write(tmp_path, "old", rec(0.0185, "batch"))
    new = write(tmp_path, "new", rec(0.0207, "events"))
    assert A.main([old, "--vs", new, "--out", str(tmp_path / "o")]) == 0
    assert "1 rows, median new/old 1.0000" in capsys.readouterr().out   # b; modern and c listed apart
    assert "- reduce 2^24 / modern: 0.0185 -> 0.0207 ms (1.1189)" in (tmp_path / "o" / "agree.md").read_text()
    same = write(tmp_path, "same", rec(0.0207, "batch"))
    assert A.main([old, "--vs", same]) == 1   # the same method: a 12% change is judged


def test_a_gzipped_record_reads_as_its_json(A, tmp_path):
    import gzip

    rec = record({"a": 1.0, "b": 2.0})
    (tmp_path / "old-1.json.gz").write_bytes(gzip.compress(json.dumps(rec).encode()))
    d = tmp_path / "round"
    d.mkdir()
    (d / "nvidia-h200.json.gz").write_bytes(gzip.compress(json.dumps(rec).encode()))
    assert A.load(str(tmp_path / "old-1.json.gz")) == rec and A.load(str(d)) == rec
    assert A.main([str(tmp_path / "old-1.json.gz"), "--vs", str(d)]) == 0


def test_the_record_names_each_side_and_where_each_record_came_from(A, tmp_path, capsys):
    def wall(s: float, code: str | None) -> dict:
        call = {"pci_bus_id": "0000:00:08.0", "started": "2026-11-28T13:50:01+00:00", **({"code": code} if code else {})}
        return {"date": "2026-11-28", "device": {"name": "NVIDIA H200"}, "calls": [call],
                "time_to_table": [{"command": "cudalab list", "wall_s": s, "rc": 0}]}
    olds = [write(tmp_path, f"old{i}", wall(0.10 + i / 100, None)) for i in (1, 2)]
    news = [write(tmp_path, f"new{i}", wall(0.10 + i / 100, "abc123")) for i in (1, 2)]
    assert A.main([*olds, "--vs", *news, "--out", str(tmp_path / "o"), "--names", "7011db9", "abc123"]) == 0
    out = capsys.readouterr().out
    # a side's own rounds: time to table against each other (wall records have no GPU rows to compare)
    assert "old round 1 vs old round 2, time to table: 1 rows, median new/old 1.0909" in out and "no row" not in out
    md = (tmp_path / "o" / "agree.md").read_text()
    assert "old: 7011db9; new: abc123." in md
    assert f"| old | {olds[0]} | 2026-11-28 | 2026-11-28T13:50:01+00:00 | NVIDIA H200 | 0000:00:08.0 | – |" in md
    assert f"| new | {news[1]} | 2026-11-28 | 2026-11-28T13:50:01+00:00 | NVIDIA H200 | 0000:00:08.0 | abc123 |" in md
