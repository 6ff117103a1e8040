"""The tune table's % column (issue 43, item 7): for a FLOP-rate or item-rate family it is % of the library row,
which a campaign measures once itself (a trial runs the tuned variant alone, so there was none and an H200's
``cudalab tune matmul --variant warptile`` printed "–" on every row); a bandwidth family's is % of the roofline
each trial measured, as before. Driven end to end by fake GPU workers (tests/fake_worker_main.py: a row's time
is ``_ms``, its GFLOP/s and items/s follow from it as a real worker's do).
"""

from __future__ import annotations

import json
import re

import pytest

import cudalab
from cudalab.errors import GpuUnavailableError, UsageError

optuna = pytest.importorskip("optuna")

from test_tune import fake  # noqa: F401,E402  (the fake-worker fixture tune's tests use)

#: The library row takes 0.5 ms, a warptile configuration 1 ms at WT_BK=16 and 1.08 ms at WT_BK=8.
MATMUL_MS = "0.5 if variant == 'cublas' else 1 + abs(WT_BK - 16) / 100"
TUNE = ["--trials", "4", "--seed", "1", "--build-ahead", "0", "--race", "2"]


@pytest.fixture
def rows_run(tmp_path, monkeypatch):
    """The variants the fake workers ran, one a line, in order (``FAKE_WORKER_ROWS``)."""
    path = tmp_path / "rows.log"
    monkeypatch.setenv("FAKE_WORKER_ROWS", str(path))
    return lambda: path.read_text().split() if path.exists() else []


def table(stdout: str) -> tuple[list[str], dict[str, str]]:
    """The final table's header cells and each configuration's % cell (the fifth column)."""
    lines = stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("configuration"))
    cols = re.split(r"\s{2,}", lines[head].strip())
    pct = {}
    for ln in lines[head + 2:]:
        cells = re.split(r"\s{2,}", ln.strip())
        if len(cells) < 5 or "=" not in cells[0]:
            break
        pct[cells[0].removesuffix(" (default)")] = cells[4]
    return cols, pct


def expected_pct(key: str, lib_ms: float = 0.5) -> str:
    bk = int(re.search(r"WT_BK=(\d+)", key).group(1))
    return f"{100 * lib_ms / (1 + abs(bk - 16) / 100):.1f}%"


def test_a_flops_campaign_shows_percent_of_its_library_row_measured_once(fake, rows_run, tmp_path, invoke, monkeypatch):
    fake({"_ms": MATMUL_MS})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "220")  # one line a row
    res = invoke("tune", "matmul", "--variant", "warptile", *TUNE, "--json", "t.json")
    assert res.exit_code == 0, res.output
    cols, pct = table(res.stdout)
    assert cols[4] == "% of cublas" and "% roof" not in cols
    assert pct and all(v == expected_pct(k) for k, v in pct.items()), pct
    assert {"50.0%", "46.3%"} <= set(pct.values())  # WT_BK=16 and WT_BK=8 both shown: 0.5 / 1 and 0.5 / 1.08
    assert rows_run().count("cublas") == 1  # one extra run request for the whole campaign, the race's included
    assert "no cublas row" not in res.stdout
    saved = json.loads((tmp_path / "t.json").read_text())
    ref = saved["tune"]["reference"]
    assert ref["variant"] == "cublas" and ref["unit"] == "GFLOP/s" and ref["reason"] == ""
    assert ref["rate"] == pytest.approx(2 * 4096**3 / 0.5e-3 / 1e9, rel=1e-2)
    # the record: the raced points' rows are % of the library row, which is a row of its own point (no -D)
    from cudalab.records.results import load_record

    rec = load_record(tmp_path / "t.json")
    *raced, lib = rec.points
    assert [r.variant for r in lib.results] == ["cublas"] and lib.defines == () and lib.block == ""
    assert raced and all(p.results[0].variant == "warptile" and p.results[0].pct_roofline for p in raced)
    assert {round(p.results[0].pct_roofline, 1) for p in raced} <= {50.0, 46.3}
    assert invoke("report", "t.json").exit_code == 0 and invoke("compare", "t.json", "t.json").exit_code == 0


