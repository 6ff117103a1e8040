"""``cudalab truth FAMILY`` (issues 46, 59) end to end on fake GPU workers and a fake ncu: every method's figure,
cold and hot, lands in its own column beside CUPTI's (the reference); ncu's median leaves the first launch out and
its offset from CUPTI is the median over the rows; ncu missing says so; bad input is one line and exit 2; the JSON
keeps its schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cudalab import ncu as ncu_pkg
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
    assert doc["schema"] == T.SCHEMA and doc["reference"] == "cupti"
    assert doc["methods"] == ["events", "batch", "graph", "cupti", "ncu"] and doc["temps"] == ["cold", "hot"]
    assert doc["ncu"]["ran"] is True and doc["ncu"]["launches"] == 5
    assert sorted(fake_ncu.caches) == ["all", "none"]  # one ncu run cold (ncu's flush), one hot
    rows = {r["variant"]: r for r in doc["rows"]}
    assert list(rows) == ["naive", "block", "bankopt"]
    for no, (name, r) in enumerate(rows.items()):
        extra = 0.0001 if name == "bankopt" else 0.0
        for temp, hot in (("cold", 0), ("hot", 1)):
            per = r[temp]
            cupti = per["cupti"]["median_ms"]
            for method, ms in (("events", 0.0050), ("batch", 0.0030), ("graph", 0.0032), ("cupti", 0.0034)):
                assert per[method]["median_ms"] == pytest.approx(row_median(ms + 0.0004 * hot + extra)), (name, temp, method)
                assert per[method]["timed_by"] == method
                assert per[method]["vs_cupti"] == pytest.approx(per[method]["median_ms"] / cupti - 1)
                assert per[method]["agrees"] is T.agrees(per[method]["median_ms"], cupti)
            assert per["graph"]["agrees"] is False and per["cupti"]["agrees"] is True   # 0.2 µs off; itself
            # ncu: launches 2..5 of the variant (the first, 99 µs, left out), its own durations
            want = sorted(ncu_ns(i, no, bool(hot)) for i in range(1, 5))
            assert per["ncu"]["median_ms"] == pytest.approx((want[1] + want[2]) / 2 / 1e6)
            assert per["ncu"]["n"] == 4
            assert per["ncu"]["minus_cupti_ms"] == pytest.approx(per["ncu"]["median_ms"] - cupti)
            auto = per["auto"]   # no auto run: what auto picks, the cupti run's figure for a short kernel
            assert auto["launch"] == "auto" and auto["method"] == "cupti" and auto["ran"] is False
            assert auto["median_ms"] == per["cupti"]["median_ms"] and auto["agrees"] is True
    for temp in T.TEMPS:   # ncu's offset: the median over the three rows of ncu - cupti
        diffs = sorted(r[temp]["ncu"]["minus_cupti_ms"] for r in rows.values())
        assert doc["ncu"]["offset_ms"][temp] == pytest.approx(diffs[1]) and doc["ncu"]["offset_rows"][temp] == 3
    # the table: both temperatures, every method's column beside cupti's, the tables' method and its distance
    assert "cold" in res.output and "hot" in res.output
    for header in ("cupti µs (reference)", "events µs vs cupti", "batch µs vs cupti", "graph µs vs cupti",
                   "ncu µs, −cupti", "tables use", "tables vs cupti"):
        assert header in res.output
    assert "cupti ×64" in res.output
    offset = doc["ncu"]["offset_ms"]["cold"] * 1e3
    assert f"ncu offset (cold) on this GPU: {offset:+.3f} µs" in res.output
    block = next(ln for ln in res.output.splitlines() if ln.strip().startswith("block "))
    # cupti, batch, events, graph (cold) in µs
    assert "3.003" in block and "5.005" in block and "3.203" in block and "3.403" in block
    batch_vs = row_median(0.0030) / row_median(0.0034) - 1
    assert f"{batch_vs:+.1%}" in block


def test_auto_alone_without_cupti_is_the_graph_and_has_no_reference(fake_workers, invoke, tmp_path, monkeypatch):
    """The benchmark's second pass: ``--methods auto`` with CUDALAB_NO_CUPTI set: the tables' figure is the graph's."""
    monkeypatch.setenv("FAKE_CUPTI_LOADS", "1")
    monkeypatch.setenv("CUDALAB_NO_CUPTI", "1")
    fake_workers({"_ms": MS.replace("[launch]", "[launch if launch != 'auto' else 'graph']")})
    out = tmp_path / "t.json"
    res = invoke(*ARGS, "--json", out, "--no-ncu", "--methods", "auto")
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["methods"] == ["auto", "ncu"]
    r = doc["rows"][0]["cold"]
    assert r["auto"]["ran"] is True and r["auto"]["method"] == "graph" and r["auto"]["vs_cupti"] is None
    assert set(r) == {"auto", "ncu"}
    monkeypatch.delenv("CUDALAB_NO_CUPTI")
    res = invoke(*ARGS, "--json", out, "--no-ncu", "--methods", "auto")
    assert json.loads(out.read_text())["rows"][0]["cold"]["auto"]["method"] == "cupti"


