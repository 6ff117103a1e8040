"""On a GPU with cupti-python (skipped without either): ``--launch cupti`` times a short transpose by CUPTI's activity
records, cold (an L2 flush before every launch) and hot, and ``cudalab truth`` gives cupti's figure beside the
others. One speed check only, the method's own claim: a kernel that reads its 4 MiB input from DRAM when the L2 was
flushed before it reads no faster cold than hot."""

from __future__ import annotations

import json

import pytest

ROW = ["transpose", "--n", "1024", "--variant", "tiled-32x8", "--budget", "0.2", "-q"]


def _cupti_or_skip() -> None:
    try:
        from cupti import cupti  # noqa: F401, PLC0415
    except Exception as exc:  # ImportError, or a library it needs missing: the reason is the skip's
        pytest.skip(f"cupti-python cannot be imported here: {type(exc).__name__}: {exc}")


def _row(invoke, tmp_path, hot: bool) -> dict:
    out = tmp_path / f"run-{'hot' if hot else 'cold'}.json"
    res = invoke(*ROW, "--launch", "cupti", "--no-roofline", "--json", out, *(["--hot"] if hot else []))
    assert res.exit_code == 0, res.output
    assert "cupti" in res.output          # the table's 'timed by' column names it
    return json.loads(out.read_text())["points"][0]["results"][0]


@pytest.mark.gpu
def test_launch_cupti_times_a_short_transpose_cold_no_faster_than_hot(invoke, tmp_path):
    _cupti_or_skip()
    rows = {}
    for hot in (False, True):
        row = rows[hot] = _row(invoke, tmp_path, hot)
        ex = row["extra"]
        assert row["status"] == "passed", row
        assert ex["timed_by"] == "cupti" and "timed_by_note" not in ex, ex   # a note: CUPTI did not time it
        assert row["stats"]["median"] > 0 and ex["batch"] > 1
    cold, hot = rows[False]["stats"]["median"], rows[True]["stats"]["median"]
    # a flush before every launch: each one reads the input from DRAM (ncu on an H100: 4.86 µs cold, 3.71 hot)
    assert cold >= hot, (cold, hot)


@pytest.mark.gpu
def test_truth_gives_cuptis_figure_cold_and_hot(invoke, tmp_path):
    _cupti_or_skip()
    out = tmp_path / "truth.json"
    res = invoke("truth", *ROW, "--no-ncu", "--json", out)
    assert res.exit_code == 0, res.output
    r = json.loads(out.read_text())["rows"][0]
    for temp in ("cold", "hot"):
        f = r[temp]["cupti"]
        assert f["median_ms"] and f["median_ms"] > 0 and f["timed_by"] == "cupti" and not f["note"], (temp, f)
    assert "cupti µs (reference)" in res.output and "graph µs vs cupti" in res.output


@pytest.mark.gpu
def test_launch_cupti_times_an_in_place_reduction_reset_before_each_launch(invoke, tmp_path):
    """reduce's classic rows consume their input: cupti resets it before every launch (the copy not counted), and
    the row still passes its check; events (one launch between two events) read more than cupti's GPU time."""
    _cupti_or_skip()
    meds = {}
    for launch in ("cupti", "events"):
        out = tmp_path / f"reduce-{launch}.json"
        res = invoke("reduce", "--n", "2^16", "--variant", "neighbored", "--budget", "0.2", "-q", "--no-roofline",
                     "--launch", launch, "--json", out)
        assert res.exit_code == 0, res.output
        row = json.loads(out.read_text())["points"][0]["results"][0]
        assert row["status"] == "passed", row
        assert row["extra"]["timed_by"] == launch and "timed_by_note" not in row["extra"], row["extra"]
        meds[launch] = row["stats"]["median"]
    # events carry a launch's overhead (H200, cudalab truth: 7.3 µs events against ncu's 4.2 for this row)
    assert meds["cupti"] < meds["events"], meds
