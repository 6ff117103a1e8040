"""``cudalab.tune_kernel`` (a kernel without a family, kernel_tuner's call) and the interchange with kernel_tuner:
its parameters and restrictions, its cache file as replay data and beside cudalab's, the winner as a C header
(issue 56). On the CPU with fake GPU workers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import cudalab
from cudalab.errors import UsageError
from cudalab.tuning import interchange as KT

pytest.importorskip("optuna")

AXPY = Path(__file__).parents[1] / "docs" / "examples" / "tune" / "my_axpy.cu"
CACHE = Path(__file__).parent / "data" / "kt" / "axpy-cache.json"
N = 1 << 12
PARAMS = {"block_size_x": [128, 256], "EPT": [1, 2, 4], "VW": [1, 2, 4]}


def _args():
    rng = np.random.default_rng(1)
    x, y = rng.random(N, dtype=np.float32), rng.random(N, dtype=np.float32)
    return [np.zeros_like(x), x, y, np.float32(2.0), np.int32(N)], [2 * x + y, None, None, None, None]


def tune_axpy(tmp_path, **kw):
    args, answer = _args()
    opts = dict(grid_div_x=["block_size_x", "EPT", "VW"], restrictions=["block_size_x * EPT <= 512"],
                answer=answer, storage=f"sqlite:///{tmp_path / 'k.db'}", race=2, build_ahead=0, timeout=3)
    opts.update(kw)
    return cudalab.tune_kernel("my_axpy", str(AXPY), N, args, PARAMS, **opts)


def test_a_failing_crashing_or_hanging_configuration_is_one_infeasible_trial(fake_workers, tmp_path):
    fake_workers({"_ms": "1 + 1 / EPT + VW / 100", "my_axpy#VW=2": "incorrect", "my_axpy#EPT=4": "die",
                  "my_axpy#block=256": "hang"})
    res = tune_axpy(tmp_path)
    st = {(m.point["EPT"], m.point["VW"], m.point["block"]): m.status for m in res.trials}
    assert len(st) == 15  # 18 points, 3 refused by the restriction: never asked
    assert {st[k] for k in st if k[1] == "2"} == {"incorrect"}
    assert {st[k] for k in st if k[0] == "4" and k[1] != "2"} == {"failed"}
    assert {st[k] for k in st if k[2] == "256" and k[0] != "4" and k[1] != "2"} == {"timeout"}
    assert res.best_params == {"EPT": "2", "VW": "1", "block": "128"}
    assert res.command == ""  # its family lived for the call only: no command line reruns it


def test_the_same_call_continues_its_campaign(fake_workers, tmp_path, monkeypatch):
    rows = tmp_path / "rows"
    monkeypatch.setenv("FAKE_WORKER_ROWS", str(rows))
    fake_workers({"_ms": "1 + 1 / EPT + VW / 100"})
    first = tune_axpy(tmp_path, trials=4, race=0)
    assert len(first.trials) == 4
    again = tune_axpy(tmp_path, race=0)
    assert len(again.trials) == 15 and rows.read_text().split().count("my_axpy") == 15


@pytest.mark.parametrize("kw, fragment", [
    ({"restrictions": ["block_size_x * EPX <= 512"]}, "unknown name 'EPX'"),
    ({"restrictions": ["block_size_x * EPT > 4096"]}, "the space is empty"),
    ({"grid_div_x": ["block_size_x // 256", "EPT"]}, "is 0x1"),
    ({"answer": [None] * 5}, "checks one output array"),
    ({"restrictions": [lambda p: True]}, "as text"),
])
def test_bad_input_is_one_usage_error_before_any_build(tmp_path, monkeypatch, kw, fragment):
    from cudalab import build

    monkeypatch.setattr(build, "build", lambda *a, **k: pytest.fail("a build ran before the input was checked"))
    with pytest.raises(UsageError) as exc:
        tune_axpy(tmp_path, **kw)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_a_kernel_not_in_the_source_is_refused(tmp_path):
    args, answer = _args()
    with pytest.raises(UsageError, match="no kernel my_axpi"):
        cudalab.tune_kernel("my_axpi", str(AXPY), N, args, PARAMS, answer=answer)


def test_kernel_tuners_parameters_and_restrictions_in_cudalabs_words():
    kt = KT.space_of({"block_size_x": [16, 32], "block_size_y": [4, 8], "TX": [1, 2]}, "block_size_x * TX <= 32",
                     (["block_size_x", "TX"], None, None))
    assert [(d.name, d.values) for d in kt.space.dims] == [("TX", ("1", "2")), ("block", ("16x4", "16x8", "32x4", "32x8"))]
    assert kt.require == ("block_x * TX <= 32",) and kt.tile == ("block_x * TX", "block_y", "block_z")
    assert kt.point_of({"block_size_x": 32, "block_size_y": 8, "TX": 1}) == {"TX": "1", "block": "32x8"}
    assert len(kt.space.valid_points()) == 6  # 32 x 2 breaks the restriction


def test_a_kernel_tuner_cache_is_replay_data_and_sits_beside_a_campaign(tmp_path, invoke):
    kt, table, facts = KT.load_kt_cache(CACHE)  # left open, as kernel_tuner leaves it while it runs
    assert facts["device"] == "NVIDIA H200" and len(table) == 15
    assert table["EPT=4 VW=2 block=128"] is None and table["EPT=1 VW=1 block=128"] == pytest.approx(2.0228)
    res = invoke(["tune", "--replay", str(CACHE), "--strategy", "random,tpe", "--seeds", "3", "--trials", "5"])
    assert res.exit_code == 0, res.output
    assert "random" in res.output and "tpe" in res.output
    ours = {k: (v * 1.01 if v else v) for k, v in table.items()}
    ours["EPT=2 VW=1 block=128"] = 0.5  # cudalab's winner elsewhere
    rows, lines = KT.side_by_side(ours, table)
    assert rows[0][0] == "EPT=2 VW=1 block=128" and rows[0][2] == "1"
    assert any("kernel_tuner's best" in line for line in lines)


def test_a_file_that_is_no_kernel_tuner_cache_is_one_line(tmp_path, invoke):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"points": []}))
    res = invoke(["tune", "--replay", str(bad)])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "not a kernel_tuner cache" in res.output


def test_the_winner_as_a_c_header_and_json(fake_workers, tmp_path):
    fake_workers({"_ms": "1 + 1 / EPT + VW / 100"})
    res = tune_axpy(tmp_path, race=0)
    h = tmp_path / "axpy_tuned.h"
    res.write_header(str(h))
    text = h.read_text()
    assert "#define EPT 4" in text and "#define VW 1" in text and "#define TUNED_BLOCK_X 128" in text
    assert "#ifndef EPT" in text and "CUDALAB_TUNED_GPU" in text
    data = json.loads(Path(str(h) + ".json").read_text())
    assert data["defines"] == {"EPT": "4", "VW": "1"} and data["block"] == "128"


def test_a_real_kernel_tuner_cache_from_an_h200_reads_every_configuration(invoke):
    # kernel_tuner 1.5 writes its objective as a list (["time"]): read as a name, every time was "failed"
    real = Path(__file__).parents[1] / "docs" / "benchmarks" / "tune-own" / "nvidia-h200" / "axpy-kernel_tuner-1.json"
    kt, table, facts = KT.load_kt_cache(real)
    assert facts["objective"] == "time" and len(table) == 72 and all(v is not None for v in table.values())
    ours = real.with_name("axpy-cudalab-1.tune.db")
    res = invoke(["tune", "--replay", str(ours), "--versus", str(real)])
    assert res.exit_code == 0 and "72 passed in both" in res.output, res.output


def test_a_cache_where_nothing_passed_is_one_line(tmp_path, invoke):
    import re

    dead = tmp_path / "dead.json"  # every configuration failed (kernel_tuner's failure names in place of times)
    dead.write_text(re.sub(r'"time": [0-9.]+', '"time": "RuntimeFailedConfig"', CACHE.read_text()))
    assert all(v is None for v in KT.load_kt_cache(dead)[1].values())
    res = invoke(["tune", "--replay", str(dead)])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "no configuration in it passed" in res.output
