"""The cache is input too (issue 57's class): a noise floor, measured ceilings or calibration kernel in the cache
folder that is not what cudalab wrote (wrong field types, a FIFO, a link to /dev/zero, a huge file, not JSON) is
ignored with one warning line and the command goes on; nothing cudalab writes there goes through a planted link."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudalab.cli import cli
from cudalab.records import noise
from cudalab.records.results import load_record

RUNS = Path(__file__).parent / "data" / "runs"
RUN = RUNS / "nvidia-h200-transpose.json"
GOOD = {"min_effect": 0.0125, "false_rate": 0.005, "detect_rate": 0.9, "planted": 0.02, "pairs": 100,
        "judgements": 200}


def plant(path: Path, kind: str, gpu: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    bad_fields = {"min_effect": "0.01", "pairs": "many", "false_by_threshold": [1, 2], "judgements": None,
                  "short_min_effect": float("nan"), "detect_rate": {"x": 1}, "made": True}
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    elif kind == "huge":
        path.write_text(json.dumps({"gpu": gpu, **GOOD, "pad": "x" * (3 << 20)}))
    elif kind == "notjson":
        path.write_bytes(b"\x00\xff{")
    elif kind == "list":
        path.write_text("[1, 2, 3]")
    else:  # one field of the wrong type
        path.write_text(json.dumps({"gpu": gpu, **GOOD, kind: bad_fields[kind]}))


KINDS = ["fifo", "devzero", "huge", "notjson", "list", "min_effect", "pairs", "false_by_threshold", "judgements",
         "short_min_effect", "detect_rate", "made"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_noise_floor_in_the_cache_is_ignored_with_one_warning_and_compare_goes_on(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "builds"))
    gpu = load_record(RUN).gpu
    plant(noise.path_for(gpu), kind, gpu)
    res = CliRunner().invoke(cli, ["compare", str(RUN), str(RUN)])
    assert res.exit_code == 0, (res.output, res.stderr, res.exception)
    assert "Traceback" not in res.output and "never calibrated" in res.stdout
    warnings = [x for x in res.stderr.splitlines() if x.startswith("warning: ignoring the noise floor")]
    assert len(warnings) == 1, res.stderr


def test_a_good_floor_still_reads_and_a_bad_one_warns_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "builds"))
    noise.save(noise.NoiseFloor("G", **GOOD))
    assert noise.load("G") == noise.NoiseFloor("G", **GOOD)
    plant(noise.path_for("H"), "pairs", "H")
    assert noise.load("H") is None and noise.load("H") is None
    assert capsys.readouterr().err.count("warning: ignoring") == 1


@pytest.mark.parametrize("what", ["noise", "ceilings", "calibrate"])
def test_nothing_cudalab_writes_in_the_cache_goes_through_a_planted_link(tmp_path, monkeypatch, what):
    from cudalab.inspect import ceilings
    from cudalab.studies import calibrate

    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    victim = tmp_path / "users-file.txt"
    victim.write_text("keep me\n")
    path = {"noise": lambda: noise.path_for("G"), "ceilings": lambda: ceilings.cache_file("G", 1980),
            "calibrate": lambda: tmp_path / "cache" / "calibrate" / "calib_copy.cu"}[what]()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(victim)
    {"noise": lambda: noise.save(noise.NoiseFloor("G", **GOOD)),
     "ceilings": lambda: ceilings.store(ceilings.Ceilings("G", 1980, 1.0, 2.0)),
     "calibrate": calibrate.kernel_file}[what]()
    assert victim.read_text() == "keep me\n"
    assert path.is_file() and not path.is_symlink()


@pytest.mark.parametrize("value", [float("inf"), -5.0, "fast", float("nan")])
def test_cached_ceilings_that_are_not_rates_are_ignored(tmp_path, monkeypatch, capsys, value):
    from cudalab.inspect import ceilings

    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "builds"))
    p = ceilings.cache_file("G", 1980)
    p.parent.mkdir(parents=True)
    p.write_text(json.dumps({"gpu": "G", "sm_clock_mhz": 1980, "fma_gflops": value, "tensor_gflops": None}))
    assert ceilings.cached("G", 1980) is None
    assert "warning: ignoring the measured ceilings" in capsys.readouterr().err
