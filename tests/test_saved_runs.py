"""Saved runs on the CPU: ``cudalab report`` over every fixture, ``compare`` verdicts and its CI gate,
plots, and the result schema. Fixtures: every ``tests/data/runs/*.json`` (real GPU records added there
are covered automatically)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
import sys
from pathlib import Path

import numpy as np
import pytest

from cudalab.records import compare as C
from cudalab.records import gate as G
from cudalab.records import stats as S
from cudalab.bench import summarize
from cudalab.records.results import (
    PASSED,
    Result,
    Roofline,
    RunPoint,
    RunRecord,
    load_record,
    save_record,
)

RUNS = Path(__file__).parent / "data" / "runs"
FIXTURES = sorted(RUNS.glob("*.json"))
SCHEMA = Path(__file__).parent.parent / "docs" / "result-schema.json"
H200 = {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "total_memory": 150109880320,
        "l2_bytes": 62914560, "sm_clock_mhz": 1980, "mem_clock_mhz": 3201, "bus_width_bits": 6016,
        "driver_version": "13.0", "cuda_version": "13.0", "driver_release": "580.159.04"}
H100 = dict(H200, name="NVIDIA H100 80GB HBM3", sm_count=132, l2_bytes=52428800, mem_clock_mhz=2619)
NBYTES = 2 * 16384 * 16384 * 4


def row(variant: str, samples, roof_gbs: float = 4250.0, kind: str = "kernel") -> Result:
    s = summarize(list(samples))
    gbs = NBYTES / (s.median * 1e-3) / 1e9
    return Result(variant, kind, PASSED, block="32x8", grid="512x512", stats=s, gbs=gbs,
                  pct_roofline=100 * gbs / roof_gbs, max_error=0.0)


def record(rows, device=H200, roof_gbs: float = 4250.0) -> RunRecord:
    point = RunPoint("transpose", "bandwidth", {"dims": [16384, 16384], "dtype": "float32", "options": {}},
                     protocol={"warmup": 2, "min_samples": 10}, roofline=Roofline(roof_gbs, "memcpy_dtod", roof_gbs),
                     results=tuple(rows))
    return RunRecord(cudalab="0.1.0", command=("cudalab", "transpose"), started=1795305600.0, device=device,
                     points=(point,), machine={"hostname": "test"})


def noisy(median: float, n: int, seed: int, spread: float = 0.003):
    return median * (1 + np.abs(np.random.default_rng(seed).normal(0, spread, n)))


def save(tmp_path: Path, name: str, rec: RunRecord) -> str:
    path = tmp_path / name
    save_record(path, rec)
    return str(path)


@pytest.fixture
def base(tmp_path):
    rec = record([row("host", [5000.0, 5100.0, 5200.0], kind="host"), row("naive", noisy(3.9, 40, 1)),
                  row("tiled", noisy(0.62, 40, 2)), row("vec4", noisy(0.53, 40, 3))])
    return save(tmp_path, "base.json", rec)


# --- statistics -------------------------------------------------------------------------------------

def test_mann_whitney_matches_the_textbook_normal_approximation():
    u, p = S.mann_whitney([1, 1, 2, 2, 3], [2, 3, 3, 4, 4, 4])  # ties: the tie-corrected variance
    assert u == 3.0 and p == pytest.approx(0.030424, rel=1e-4)
    assert S.mann_whitney([1.0] * 5, [1.0] * 5)[1] == 1.0


def test_verdicts_from_known_samples():
    a = noisy(1.0, 40, 1)
    assert C.judge(a, noisy(1.10, 40, 2)).verdict == C.SLOWER
    assert C.judge(a, noisy(0.90, 40, 3)).verdict == C.FASTER
    assert C.judge(a, noisy(1.0, 40, 4)).verdict in (C.SAME, C.UNSURE)
    tiny = C.judge(a[:3], noisy(1.2, 4, 5))
    assert tiny.verdict == C.UNSURE and "n=3 vs 4 samples: rerun with --min-samples 30" in tiny.note
    wide = C.judge(noisy(1.0, 12, 6, 0.1), noisy(1.01, 12, 7, 0.1))
    assert wide.verdict == C.UNSURE and "spread" in wide.note and "> effect 2%" in wide.note


def test_bootstrap_is_reproducible():
    a, b = noisy(1.0, 30, 1), noisy(1.05, 30, 2)
    assert S.bootstrap_ratio(a, b) == S.bootstrap_ratio(a, b)


def test_compare_of_a_million_samples_a_row_keeps_memory_bounded():
    """The bootstrap drew rounds x n indices at once (2,000 x 1M: 32 GB, OOM-killed): 20,000 samples a
    side took 640 MB; bounded, it stays under 64 MiB whatever n."""
    import tracemalloc

    a, b = noisy(1.0, 20_000, 1), noisy(1.05, 20_000, 2)
    tracemalloc.start()
    try:
        verdict = C.judge(a, b)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert verdict.verdict == C.SLOWER and verdict.low is not None
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MiB"


def test_ranks_of_many_distinct_values_match_the_loop():
    v = np.round(np.random.default_rng(3).normal(0, 1, 5000), 2)
    order = np.argsort(v, kind="mergesort")
    want = np.empty(v.size)
    sv = v[order]
    i = 0
    while i < v.size:
        j = i
        while j < v.size and sv[j] == sv[i]:
            j += 1
        want[order[i:j]] = (i + 1 + j) / 2.0
        i = j
    assert np.array_equal(S._rankdata(v), want)


def test_parse_options():
    assert G.parse_percent("2%", "--min-effect") == pytest.approx(0.02)
    assert G.parse_fail_on("slower:5%") == pytest.approx(0.05)
    for bad in ("faster:5%", "slower", "slower:x"):
        with pytest.raises(G.UsageError):
            G.parse_fail_on(bad)


# --- compare and the gate ---------------------------------------------------------------------------

def test_clearly_slower_fails_the_gate(invoke, tmp_path, base):
    new = record([row("naive", noisy(3.9, 40, 11)), row("tiled", noisy(0.62 * 1.12, 40, 12)),
                  row("vec4", noisy(0.53, 40, 13))])
    res = invoke("compare", base, save(tmp_path, "new.json", new), "--fail-on", "slower:5%")
    assert res.exit_code == 1, res.output
    assert "slower" in res.output and "gate --fail-on slower:5%: FAILED" in res.output
    assert "tiled slower by 12" in res.output


def test_faster_passes_the_gate(invoke, tmp_path, base):
    new = record([row("naive", noisy(3.9 * 0.8, 40, 11)), row("tiled", noisy(0.62, 40, 12)),
                  row("vec4", noisy(0.53, 40, 13))])
    res = invoke("compare", base, save(tmp_path, "new.json", new), "--fail-on", "slower:5%")
    assert res.exit_code == 0, res.output
    assert "faster" in res.output and "gate --fail-on slower:5%: passed" in res.output


def test_noise_is_same_or_unsure_and_passes(invoke, tmp_path, base):
    new = record([row("naive", noisy(3.9, 40, 21)), row("tiled", noisy(0.62, 40, 22)), row("vec4", noisy(0.53, 40, 23))])
    c = C.compare(load_record(base), load_record(save(tmp_path, "new.json", new)))
    assert {r.verdict.verdict for r in c.rows if r.variant != "host"} <= {C.SAME, C.UNSURE}
    assert invoke("compare", base, str(tmp_path / "new.json"), "--fail-on", "slower:5%").exit_code == 0


def test_tiny_n_is_unsure_with_a_hint_and_never_fails(invoke, tmp_path, base):
    new = record([row("naive", noisy(3.9 * 1.3, 4, 31))])
    res = invoke("compare", base, save(tmp_path, "new.json", new), "--fail-on", "slower:5%", "--allow-missing")
    assert res.exit_code == 0, res.output
    assert "unsure" in res.output and "n=40 vs 4 samples: rerun with --min-samples 30" in res.output


def test_rows_in_one_file_and_host_rows_are_listed_without_verdict(tmp_path, base):
    new = record([row("naive", noisy(3.9, 40, 11)), row("mine", noisy(1.0, 40, 12))])
    c = C.compare(load_record(base), load_record(save(tmp_path, "new.json", new)))
    notes = {r.variant: (r.verdict.verdict, r.verdict.note) for r in c.rows}
    assert notes["host"] == ("–", "only in A") and notes["mine"] == ("–", "only in B")
    assert notes["tiled"] == ("–", "only in A")


def test_different_gpus_compare_by_percent_of_roofline(invoke, tmp_path, base):
    # The H100 is slower in ms but as close to its own (lower) roofline: by % of roofline, the same.
    scale = 4250.0 / 3000.0
    new = record([row("naive", noisy(3.9 * scale, 40, 41), 3000.0), row("tiled", noisy(0.62 * scale, 40, 42), 3000.0),
                  row("vec4", noisy(0.53 * scale * 1.15, 40, 43), 3000.0)], device=H100, roof_gbs=3000.0)
    res = invoke("compare", base, save(tmp_path, "h100.json", new))
    assert res.exit_code == 0, res.output
    assert "the verdict judges efficiency" in res.output and "NVIDIA H100 80GB HBM3" in res.output
    c = C.compare(load_record(base), load_record(str(tmp_path / "h100.json")))
    verdicts = {r.variant: r.verdict.verdict for r in c.rows}
    assert c.by_roofline and verdicts["vec4"] == C.SLOWER and verdicts["naive"] in (C.SAME, C.UNSURE)


def test_across_gpus_the_time_ratio_is_shown_beside_the_judged_efficiency(invoke, tmp_path, base):
    # B takes less time on every row (a faster GPU) but reaches less of its own roofline on vec4: the
    # verdict must not read 'slower' for a row that ran faster, and both ratios are in the table.
    fast = record([row("naive", noisy(3.9 * 0.8, 40, 71), 5312.5), row("tiled", noisy(0.62 * 0.8, 40, 72), 5312.5),
                   row("vec4", noisy(0.53 * 0.9, 40, 73), 5312.5)], device=H100, roof_gbs=5312.5)
    res = invoke("compare", base, save(tmp_path, "fast.json", fast))
    lines = {ln.split()[0]: ln.split() for ln in res.output.splitlines() if ln.strip().startswith(("naive", "vec4"))}
    assert "time B/A" in res.output and "eff A/B" in res.output
    assert float(lines["vec4"][6]) < 1 < float(lines["vec4"][7])  # less time, less efficient
    rows = [ln for ln in res.output.splitlines() if ln.strip().startswith(("naive", "tiled", "vec4"))]
    assert "less efficient" in " ".join(lines["vec4"]) and not any("slower" in ln for ln in rows)
    assert "1 less efficient" in res.output
    md = invoke("compare", base, str(tmp_path / "fast.json"), "--markdown").output
    assert "| time B/A | eff A/B |" in md and "**less efficient**" in md


def test_across_gpus_the_plot_shows_time_and_efficiency(tmp_path, base):
    pytest.importorskip("matplotlib")
    from cudalab.records import compare as C2
    from cudalab.report import plot

    fast = record([row("vec4", noisy(0.53 * 0.9, 40, 73), 5312.5)], device=H100, roof_gbs=5312.5)
    c = C2.compare(load_record(base), load_record(save(tmp_path, "fast.json", fast)), "base.json", "fast.json")
    out = tmp_path / "cmp.svg"
    plot.plot_comparison([c], out)
    svg = out.read_text()
    assert "median time" in svg and "what the verdict judges" in svg and "less efficient" in svg


def test_the_gate_fails_on_a_row_of_a_that_b_lacks_unless_allowed(invoke, tmp_path, base):
    new = record([row("naive", noisy(3.9, 40, 11)), row("tiled", noisy(0.62, 40, 12))])  # vec4 gone
    path = save(tmp_path, "new.json", new)
    res = invoke("compare", base, path, "--fail-on", "slower:5%")
    assert res.exit_code == 1, res.output
    assert "FAILED" in res.output and "vec4 missing (in base.json only" in res.output
    assert "host missing" not in res.output  # host rows are never judged: not missing from a gate
    ok = invoke("compare", base, path, "--fail-on", "slower:5%", "--allow-missing")
    assert ok.exit_code == 0 and "gate --fail-on slower:5%: passed" in ok.output


def test_the_gate_cannot_pass_on_nothing(invoke, tmp_path, base):
    other = RunRecord("0.1.0", ("cudalab", "reduce"), 0.0, H200, (RunPoint(
        "reduce", "bandwidth", {"dims": [2**24], "dtype": "float64"}, results=(row("modern", noisy(0.03, 40, 5)),)),))
    res = invoke("compare", base, save(tmp_path, "reduce.json", other), "--fail-on", "slower:5%", "--allow-missing")
    assert res.exit_code == 2 and "nothing was compared" in res.output
    assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    assert invoke("compare", base, str(tmp_path / "reduce.json")).exit_code == 0  # no gate: a table of '–'
    assert "give --fail-on too" in invoke("compare", base, base, "--allow-missing").output


def test_rows_match_when_a_family_gained_an_option(tmp_path, base):
    rec = record([row("naive", noisy(3.9, 40, 61))])
    point = rec.points[0]
    new = RunRecord(rec.cudalab, rec.command, rec.started, rec.device, machine=rec.machine, points=(
        RunPoint(point.family, point.metric, dict(point.problem, options={"tile": 32}), roofline=point.roofline,
                 results=point.results),))
    c = C.compare(load_record(base), load_record(save(tmp_path, "new.json", new)))
    naive = next(r for r in c.rows if r.variant == "naive")
    assert naive.new is not None and "options differ (A: –; B: tile=32)" in naive.verdict.note


def test_compare_markdown_for_ci_summary(invoke, tmp_path, base):
    new = record([row("tiled", noisy(0.62 * 1.12, 40, 12))])
    res = invoke("compare", base, save(tmp_path, "new.json", new), "--markdown", "--fail-on", "slower:5%")
    assert res.exit_code == 1
    assert "| family | problem | variant |" in res.output and "**slower**" in res.output
    assert "gate --fail-on slower:5%: FAILED" in res.output


def test_compare_three_files_each_against_a(invoke, tmp_path, base):
    b = save(tmp_path, "b.json", record([row("naive", noisy(3.9, 40, 51))]))
    c = save(tmp_path, "c.json", record([row("naive", noisy(3.9 * 1.2, 40, 52))]))
    res = invoke("compare", base, b, c)
    assert res.exit_code == 0 and "b.json vs base.json" in res.output and "c.json vs base.json" in res.output


@pytest.mark.parametrize("args, fragment", [
    (["compare", "ONLY"], "at least two"),
    (["compare", "A", "B", "--fail-on", "faster:5%"], "slower:PERCENT"),
    (["compare", "A", "B", "--min-effect", "two"], "percentage"),
])
def test_compare_usage_errors_are_one_line(invoke, args, fragment):
    res = invoke(*args)
    assert res.exit_code == 2 and fragment in res.output and "Traceback" not in res.output


# --- report -----------------------------------------------------------------------------------------

def test_there_are_fixtures_of_both_versions():
    names = [f.name for f in FIXTURES]
    assert any(n.startswith("v1-synthetic") and "sweep" in n for n in names)
    assert any(n.startswith("v1-synthetic") and "sweep" not in n for n in names)


@pytest.mark.parametrize("path", FIXTURES, ids=[f.name for f in FIXTURES])
def test_report_renders_every_fixture(invoke, path):
    rec = load_record(path)
    res = invoke("report", str(path))
    assert res.exit_code == 0, res.output
    assert (rec.gpu or "GPU") in res.output
    for p in rec.points:
        assert f"cudalab {p.family}" in res.output
        for r in p.results:
            assert r.variant in res.output
    md = invoke("report", str(path), "--markdown")
    assert md.exit_code == 0 and md.output.count("| variant |") == len(rec.points)


def test_report_refuses_what_is_not_a_run_record(invoke, tmp_path):
    bench = Path(__file__).parent.parent / "docs" / "benchmarks" / "nvidia-h200.json"
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "new.json").write_text(json.dumps({"schema_version": 99, "points": []}))
    for path, fragment in ((bench, "not a cudalab run record"), (tmp_path / "bad.json", "not JSON"),
                           (tmp_path / "new.json", "newer"), (tmp_path / "none.json", "no such file")):
        res = invoke("report", str(path))
        assert res.exit_code == 2 and fragment in res.output and len(res.output.strip().splitlines()) == 1


def test_v1_files_load_as_records():
    sweep = load_record(RUNS / "v1-synthetic-reduce-block-sweep.json")
    assert sweep.schema_version == 1 and [p.block for p in sweep.points] == ["128", "256", "512"]
    single = load_record(RUNS / "v1-synthetic-transpose.json")
    assert len(single.points) == 1 and single.points[0].metric == "bandwidth" and single.points[0].roofline


# --- the documented format -------------------------------------------------------------------------

_TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float), "boolean": bool,
          "null": type(None)}


def _check(value, schema: dict, root: dict, path: str = "$") -> list[str]:
    """A small validator for the subset of JSON Schema that docs/result-schema.json uses (jsonschema is
    optional): $ref, type, const, enum, oneOf, required, properties, additionalProperties, items."""
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    if "oneOf" in schema:
        ok = [s for s in schema["oneOf"] if not _check(value, s, root, path)]
        return [] if len(ok) == 1 else [f"{path}: matches {len(ok)} of oneOf"]
    if "const" in schema and value != schema["const"]:
        return [f"{path}: {value!r} != {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{path}: {value!r} not in {schema['enum']}"]
    types = schema.get("type")
    if types:
        types = [types] if isinstance(types, str) else types
        ok = any(isinstance(value, _TYPES[t]) and not (t in ("integer", "number") and isinstance(value, bool))
                 for t in types)
        if not ok:
            return [f"{path}: {type(value).__name__} is not {types}"]
    errors = []
    if isinstance(value, dict):
        errors += [f"{path}: {k} missing" for k in schema.get("required", ()) if k not in value]
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                errors += _check(v, props[k], root, f"{path}.{k}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: unexpected {k}")
    if isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            errors += _check(v, schema["items"], root, f"{path}[{i}]")
    return errors


def validate(data: dict) -> list[str]:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    try:
        import jsonschema
    except ImportError:
        return _check(data, schema, schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


@pytest.mark.parametrize("path", FIXTURES, ids=[f.name for f in FIXTURES])
def test_fixtures_match_the_schema(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("schema_version") != 2:  # an older file: what it loads as must be a valid version-2 record
        data = json.loads(json.dumps(dict(load_record(path).to_dict(), schema_version=2)))
    assert validate(data) == []
    assert _check(data, json.loads(SCHEMA.read_text()), json.loads(SCHEMA.read_text())) == []


def test_written_records_match_the_schema_and_round_trip(tmp_path):
    rec = record([row("naive", noisy(3.9, 12, 1)), Result("bad", "kernel", C.Status.INCORRECT, reason="x",
                                                          max_error=float("nan"), extra={"registers": 32})])
    path = save(tmp_path, "r.json", rec)
    data = json.loads(Path(path).read_text())
    assert validate(data) == [] and data["points"][0]["results"][1]["max_error"] == "nan"
    assert load_record(path).points[0].results[0] == rec.points[0].results[0]
    broken = dict(data, points=[dict(data["points"][0], metric="speed")])
    assert validate(broken) and _check(broken, json.loads(SCHEMA.read_text()), json.loads(SCHEMA.read_text()))
    # the worker's telemetry as a real worker sends it in its bye (its own peak memory among it)
    tele = {"source": "nvml", "polls": 192, "sm_mhz": 1980, "worker_peak_rss_mib": 372.7}
    assert validate(dict(data, device=dict(data["device"], telemetry=tele))) == []
    assert validate(dict(data, device=dict(data["device"], telemetry=dict(tele, worker_peak_rss_mib="372 MiB"))))


# --- plots ------------------------------------------------------------------------------------------

needs_mpl = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib not installed")


def _plot_cases():
    # Every fixture as a PNG; SVG (the same figure through another backend) for a plain run and a sweep.
    for f in FIXTURES:
        yield pytest.param(f, ".png", id=f"{f.name}-.png")
    for f in (RUNS / "nvidia-h200-transpose.json", RUNS / "v1-synthetic-reduce-block-sweep.json"):
        yield pytest.param(f, ".svg", id=f"{f.name}-.svg")


@needs_mpl
@pytest.mark.parametrize("path, suffix", list(_plot_cases()))
def test_report_plot(invoke, tmp_path, path, suffix):
    out = tmp_path / f"plot{suffix}"
    res = invoke("report", str(path), "--plot", str(out))
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 5000


@needs_mpl
def test_sweeps_are_recognised():
    from cudalab.report import plot

    assert plot.sweep_axis(load_record(RUNS / "v1-synthetic-reduce-block-sweep.json").points) == "block"
    assert plot.sweep_axis(load_record(RUNS / "v1-synthetic-transpose.json").points) is None


@needs_mpl
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_compare_plot(invoke, tmp_path, base, suffix):
    new = save(tmp_path, "h100.json", record([row("naive", noisy(5.5, 40, 41), 3000.0)], device=H100, roof_gbs=3000.0))
    out = tmp_path / f"cmp{suffix}"
    res = invoke("compare", base, new, "--plot", str(out))
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 5000


@needs_mpl
def test_plot_record_helper_for_family_commands(tmp_path):
    from cudalab.report import plot

    plot.plot_record(load_record(RUNS / "v1-synthetic-transpose.json"), tmp_path / "run.png")
    assert (tmp_path / "run.png").stat().st_size > 5000


def test_missing_matplotlib_is_one_line_before_any_work(invoke, tmp_path, base, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    for args in (["report", "/no/such/run.json"], ["compare", base, "/no/such/run.json"]):
        res = invoke(*args, "--plot", str(tmp_path / "x.png"))
        assert res.exit_code == 2, res.output
        assert res.output.strip() == "cudalab: --plot needs matplotlib: pip install 'cudalab[plot]'"
    res = invoke("report", base, "--plot", str(tmp_path / "x.gif"))
    assert res.exit_code == 2 and ".png, .svg or .pdf" in res.output


@pytest.mark.parametrize("lines, rules", [(5, "x"), ("abc", {"a": 1}), ([1, 2], [None]), ({"a": 1}, 7),
                                          ([{"line": "x", "samples": "many"}], [{"speedup": "big"}]),
                                          ([{"line": 3, "stalls": [[1, 2, 3]]}], [{"name": 5}])])
def test_saved_ncu_lines_of_the_wrong_type_render_without_them(invoke, tmp_path, lines, rules):
    data = json.loads((RUNS / "nvidia-h200-transpose.json").read_text())
    data["points"][0]["results"][1]["extra"] |= {"ncu_lines": lines, "ncu_rules": rules, "ncu_kernel": "k"}
    path = tmp_path / "j.json"
    path.write_text(json.dumps(data))
    res = invoke("report", str(path))
    assert res.exit_code == 0 and "Traceback" not in res.output and "naive" in res.output


def test_rows_timed_by_different_methods_are_unsure_not_slower(invoke, tmp_path):
    """A ~20 µs kernel batched in one run (launches 2..N find a warm L2) and timed alone in the next reads ~10%
    slower with nothing changed (an H200's reduce modern: 18.5 µs by batch, 20.7 by events): no verdict, and the
    gate does not fail on it; the same change timed the same way is slower."""
    def timed(samples, how: str) -> Result:
        r = row("modern", samples)
        return replace(r, extra={"timed_by": how, **({"batch": 11} if how == "batch" else {})})

    a = save(tmp_path, "a.json", record([timed(noisy(0.0185, 40, 1), "batch")]))
    b = save(tmp_path, "b.json", record([timed(noisy(0.0207, 40, 2), "events")]))
    [r] = C.compare(load_record(a), load_record(b)).rows
    assert r.verdict.verdict == C.UNSURE and r.verdict.ratio == pytest.approx(1.12, abs=0.01)
    assert r.verdict.note.startswith("timed by batch in A, events in B: rerun both with --launch events")
    assert invoke("compare", a, b, "--fail-on", "slower:5%").exit_code == 0
    same_way = save(tmp_path, "c.json", record([timed(noisy(0.0207, 40, 3), "batch")]))
    assert C.compare(load_record(a), load_record(same_way)).rows[0].verdict.verdict == C.SLOWER
    old = save(tmp_path, "old.json", record([replace(row("modern", noisy(0.0207, 40, 4)), extra={"batch": 11})]))
    assert C.compare(load_record(a), load_record(old)).rows[0].verdict.verdict == C.SLOWER   # no timed_by: batch
