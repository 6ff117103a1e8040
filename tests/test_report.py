"""Rendering without a GPU: the comparison table, header lines, markdown and CSV export."""

from __future__ import annotations

import csv
import io

from rich.console import Console

from cudalab import report
from cudalab.bench import Protocol, summarize
from cudalab.records.results import FAILED, INCORRECT, PASSED, SKIPPED, Result, Roofline

DEVICE = {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "sm_clock_mhz": 1980,
          "mem_clock_mhz": 3201, "l2_bytes": 60 * 2**20, "driver_version": "13.0", "cuda_version": "13.0",
          "driver_release": "580.159.04"}


def rows():
    return [
        Result("host", "host", PASSED, stats=summarize([100.0, 101.0]), gbs=8.0, max_error=0.0),
        Result("naive", "kernel", PASSED, block="32x32", grid="512x512", stats=summarize([4.0, 4.0]), gbs=550.0,
               pct_roofline=12.9, max_error=0.0, extra={"pitch": 16384}),
        Result("fast", "kernel", PASSED, block="16x16", grid="256x256", stats=summarize([1.0, 1.0]), gbs=2200.0,
               pct_roofline=51.7, max_error=0.0, legacy="volatile warp"),
        Result("broken", "kernel", INCORRECT, reason="max error nan > 0 (12 elements unwritten or NaN)",
               stats=summarize([0.5]), max_error=float("nan")),
        Result("big", "kernel", SKIPPED, reason="needs a multiple of 32"),
        Result("cub", "library", FAILED, reason="CuPy is not installed"),
    ]


def render(table) -> str:
    con = Console(file=io.StringIO(), width=250)
    con.print(table)
    return con.file.getvalue()


def test_results_table_shows_rates_speedups_checks_and_reasons():
    text = render(report.results_table(rows(), "bandwidth", (("pitch", "pitch"),)))
    assert "GB/s" in text and "% roofline" in text and "pitch" in text and "16384" in text
    assert "4.00×" in text  # fast over naive (the first GPU row that passed); host rows never count
    assert "fast [legacy]" in text and "cub [ref]" in text
    assert "✗ nan" in text and "incorrect: max error nan" in text
    assert "skipped: needs a multiple of 32" in text and "failed: CuPy is not installed" in text


def test_header_names_gpu_clocks_versions_protocol_and_roofline():
    lines = report.header_lines(DEVICE, "cudalab transpose", "size 16384x16384 · dtype float32", Protocol(),
                                Roofline(4254.0, "memcpy_dtod", 4254.0, 4183.0))
    text = "\n".join(lines)
    for word in ("NVIDIA H200", "1980 MHz", "3201 MHz", "580.159.04", "CUDA 13.0", "16384x16384", "L2 flushed",
                 "roofline 4,254 GB/s"):
        assert word in text, word


def test_flop_rates_are_compared_with_the_library_row():
    res = [Result("dbuf", "kernel", PASSED, gflops=41000.0, stats=summarize([3.3])),
           Result("cublas", "library", PASSED, gflops=50000.0, stats=summarize([2.7]))]
    out = report.pct_column(res, "flops")
    assert round(out[0].pct_roofline, 1) == 82.0 and out[1].pct_roofline == 100.0


def test_markdown_and_csv(tmp_path):
    md = report.markdown_table(rows(), "bandwidth")
    assert md.splitlines()[0].startswith("| variant | block") and "fast (legacy)" in md
    path = tmp_path / "r.csv"
    report.write_csv(path, rows())
    got = list(csv.DictReader(path.open()))
    assert [r["variant"] for r in got] == ["host", "naive", "fast", "broken", "big", "cub"]
    assert got[1]["median_ms"] == "4.0" and got[4]["reason"] == "needs a multiple of 32"


def test_the_problem_line_names_options_as_typed_and_leaves_flags_that_are_off_out():
    # issue 59 objected to `example=False tile=32` in a chart's title; the table's problem line said
    # `example False · tile 32` (a flag at its default, option internals) until this test
    from cudalab.records.results import RunPoint, RunRecord

    point = RunPoint(family="matmul", metric="flops", problem={"dims": [64, 64, 64], "dtype": "float32",
                                                                "options": {"example": False, "tile": 32}})
    on = RunPoint(family="matmul", metric="flops", problem={"dims": [64, 64, 64], "dtype": "float32",
                                                             "options": {"example": True, "tile": 16}})
    rec = RunRecord(cudalab="0", command=("cudalab", "matmul"), started=0.0, device={}, points=(point, on))
    md = report.markdown_record(rec, "r.json")
    assert "size 64x64x64 · dtype float32 · --tile 32" in md
    assert "size 64x64x64 · dtype float32 · --example · --tile 16" in md
    lines = [ln for ln in md.splitlines() if ln.startswith("size ")]
    assert len(lines) == 2 and not any("False" in ln or " example " in ln for ln in lines)


def _printed(fn, *args, **kw) -> list[str]:
    con = Console(file=io.StringIO(), width=250)
    fn(con, *args, **kw)
    return con.file.getvalue().splitlines()


def test_a_run_prints_a_table_a_point_or_one_long_table_spaced_as_before():
    """report: a blank line before each point's table, none before the first long table; a finished run
    (print_run): its point tables back to back, without the protocol line the run printed as it started."""
    from cudalab.records.results import load_record
    from cudalab.report.saved import print_record, print_run

    rec = load_record("tests/data/runs/nvidia-h200-transpose-sweep.json")
    assert len(rec.points) == 3
    lines = _printed(print_record, rec, "sweep.json", "points")
    titles = [i for i, ln in enumerate(lines) if ln.startswith("cudalab transpose")]
    assert len(titles) == 3 and all(lines[i - 1] == "" for i in titles)
    lines = _printed(print_record, rec, "sweep.json", "long")
    titles = [i for i, ln in enumerate(lines) if ln.startswith("cudalab transpose")]
    assert [lines[i] for i in titles] == ["cudalab transpose: 3 points"] and lines[titles[0] - 1] != ""
    assert sum(ln.startswith("speedup = over the first") for ln in lines) == 1
    lines = _printed(print_run, rec)
    titles = [i for i, ln in enumerate(lines) if ln.startswith("cudalab transpose")]
    assert len(titles) == 3 and not any(lines[i - 1] == "" for i in titles[1:])
    assert not any(ln.startswith("timing: CUDA events") for ln in lines)  # the run said it as it started
    assert [ln for ln in _printed(print_run, rec, long=True) if ln.startswith("cudalab transpose")] == [
        "cudalab transpose: 3 points"]
