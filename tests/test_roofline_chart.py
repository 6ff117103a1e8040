"""The measured roofline chart from the committed saved runs (H100/H200): its data model (points,
intensities, ceilings, ladder arrows, sweeps, two GPUs) and the files it writes (PNG, SVG, HTML)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudalab.worker.ceilings import Ceilings
from cudalab.inspect.rooflinechart import build_chart, datasheet_fma_gflops
from cudalab.records.results import load_record

RUNS = Path(__file__).parent / "data" / "runs"
H100_T = RUNS / "nvidia-h100-80gb-hbm3-transpose.json"
H200_T = RUNS / "nvidia-h200-transpose.json"
H100_M = RUNS / "h100-matmul.json"


def rec(path):
    return (path.name, load_record(path))


def test_a_transpose_ladder_is_gbs_under_its_measured_roofline():
    chart = build_chart([rec(H100_T)])
    assert not chart.flops and "host" not in chart.xticks
    run = load_record(H100_T).points[0]
    want = [r for r in run.results if r.kind != "host" and r.gbs]
    assert [p.label for p in chart.points] == [r.variant for r in want]
    assert [p.y for p in chart.points] == [r.gbs for r in want]
    measured = [c for c in chart.ceilings if c.measured]
    assert len(measured) == 1 and measured[0].value == run.roofline.gbs and not measured[0].slope
    assert not any("datasheet" in c.label for c in chart.ceilings)  # measured: no datasheet line beside it
    assert chart.paths == (tuple(range(len(want))),)  # one arrow from each rung to the next


def test_matmul_intensity_is_the_declared_work():
    """2 M N K FLOP over 3 N^2 x 4 bytes at 4096^3: 682.7 FLOP per byte for every variant."""
    chart = build_chart([rec(H100_M)])
    assert chart.flops
    assert all(p.x == pytest.approx(2 * 4096**3 / (3 * 4096**2 * 4), rel=1e-3) for p in chart.points)
    labels = [c.label for c in chart.ceilings]
    assert any("FP32 datasheet 66.9" in x for x in labels)
    assert not any(c.measured for c in chart.ceilings)  # no copy roofline in a matmul run, nothing cached
    assert any("no measured FFMA" in n for n in chart.notes) and any("no memory roofline" in n for n in chart.notes)
    assert chart.xlabel.startswith("declared intensity") and any("declared intensity" in n for n in chart.notes)


def test_measured_ceilings_are_drawn_when_cached():
    m = Ceilings(gpu="NVIDIA H100 80GB HBM3", sm_clock_mhz=1980, fma_gflops=60000.0, tensor_gflops=600000.0,
                 tensor_source="hgemm cublas 8192³ fp16", copy_gbs=3000.0, read_gbs=3200.0, write_gbs=3100.0)
    chart = build_chart([rec(H100_M)], {m.gpu: m})
    measured = {c.label: c.value for c in chart.ceilings if c.measured}
    assert measured == {"FP32 FFMA probe 60.0 TFLOP/s (measured)": 60000.0,
                        "fp16 tensor 600 TFLOP/s (measured: hgemm cublas 8192³ fp16)": 600000.0,
                        "memory 3,200 GB/s (fastest stream, measured, cached)": 3200.0}
    assert not any("datasheet" in c.label for c in chart.ceilings)  # every line measured: none from a datasheet
    assert not any("no measured" in n or "no memory" in n for n in chart.notes)


def test_two_gpus_and_a_sweep():
    two = build_chart([rec(H100_T), rec(H200_T)])
    assert {p.series for p in two.points} == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"} and len(two.paths) == 2
    sweep = build_chart([rec(RUNS / "nvidia-h100-80gb-hbm3-transpose-sweep.json")])
    assert len(sweep.paths) == 4 and all(len(p) == 3 for p in sweep.paths)  # 4 variants x 3 sizes


def test_datasheet_fma():
    assert datasheet_fma_gflops("sm_90", 132, 1980) == pytest.approx(66908.16)
    assert datasheet_fma_gflops("sm_120", 132, 1980) is None


def test_other_families_are_refused(invoke, one_line_exit_2, tmp_path):
    one_line_exit_2(invoke("roofline", str(H100_M), str(RUNS / "nvidia-h200-reduce.json"), "-o",
                           str(tmp_path / "x.png")), "a chart draws one family")


@pytest.mark.parametrize("suffix", [".png", ".svg", ".html"])
def test_the_command_writes_each_format(invoke, tmp_path, suffix):
    out = tmp_path / f"chart{suffix}"
    res = invoke("roofline", str(H100_M), str(H100_T), "-o", str(out))
    assert res.exit_code == 0, res.output
    data = out.read_bytes()
    if suffix == ".png":
        assert data.startswith(b"\x89PNG")
    else:
        text = data.decode()
        assert "<svg" in text
        if suffix == ".html":
            assert text.count("<title>") >= 1 + 6  # the page's and one per point
            assert "regblock on NVIDIA H100 80GB HBM3" in text and "http" not in text.split("<svg", 1)[0]


def _with_ncu_bytes(record, dram: dict[str, float]):
    """``record`` with ncu's DRAM byte counts on the named rows (as a --ncu run keeps them)."""
    from dataclasses import replace

    p = record.points[0]
    rows = tuple(replace(r, extra=dict(r.extra, ncu_dram_bytes=dram[r.variant])) if r.variant in dram else r
                 for r in p.results)
    return replace(record, points=(replace(p, results=rows),))