def test_an_unknown_method_is_one_line(invoke, one_line_exit_2, fake_workers):
    fake_workers({"_open": "error"})
    one_line_exit_2(invoke(*ARGS, "--methods", "events,ncu"), "--methods")


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
            assert r[temp]["ncu"]["median_ms"] is None and r[temp]["ncu"]["minus_cupti_ms"] is None
            assert r[temp]["events"]["median_ms"] is not None
    assert "no ncu" in res.output and "ncu: not found" in res.output and "ncu offset" not in res.output
    assert doc["ncu"]["offset_ms"] == {"cold": None, "hot": None}


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


def test_agrees_is_five_percent_or_a_tenth_of_a_microsecond():
    assert T.agrees(0.00104, 0.001) is True            # +4%
    assert T.agrees(0.00109, 0.001) is True            # +9%, but 90 ns: within 0.1 µs
    assert T.agrees(0.00112, 0.001) is False           # +12% and 0.12 µs
    assert T.agrees(0.0100, 0.0098) is True            # +2%
    assert T.agrees(0.0106, 0.0100) is False           # +6% and 0.6 µs
    assert T.agrees(0.0094, 0.0100) is False           # -6%: either side
    assert T.agrees(None, 0.001) is None and T.agrees(0.001, None) is None


def test_ncu_offset_is_the_median_of_ncu_less_cupti():
    assert T.ncu_offset([0.0010, 0.0009, None, 0.0030]) == pytest.approx(0.0010)   # one row strays: the median
    assert T.ncu_offset([0.0008, 0.0012]) == pytest.approx(0.0010)
    assert T.ncu_offset([None]) is None and T.ncu_offset([]) is None


def test_the_reference_is_cuptis_own_figure_and_the_tables_pick_as_auto():
    F = T.Figure
    short = T.Row("p", "v", "kernel", (("cold", "events", F(0.005, 0, 9, "events")),
                                       ("cold", "graph", F(0.0031, 0, 9, "graph", 40)),
                                       ("cold", "cupti", F(0.0030, 0, 9, "cupti", 40)),
                                       ("cold", "ncu", F(0.0040, 0, 9, "ncu"))))
    assert short.table("cold").timed_by == "cupti" and short.vs_ref("cold", "graph") == pytest.approx(1 / 30)
    assert short.ncu_minus_ref("cold") == pytest.approx(0.001)
    stood_in = T.Row("p", "v", "kernel", (("cold", "events", F(0.005, 0, 9, "events")),
                                          ("cold", "cupti", F(0.0031, 0, 9, "graph", 40, "timed by graph: no cupti"))))
    assert stood_in.table("cold").timed_by == "graph"          # what auto shows without cupti-python
    assert stood_in.reference("cold") is None and stood_in.vs_ref("cold") is None   # but it is no reference
    long = T.Row("p", "v", "kernel", (("cold", "events", F(0.05, 0, 9, "events")),
                                      ("cold", "cupti", F(0.048, 0, 9, "cupti", 1))))
    assert long.table("cold").timed_by == "events"             # 20 µs or more: one launch per event pair
    ran = T.Row("p", "v", "kernel", long.figures + (("cold", "auto", F(0.049, 0, 9, "events")),))
    assert ran.table("cold").median_ms == 0.049                # an auto run's own figure wins
