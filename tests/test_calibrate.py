"""``cudalab calibrate`` (issue 46, item 3) on fake runs: the floor from A/A pairs and a planted slowdown, kept per
GPU, and compare's default effect and ``--fail-on slower`` taking it from there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from cudalab.bench import summarize
from cudalab.cli import cli
from cudalab.errors import UsageError
from cudalab.records import noise
from cudalab.records.results import PASSED, Result
from cudalab.studies import calibrate as C

GPU = "Fake H100"
RUNS = Path(__file__).parent / "data" / "runs"


def _row(name, ms, rng, spread=0.003):
    return Result(name, "kernel", PASSED, stats=summarize(list(ms * (1 + spread * rng.standard_normal(40)))))


def fake_runs(slow=0.02, seed=0, per_cycle=None, spread=0.003):
    """Fake runs whose slowed row is ``slow`` slower, or, with ``per_cycle``, slower by that fraction a cycle of
    delay (a delay that adds less than its length, as on a GPU)."""
    rng = np.random.default_rng(seed)
    delays = []

    def once(delay):
        delays.append(delay)
        rows = {C.BUILTIN: _row(C.BUILTIN, 0.010, rng), C.PLAIN: _row(C.PLAIN, 0.012, rng, spread)}
        if delay:
            rows[C.SLOW] = _row(C.SLOW, 0.012 * (1 + (slow if per_cycle is None else per_cycle * delay)), rng, spread)
        return C.Run(rows, GPU, 1980.0)

    return once, delays


def test_calibrate_finds_a_floor_with_few_false_verdicts_and_catches_the_planted_slowdown():
    once, delays = fake_runs()
    got = C.calibrate(20, once)
    f = got.floor
    # the probe, the checks of the delay sized from it (1 to CHECKS), then the 21 runs of the pairs (one delay)
    checks = len(delays) - 22
    assert delays[0] == 0 and delays[1] == C.delay_for(0.012, 1980.0) and 1 <= checks <= C.CHECKS
    assert len(set(delays[1 + checks:])) == 1 and len(got.sizing) == checks
    assert f.gpu == GPU and f.pairs == 20 and f.judgements == 40
    assert f.false_rate <= noise.MAX_FALSE and f.min_effect < 0.02
    assert f.planted == pytest.approx(0.02, abs=0.003) and f.detect_rate >= 0.8
    # the chosen threshold is the smallest of the ladder with few enough false verdicts
    smaller = [t for t in noise.LADDER if t < f.min_effect]
    assert all(f.false_by_threshold[f"{t:g}"] > noise.MAX_FALSE for t in smaller)


def test_the_delay_is_checked_and_scaled_until_it_plants_the_target():
    # each cycle of delay adds 70% of what delay_for assumed: the delay sized for 2% plants 1.4% (an H200 read
    # 1.8%); one check, one scaling, and the next check plants 2.1%: the pairs run with that delay
    sized = C.delay_for(0.012, 1980.0)
    once, delays = fake_runs(per_cycle=0.7 * noise.TARGET_SLOWDOWN / sized, spread=0.0005)
    got = C.calibrate(10, once)
    assert delays[1] == sized and delays[2] > 1.4 * sized and len(delays) == 3 + 11 and set(delays[3:]) == {delays[2]}
    assert [d for d, _ in got.sizing] == delays[1:3] and got.sizing[0][1] == pytest.approx(0.014, abs=0.001)
    assert noise.TARGET_SLOWDOWN <= got.floor.planted <= noise.TARGET_SLOWDOWN * C.TOLERANCE
    # one that plants twice the target is scaled down
    once, delays = fake_runs(per_cycle=2 * noise.TARGET_SLOWDOWN / sized, spread=0.0005)
    got = C.calibrate(2, once)
    assert delays[2] < 0.6 * sized and noise.TARGET_SLOWDOWN <= got.floor.planted <= noise.TARGET_SLOWDOWN * C.TOLERANCE
    # a check that reads a tenth of the target scales by at most MAX_SCALE a step, CHECKS checks at most
    once, delays = fake_runs(per_cycle=0.1 * noise.TARGET_SLOWDOWN / sized, spread=0.0005)
    C.calibrate(2, once)
    assert all(b <= C.MAX_SCALE * a + 1 for a, b in zip(delays[1:4], delays[2:5])) and len(delays) == 1 + C.CHECKS + 3
    # one that planted the target, up to TOLERANCE over it, is kept
    once, delays = fake_runs(per_cycle=1.1 * noise.TARGET_SLOWDOWN / sized, spread=0.0005)
    C.calibrate(2, once)
    assert set(delays[1:]) == {sized}


def test_a_noisy_gpu_gets_a_higher_floor():
    rng = np.random.default_rng(1)

    def once(delay):
        # each process lands at its own level (a different clock): A/A pairs differ by ~3%
        level = 1 + 0.03 * rng.standard_normal()
        rows = {C.PLAIN: _row(C.PLAIN, 0.012 * level, rng), C.SLOW: _row(C.SLOW, 0.01224 * level, rng)}
        return C.Run(rows, GPU, 1980.0)

    f = C.calibrate(20, once, rows=(C.PLAIN,)).floor
    assert f.min_effect >= 0.03


def test_delay_and_adds():
    assert C.delay_for(0.010, 2000.0, 0.02) == 400     # 2% of 10 µs at 2 GHz
    texts = C.adds(Path("/k.cu"), 400)
    assert texts[0].endswith("name=calib") and texts[1].endswith("name=calib_slow,-DCALIB_DELAY=400")
    assert len(C.adds(Path("/k.cu"), 0)) == 1
    with pytest.raises(UsageError):
        C.calibrate(0, fake_runs()[0])


def test_the_floor_is_kept_per_gpu_and_a_bad_file_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path))
    f = C.calibrate(10, fake_runs()[0]).floor
    p = noise.save(f)
    assert p.parent == tmp_path / "noise" and p.name == "fake-h100.json"
    assert noise.load(GPU) == f and noise.load("Other GPU") is None
    assert noise.effect_for(GPU) == (f.min_effect, f) and noise.effect_for("x")[0] == noise.DEFAULT_EFFECT
    p.write_text("{not json")
    assert noise.load(GPU) is None


def test_compare_uses_the_floor_of_a_s_gpu_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path))
    a = RUNS / next(p.name for p in RUNS.glob("*.json"))
    gpu = json.loads(a.read_text())["gpu"] if "gpu" in json.loads(a.read_text()) else None
    from cudalab.records.results import load_record

    gpu = load_record(a).gpu
    res = CliRunner().invoke(cli, ["compare", str(a), str(a)])
    assert res.exit_code == 0 and "never calibrated" in res.output and "≥ 2%" in res.output
    res = CliRunner().invoke(cli, ["compare", str(a), str(a), "--fail-on", "slower"])
    assert res.exit_code == 2 and "needs a percentage" in res.output
    noise.save(noise.NoiseFloor(gpu, 0.0125, 0.005, 0.9, 0.02, 100, 200))
    res = CliRunner().invoke(cli, ["compare", str(a), str(a)])
    assert res.exit_code == 0, res.output
    assert "noise floor of this GPU: effect threshold 1.25%" in res.output and "≥ 1.2% (--min-effect)" in res.output
    res = CliRunner().invoke(cli, ["compare", str(a), str(a), "--fail-on", "slower"])
    assert res.exit_code == 0 and "gate --fail-on slower: passed" in res.output
    res = CliRunner().invoke(cli, ["compare", str(a), str(a), "--min-effect", "3%"])
    assert "noise floor" not in res.output and "≥ 3%" in res.output


def test_a_real_run_through_the_workers_has_the_rows_calibrate_judges(fake_workers):
    # the fake runs above name their rows as calibrate judges them; a run's --add rows are named '+NAME', and on
    # an H100 calibrate found no 'calib' row ("the calibration kernel did not pass: no row")
    from cudalab import catalog
    from cudalab.families import load
    from cudalab.session.options import RunOptions

    fake_workers({})
    spec = catalog.family("copy")
    once = C.gpu_run(spec, load(spec.module), RunOptions(variants=C.BUILTIN, n="1k", budget=0.01, roofline=False))
    short = {name + C.SHORT for name in (C.BUILTIN, C.PLAIN)}
    assert set(once(0).rows) == {C.BUILTIN, C.PLAIN} | short
    assert set(once(7).rows) == {C.BUILTIN, C.PLAIN, C.SLOW} | short | {C.SLOW + C.SHORT}
    done = C.calibrate(2, once)
    assert done.delay_cycles > 0 and len(done.runs) == 3 and done.floor.short_judgements == 4


def short_runs(level_spread=0.05, seed=3):
    """Fake runs with short rows whose level moves per process by ``level_spread`` (a few-µs kernel on an H200)
    and long rows that move by 0.3% within a process only."""
    rng = np.random.default_rng(seed)

    def once(delay):
        level = 1 + level_spread * rng.standard_normal()
        rows = {C.BUILTIN: _row(C.BUILTIN, 0.035, rng), C.PLAIN: _row(C.PLAIN, 0.13, rng),
                C.BUILTIN + C.SHORT: _row(C.BUILTIN, 0.0018 * level, rng), C.PLAIN + C.SHORT: _row(C.PLAIN, 0.002 * level, rng)}
        if delay:
            rows[C.SLOW] = _row(C.SLOW, 0.13 * 1.02, rng)
        return C.Run(rows, GPU, 1980.0)

    return once


def test_short_rows_get_their_own_floor_and_compare_judges_each_row_at_its_own():
    f = C.calibrate(30, short_runs()).floor
    assert f.short_judgements == 60 and f.min_effect <= 0.01
    # rows that move 5% between processes: no threshold up to 20% keeps them to 1% false verdicts, or a wide one
    assert f.short_min_effect is None or f.short_min_effect >= 0.1
    assert f.effect(0.0018) == f.short_min_effect and f.effect(0.035) == f.min_effect and f.effect(None) == f.min_effect
    quiet = C.calibrate(30, short_runs(level_spread=0.0)).floor
    assert quiet.short_min_effect is not None and quiet.short_min_effect <= 0.02
    assert "rows under 20 µs" in f.line() and "rows under 20 µs: " + ("not judged" if f.short_min_effect is None else "") in f.line()
    # a GPU calibrated before the short rows were: one threshold for every row
    old = noise.NoiseFloor(GPU, 0.0125, 0.0, 1.0, 0.02, 100, 200)
    assert old.effect(0.0018) == 0.0125 and "rows under" not in old.line()


def test_compare_judges_a_short_row_at_the_short_floor(tmp_path, monkeypatch):
    from cudalab.records import compare as CMP
    from cudalab.records.results import RunPoint, RunRecord

    rng = np.random.default_rng(5)

    def rec(short_ms, long_ms):
        rows = (_row("smem", short_ms, rng, 0.002), _row("copy", long_ms, rng, 0.002))
        point = RunPoint("copy", "bandwidth", {"dims": [64, 64], "dtype": "float32", "options": {}}, results=rows)
        return RunRecord(cudalab="0.1.0", command=("cudalab", "copy"), started=0.0, device={"name": GPU}, points=(point,))

    a, b = rec(0.0018, 0.035), rec(0.0018 * 1.06, 0.035 * 1.06)   # both 6% slower
    verdicts = lambda c: {r.variant: r.verdict for r in c.rows}
    assert {k: v.verdict for k, v in verdicts(CMP.compare(a, b, min_effect=0.01)).items()} == {"smem": "slower", "copy": "slower"}
    none = noise.NoiseFloor(GPU, 0.01, 0.0, 1.0, 0.02, 100, 200, short_min_effect=None, short_judgements=200)
    v = verdicts(CMP.compare(a, b, min_effect=0.01, row_effect=none.effect))
    assert v["smem"].verdict == "unsure" and "not judged" in v["smem"].note and v["smem"].ratio > 1.05
    assert v["copy"].verdict == "slower"
    wide = noise.NoiseFloor(GPU, 0.01, 0.0, 1.0, 0.02, 100, 200, short_min_effect=0.1, short_judgements=200)
    v = verdicts(CMP.compare(a, b, min_effect=0.01, row_effect=wide.effect))
    assert v["smem"].verdict in ("same", "unsure") and v["copy"].verdict == "slower"
    # a stored floor whose short threshold is not a fraction does not load
    noise_dir = tmp_path / "noise"
    noise_dir.mkdir()
    bad = dict(__import__("dataclasses").asdict(wide), short_min_effect=5)
    (noise_dir / "fake-h100.json").write_text(json.dumps(bad))
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path))
    assert noise.load(GPU) is None
    (noise_dir / "fake-h100.json").write_text(json.dumps(__import__("dataclasses").asdict(wide)))
    assert noise.load(GPU) == wide


def test_dry_run_says_both_sizes_and_how_many_processes():
    res = CliRunner().invoke(cli, ["calibrate", "--pairs", "10", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert f"would run 13 to {12 + C.CHECKS} processes of copy --variant vec4 --n 4k,{C.SHORT_N}" in res.output


def test_the_floor_line_folds_at_words_to_the_terminal(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path))
    from cudalab import report
    from cudalab.records.results import load_record
    from cudalab.report.console import CleanConsole

    # an 80-column terminal (piped output stays wide, as tune's closing lines)
    monkeypatch.setattr(report, "console", lambda stderr=False: CleanConsole(width=80, soft_wrap=False))
    a = RUNS / next(p.name for p in RUNS.glob("*.json"))
    noise.save(noise.NoiseFloor(load_record(a).gpu, 0.0125, 0.0, 1.0, 0.0177, 100, 200, short_min_effect=None,
                                short_judgements=200))
    res = CliRunner().invoke(cli, ["compare", str(a), str(a)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("noise floor of this GPU"))
    said = [lines[start]] + [ln for ln in lines[start + 1:start + 4] if ln.startswith("  ")]
    assert len(said) > 1 and all(len(ln) <= 80 for ln in said)
    assert "rows under 20 µs: not judged (no threshold up to 20% kept" in " ".join(ln.strip() for ln in said)


def test_calibrate_s_closing_lines_fold_to_the_terminal(fake_workers, tmp_path, monkeypatch):
    from cudalab import report
    from cudalab.report.console import CleanConsole

    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path))
    monkeypatch.setattr(report, "console", lambda stderr=False: CleanConsole(width=80, soft_wrap=False))
    fake_workers({})
    res = CliRunner().invoke(cli, ["calibrate", "--pairs", "2", "--budget", "0.01", "--min-samples", "8"])
    assert res.exit_code == 0, res.output
    # a word longer than the terminal (the floor file's path) stays whole on a line of its own
    assert all(len(ln) <= 80 for ln in res.stdout.splitlines() if " " in ln.strip()), res.stdout
    text = " ".join(ln.strip() for ln in res.stdout.splitlines())
    assert "rows under 20 µs, false verdicts by threshold: 0.0025:" in text and "floor kept in" in text