def test_with_ncus_bytes_each_rung_sits_at_its_own_intensity():
    """FLOPs (2 M N K, the declared work every verified rung does) over the DRAM bytes ncu counted for it."""
    base = load_record(H100_M)
    timed = [r for r in base.points[0].results if r.kind != "host" and r.gflops and r.status.value == "passed"]
    a, b = timed[0], timed[1]
    flop = 2 * 4096**3
    record = _with_ncu_bytes(base, {a.variant: flop / 2.0, b.variant: flop / 64.0})  # 2 and 64 FLOP/byte
    chart = build_chart([("m.json", record)])
    by = {p.label: p for p in chart.points}
    assert by[a.variant].source == "ncu" and by[a.variant].x == pytest.approx(2.0, rel=1e-3)
    assert by[b.variant].source == "ncu" and by[b.variant].x == pytest.approx(64.0, rel=1e-3)
    assert "squares" in chart.xlabel and any("declared intensity" in n for n in chart.notes)  # the rest: declared
    every = _with_ncu_bytes(base, {r.variant: flop / 10.0 for r in timed})
    allncu = build_chart([("m.json", every)])
    assert allncu.xlabel.startswith("measured intensity") and not any("declared" in n for n in allncu.notes)


def test_the_title_is_the_problem_and_the_gpu_never_option_values():
    chart = build_chart([rec(H100_M)])
    assert load_record(H100_M).points[0].label.endswith("tile=32")  # the run's problem has an option value...
    assert chart.title == "matmul 4096x4096x4096 float32 on NVIDIA H100 80GB HBM3"  # ...the title does not
    assert build_chart([rec(H200_T)]).title == "transpose 16384x16384 float32 on NVIDIA H200"
    sweep = build_chart([rec(RUNS / "nvidia-h100-80gb-hbm3-transpose-sweep.json")])
    assert sweep.title == "transpose 4096x4096 to 16384x16384 float32 on NVIDIA H100 80GB HBM3"


def test_an_ncu_record_of_the_same_problem_lends_its_counts(invoke, tmp_path):
    """cudalab roofline RUN.json NCU.json: the ncu record's DRAM bytes place the run's same rows."""
    from dataclasses import replace

    from cudalab.inspect.rooflinechart import is_counts, lend_counts
    from cudalab.records.results import Result, RunPoint, Status

    run = load_record(H100_M)
    p = run.points[0]
    timed = [r for r in p.results if r.kind == "kernel" and r.gflops]
    ncu_rows = tuple(Result(r.variant, "kernel", Status.PASSED, extra={"ncu_dram_bytes": 2 * 4096**3 / 8.0})
                     for r in timed[:2])
    counts = replace(run, points=(RunPoint(family=p.family, metric="none", problem=p.problem, results=ncu_rows),))
    assert is_counts(counts) and not is_counts(run)
    lent = lend_counts(run, [counts])
    placed = {r.variant for r in lent.points[0].results if "ncu_dram_bytes" in r.extra}
    assert placed == {r.variant for r in timed[:2]}
    other = replace(counts, points=(replace(counts.points[0], problem=dict(p.problem, dims=[2048, 2048, 2048])),))
    assert not any("ncu_dram_bytes" in r.extra for r in lend_counts(run, [other]).points[0].results)  # another size
    chart = build_chart([("m.json", lent)])
    assert {pt.label for pt in chart.points if pt.source == "ncu"} == placed
    assert all(pt.x == pytest.approx(8.0, rel=1e-3) for pt in chart.points if pt.source == "ncu")
    path = tmp_path / "ncu.json"
    path.write_text(__import__("json").dumps(counts.to_dict()))
    res = invoke("roofline", str(H100_M), str(path), "-o", str(tmp_path / "c.svg"))
    assert res.exit_code == 0, res.output


def test_two_gpus_of_one_problem_share_one_title():
    assert build_chart([rec(H100_T), rec(H200_T)]).title == (
        "transpose 16384x16384 float32 on NVIDIA H100 80GB HBM3 vs NVIDIA H200")


def test_the_memory_and_tensor_sets_keep_dram_bytes_and_are_told_apart():
    """ncu's DRAM bytes read + written are kept as ncu_dram_bytes (what places a rung); sharing them does not make
    a tensor file read as a memory one."""
    from cudalab import ncu
    from cudalab.ncu.metrics import DRAM_READ, DRAM_WRITE, infer_metric_set

    figures = {DRAM_READ: 3e6, DRAM_WRITE: 1e6}

    class Row:
        duration_ns = 1e3

        def value(self, name):
            return figures.get(name)

    for name in ("memory", "tensor"):
        mset = ncu.resolve_metrics(name)
        assert mset.values(Row())["ncu_dram_bytes"] == 4e6
        assert infer_metric_set(set(mset.metrics)).name == name
    figures.pop(DRAM_WRITE)
    assert ncu.resolve_metrics("memory").values(Row())["ncu_dram_bytes"] is None
