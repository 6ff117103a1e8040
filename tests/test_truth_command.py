"""``cudalab truth FAMILY`` (issue 46 item 2) end to end on fake GPU workers and a fake ncu: every method's figure,
cold and hot, lands in its own column; ncu's median leaves the first launch out; ncu missing says so; bad input is
one line and exit 2; the JSON keeps its schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudalab import ncu as ncu_pkg
from cudalab.bench import AUTO_LAUNCH
from cudalab.ncu.metrics import DURATION
from cudalab.plan import Plan
from cudalab.records.results import PASSED
from cudalab.studies import truth as T

from fake_tools import FakeRun, ncu_csv, planned_rows

#: Each method's time a launch (ms) in the fake worker, told apart per method, temperature and variant.
MS = ("{'events': 0.0050, 'batch': 0.0030, 'graph': 0.0032, 'cupti': 0.0034}[launch] + 0.0004 * hot "
      "+ (0.0001 if variant == 'bankopt' else 0.0)")
#: The fake worker's median of a row whose time is ``ms`` (3 samples at ms, 7 at ms * 1.001).
def row_median(ms: float) -> float:
    return ms * 1.001


def ncu_ns(index: int, variant_no: int, hot: bool) -> float:
    """ncu's duration of launch ``index`` of a variant: the first is far off (left out of the median)."""
    return 99_000.0 if index == 0 else 2_000.0 + 100 * variant_no + 50 * hot + (index % 3)


class NcuRun(FakeRun):
    """A fake ncu: the child's rows hold ``profile_launches`` launches each, ncu's CSV those launches' durations."""

    def __init__(self):
        super().__init__(rows=self.rows_of)
        self.caches: list[str] = []

    @staticmethod
    def rows_of(req):
        rows = planned_rows(req)
        return [r.__class__(**{**r.__dict__, "extra": {"launches": r.extra["launches"] * req.profile_launches}})
                if r.status == PASSED else r for r in rows]

    def __call__(self, argv, **kw):
        if "--import" not in argv:
            req = Plan.from_dict(json.loads(Path(argv[-2]).read_text())).request
            hot = argv[argv.index("--cache-control") + 1] == "none"
            self.caches.append(argv[argv.index("--cache-control") + 1])
            launches = []
            for no, r in enumerate(self.rows_of(req)):
                for i, (k, g, b) in enumerate(r.extra.get("launches", ())):
                    launches.append((k, g, b, {DURATION: ("ns", f"{ncu_ns(i, no, hot):.0f}")}))
            self.csv = ncu_csv(launches)
        return super().__call__(argv, **kw)


@pytest.fixture
def fake_ncu(monkeypatch):
    run = NcuRun()
    monkeypatch.setattr(ncu_pkg, "find_ncu", lambda: "ncu")
    real = T.ncu_profiler
    monkeypatch.setattr(T, "ncu_profiler", lambda timeout: real(timeout, run=run))
    return run


ARGS = ["truth", "transpose", "--n", "256", "--variant", "naive,block,bankopt", "--budget", "0.01", "-q"]


def test_every_method_lands_in_its_own_column_cold_and_hot(fake_workers, fake_ncu, invoke, tmp_path):
    fake_workers({"_ms": MS})
    out = tmp_path / "truth.json"
    res = invoke(*ARGS, "--json", out, "--ncu-launches", "5")
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["schema"] == T.SCHEMA and doc["auto_launch"] == AUTO_LAUNCH
    assert doc["methods"] == ["events", "batch", "graph", "cupti", "ncu"] and doc["temps"] == ["cold", "hot"]
    assert doc["ncu"]["ran"] is True and doc["ncu"]["launches"] == 5
    assert sorted(fake_ncu.caches) == ["all", "none"]  # one ncu run cold (ncu's flush), one hot
    rows = {r["variant"]: r for r in doc["rows"]}
    assert list(rows) == ["naive", "block", "bankopt"]
    for no, (name, r) in enumerate(rows.items()):
        extra = 0.0001 if name == "bankopt" else 0.0
        for temp, hot in (("cold", 0), ("hot", 1)):
            per = r[temp]
            for method, ms in (("events", 0.0050), ("batch", 0.0030), ("graph", 0.0032), ("cupti", 0.0034)):
                assert per[method]["median_ms"] == pytest.approx(row_median(ms + 0.0004 * hot + extra)), (name, temp, method)
                assert per[method]["timed_by"] == method
                assert per[method]["vs_ncu"] == pytest.approx(per[method]["median_ms"] / per["ncu"]["median_ms"] - 1)
            # ncu: launches 2..5 of the variant (the first, 99 µs, left out), its own durations
            want = sorted(ncu_ns(i, no, bool(hot)) for i in range(1, 5))
            assert per["ncu"]["median_ms"] == pytest.approx((want[1] + want[2]) / 2 / 1e6)
            assert per["ncu"]["n"] == 4
            auto = per["auto"]
            assert auto["launch"] == AUTO_LAUNCH and auto["method"] == AUTO_LAUNCH
            assert auto["median_ms"] == per[AUTO_LAUNCH]["median_ms"]
            assert auto["vs_ncu"] == pytest.approx(auto["median_ms"] / per["ncu"]["median_ms"] - 1)
            assert auto["agrees"] is T.agrees(auto["median_ms"], per["ncu"]["median_ms"])
    # the table: both temperatures, every method's column, the tables' method and its distance
    assert "cold" in res.output and "hot" in res.output
    for header in ("events µs", "batch µs", "graph µs", "cupti µs", "ncu µs", "tables use", "vs ncu", "cupti vs ncu"):
        assert header in res.output
    assert f"{AUTO_LAUNCH} ×64" in res.output
    block = next(ln for ln in res.output.splitlines() if ln.strip().startswith("block "))
    # batch, events, graph, cupti (cold) in µs
    assert "3.003" in block and "5.005" in block and "3.203" in block and "3.403" in block
    cupti_vs = (row_median(0.0034) - rows["block"]["cold"]["ncu"]["median_ms"]) / rows["block"]["cold"]["ncu"]["median_ms"]
    assert f"{cupti_vs:+.1%}" in block


