"""tune's final table: the raced rows first (the winner on top, then by the race's medians), the others after by
their one trial's median, and the title says so. The two are different measurements: a raced row's race median
may be above an unraced row's trial median (on an H200, a raced 2.8112 ms row sat above an unraced 2.8103)."""

from __future__ import annotations

from types import SimpleNamespace

from cudalab.cli import tune as T
from cudalab.records import compare
from cudalab.tuning.campaign import Measured
from cudalab.tuning.race import RaceResult


def _m(n: int, ms: float) -> Measured:
    return Measured(n, {"B": str(n)}, (ms,), "passed", "", {"median_ms": ms})


def test_raced_rows_come_first_winner_on_top_then_the_rest(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    trials = [_m(1, 1.00), _m(2, 1.01), _m(3, 1.02), _m(4, 1.03)]
    same = compare.Verdict(compare.SAME, 1.001, 0.5, 0.99, 1.01)
    # the race named B=2 (B=1, tied with it, read a hair lower: the winner still goes on top); B=3 was not
    # raced and its trial read 1.02
    race = RaceResult(winner="B=2", verdicts={"B=1": same}, samples={"B=1": [1.039] * 10, "B=2": [1.04] * 10},
                      rounds=2)
    res = SimpleNamespace(
        race=race, objectives=("time",), feasible=trials[:3], pareto=(), trials=trials, family="copy", variant="vec4",
        default_key="B=1", pct_header="% roof", reference=None, incomplete=False, gpu_busy_pct=None,
        time_account={}, winner="B=2", command="", speedup=lambda key: None, pct=lambda m: None)
    T._show(res)
    out = capsys.readouterr().out
    assert "best configurations (the raced first, by the race's medians; the rest by their trial's)" in out
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("B=")]
    assert [ln.split()[0] for ln in lines] == ["B=2", "B=1", "B=3"]
    assert "1.0400" in lines[0] and "1.0390" in lines[1] and "1.0200" in lines[2]