def test_the_python_result_and_its_frame_carry_the_percentage(fake, rows_run, tmp_path):
    fake({"_ms": MATMUL_MS})
    res = cudalab.tune("matmul", "warptile", trials=4, seed=1, build_ahead=0, race=0,
                       storage=f"sqlite:///{tmp_path / 'm.db'}")
    assert res.pct_header == "% of cublas" and res.reference.rate and res.reference.unit == "GFLOP/s"
    df = res.to_pandas()
    ok = df[df.status == "passed"]
    assert len(ok) == 4 and ok.pct.notna().all()
    assert list(ok.pct.round(1)) == [round(50 / (1 + abs(int(b) - 16) / 100), 1) for b in ok.WT_BK]
    assert rows_run().count("cublas") == 1  # measured without a race too (race=0)


def test_an_item_rate_family_is_over_its_library_row_too(fake, rows_run, tmp_path):
    fake({"_ms": "0.5 if variant == 'cupy' else 1 + ITEMS / 100"})
    res = cudalab.tune("sort", "onesweep", trials=3, seed=1, build_ahead=0, race=0,
                       storage=f"sqlite:///{tmp_path / 's.db'}")
    assert res.pct_header == "% of cupy" and res.reference.unit == "G items/s"
    for m in res.feasible:
        assert res.pct(m) == pytest.approx(50 / (1 + int(m.point["ITEMS"]) / 100), rel=1e-3)
    assert rows_run().count("cupy") == 1


@pytest.mark.parametrize("how", ["die", "incorrect", "skip", "refused", "raises"])
def test_a_library_row_that_fails_leaves_dashes_and_the_campaign_finishes(how, fake, rows_run, tmp_path, invoke,
                                                                          monkeypatch):
    fake({"_ms": MATMUL_MS, **({"cublas": how} if how in ("die", "incorrect", "skip") else {})})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "220")
    from cudalab.tuning import runs as RS

    if how == "refused":  # refused on the CPU (as a size or the host's memory would be): no GPU work
        real_precheck = RS.precheck

        def precheck(req):
            if req.variants == "cublas":
                raise UsageError("cublas: too large for this host (fake)")
            return real_precheck(req)

        monkeypatch.setattr(RS, "precheck", precheck)
    if how == "raises":  # a worker that cannot start again: the column's loss, not the campaign's
        real_run = RS.Runs.run

        def run(self, points):
            if any(getattr(p, "variants", None) == "cublas" for p in points):
                raise GpuUnavailableError("no worker could open GPU 0 (fake)")
            return real_run(self, points)

        monkeypatch.setattr(RS.Runs, "run", run)
    res = invoke("tune", "matmul", "--variant", "warptile", *TUNE, "--json", "t.json")
    assert res.exit_code == 0, res.output
    cols, pct = table(res.stdout)
    assert cols[4] == "% of cublas" and pct and set(pct.values()) == {"–"}, pct
    assert re.search(r"% of cublas: no cublas row to divide by \(.+\)", res.stdout), res.stdout
    assert "winner after" in res.stdout and "rerun: cudalab matmul" in res.stdout  # the race and its verdict ran
    saved = json.loads((tmp_path / "t.json").read_text())["tune"]["reference"]
    assert saved["rate"] is None and saved["reason"]
    assert rows_run().count("cublas") == (0 if how in ("refused", "raises") else 1)


def test_a_bandwidth_family_keeps_its_roofline_percent_and_runs_no_library_row(fake, rows_run, tmp_path, invoke,
                                                                               monkeypatch):
    fake({"_ms": "1 + abs(UNROLL - 4) / 10"})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "220")
    res = invoke("tune", "reduce", "--variant", "modern", "--n", "1M", "--block", "256", "-D", "UNROLL=1..8",
                 "--no-table", *TUNE, "--json", "t.json")
    assert res.exit_code == 0, res.output
    cols, pct = table(res.stdout)
    assert cols[4] == "% roof"
    assert pct and set(pct.values()) == {"50.0%"}  # the fake's 100 GB/s of its 200 GB/s roofline
    assert "cub" not in rows_run()  # reduce has a library row (CuPy's sum): a bandwidth family does not run it
    assert json.loads((tmp_path / "t.json").read_text())["tune"]["reference"] is None
    from cudalab.records.results import load_record

    rec = load_record(tmp_path / "t.json")
    assert rec.points and all([r.variant for r in p.results] == ["modern"] for p in rec.points)