def test_the_tables_method_is_events_for_a_long_kernel(fake_workers, invoke, tmp_path):
    fake_workers({"_ms": "0.5"})   # 500 µs: no method batches it
    out = tmp_path / "t.json"
    res = invoke(*ARGS, "--json", out, "--no-ncu")
    assert res.exit_code == 0, res.output
    r = json.loads(out.read_text())["rows"][0]
    assert r["cold"]["auto"]["method"] == "events" and r["cold"]["batch"]["timed_by"] == "events"
    assert "(events)" in res.output


def test_ncu_missing_the_ncu_column_says_so(fake_workers, invoke, tmp_path, monkeypatch):
    from cudalab.errors import ToolMissingError

    def missing():
        raise ToolMissingError("ncu (Nsight Compute) not found on PATH; install it")

    monkeypatch.setattr(ncu_pkg, "find_ncu", missing)
    fake_workers({"_ms": MS})
    out = tmp_path / "t.json"
    res = invoke(*ARGS, "--json", out)
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["ncu"]["ran"] is False and "not found" in doc["ncu"]["note"]
    for r in doc["rows"]:
        for temp in T.TEMPS:
            assert r[temp]["ncu"]["median_ms"] is None and r[temp]["auto"]["vs_ncu"] is None
            assert r[temp]["events"]["median_ms"] is not None
    assert "no ncu" in res.output and "ncu: not found" in res.output


@pytest.mark.parametrize("args, fragment", [
    (["--n", "0"], "--n"),
    (["--variant", "nope"], "nope"),
    (["--block", "0x8"], "block"),
    (["-D", "NOTAMACRO"], "NOTAMACRO"),
])
def test_bad_input_is_one_line_and_exit_2(args, fragment, invoke, one_line_exit_2, no_gpu, fake_workers):
    fake_workers({"_open": "error"})  # a worker started anyway would fail the run with another message
    res = invoke("truth", "transpose", *args)
    one_line_exit_2(res, fragment)


def test_an_unwritable_json_path_is_refused_before_any_run(invoke, one_line_exit_2, fake_workers, tmp_path):
    fake_workers({"_open": "error"})
    res = invoke(*ARGS, "--json", tmp_path / "no" / "such" / "dir" / "t.json")
    one_line_exit_2(res, "--json")


def test_a_failed_variant_fails_the_command_and_keeps_the_others(fake_workers, invoke, tmp_path):
    fake_workers({"_ms": MS, "block": "incorrect"})
    out = tmp_path / "t.json"
    res = invoke(*ARGS, "--json", out, "--no-ncu")
    assert res.exit_code == 1, res.output
    rows = {r["variant"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["block"]["status"] == "incorrect" and rows["block"]["cold"]["events"]["median_ms"] is None
    assert rows["naive"]["status"] == "passed" and rows["naive"]["cold"]["graph"]["median_ms"] is not None


def test_ncu_figure_sums_a_runs_kernels_and_refuses_what_it_cannot_group():
    f = T.ncu_figure(PASSED, "", [1e3, 2e3, 5e3, 1e3, 1e3, 1e3], 3)   # 3 runs of 2 kernels: 3, 6, 2 µs
    assert f.n == 2 and f.median_ms == pytest.approx(0.004) and "2 kernels" in f.note
    bad = T.ncu_figure(PASSED, "", [1e3] * 5, 3)
    assert bad.median_ms is None and "cannot tell" in bad.note


def test_agrees_is_five_percent_or_a_third_of_a_microsecond():
    assert T.agrees(0.00104, 0.001) is True            # +4%
    assert T.agrees(0.00106, 0.001) is True            # +6%, but 60 ns: within 0.3 µs
    assert T.agrees(0.0016, 0.001) is False            # +60% and 0.6 µs
    assert T.agrees(0.0100, 0.0098) is True            # +2%
    assert T.agrees(0.0110, 0.0100) is False           # +10% and 1 µs
    assert T.agrees(None, 0.001) is None