def test_the_library_row_runs_first_where_the_gpu_would_wait_for_the_first_builds(fake, rows_run, tmp_path,
                                                                                   monkeypatch):
    # a cold campaign: nvcc is still at the first trials' kernels when the worker is open (the H200's first matmul
    # warptile build took about a second longer than its worker's open); the row the campaign needs anyway runs then
    import threading

    from cudalab import build
    from cudalab.execute.local.engine import LocalPool
    from cudalab.instruments import driverquery

    fake({"_ms": MATMUL_MS})
    sent_library = threading.Event()
    sends = []
    send = LocalPool.send

    def spy_send(self, plans):
        sends.append([p.request.variants for p in plans])
        if any(p.request.variants == "cublas" for p in plans):
            sent_library.set()
        return send(self, plans)

    def slow_build(source, defines, arch):  # every build waits until the library row was sent (at most 10 s)
        sent_library.wait(10)

    monkeypatch.setattr(build, "build", slow_build)
    monkeypatch.setattr(driverquery, "arch_here", lambda: "sm_90")
    monkeypatch.setattr(LocalPool, "send", spy_send)
    res = cudalab.tune("matmul", "warptile", trials=4, seed=1, build_ahead=2, race=0,
                       storage=f"sqlite:///{tmp_path / 'm.db'}")
    assert sends[0] == ["cublas"] and sum(s == ["cublas"] for s in sends) == 1, sends
    assert rows_run()[0] == "cublas" and rows_run().count("cublas") == 1
    assert res.reference.rate == pytest.approx(2 * 4096**3 / 0.5e-3 / 1e9, rel=1e-2) and not res.reference.reason
    assert len([m for m in res.trials if m.status == "passed"]) == 4
    ok = [m for m in res.trials if m.status == "passed"]
    assert [round(res.pct(m), 1) for m in ok] == [round(50 / (1 + abs(int(m.point["WT_BK"]) - 16) / 100), 1)
                                                  for m in ok]


def test_the_library_row_waits_for_the_end_where_a_trial_is_built(fake, rows_run, tmp_path, monkeypatch):
    from cudalab import build
    from cudalab.instruments import driverquery
    from cudalab.tuning import runs as RS

    fake({"_ms": MATMUL_MS})
    monkeypatch.setattr(build, "build", lambda *a, **k: None)
    monkeypatch.setattr(driverquery, "arch_here", lambda: "sm_90")
    monkeypatch.setattr(RS.Runs, "built", lambda self, point: True)  # every build ahead done when its turn comes
    res = cudalab.tune("matmul", "warptile", trials=4, seed=1, build_ahead=2, race=0,
                       storage=f"sqlite:///{tmp_path / 'm.db'}")
    assert rows_run() == ["warptile"] * 4 + ["cublas"]  # the trials first, the library row once after them
    assert res.reference.rate and not res.reference.reason


def test_a_library_row_the_loop_ran_that_fails_leaves_dashes_and_is_not_run_again(fake, rows_run, tmp_path,
                                                                                  monkeypatch):
    from cudalab import build
    from cudalab.instruments import driverquery
    from cudalab.tuning import runs as RS

    fake({"_ms": MATMUL_MS, "cublas": "die"})
    monkeypatch.setattr(build, "build", lambda *a, **k: None)
    monkeypatch.setattr(driverquery, "arch_here", lambda: "sm_90")
    sent = []
    submit = RS.Runs.submit
    monkeypatch.setattr(RS.Runs, "submit", lambda self, points: sent.append(points) or submit(self, points))
    monkeypatch.setattr(RS.Runs, "built", lambda self, point: bool(sent))  # no trial built before the row is sent
    res = cudalab.tune("matmul", "warptile", trials=4, seed=1, build_ahead=2, race=0,
                       storage=f"sqlite:///{tmp_path / 'm.db'}")
    assert rows_run()[0] == "cublas" and rows_run().count("cublas") == 1
    assert res.reference.rate is None and res.reference.reason
    assert len([m for m in res.trials if m.status == "passed"]) == 4  # a fresh worker ran the trials
