"""Run and compare tables on a terminal (CPU only): the default view fits 100-120 columns, numbers and
names never split, reasons wrap as text, --wide has every column, and report stays fast on big sweeps."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from cudalab.records import compare as C
from cudalab import report
from cudalab.records.results import load_record

RUNS = Path(__file__).parent / "data" / "runs"
RECORDS = sorted(RUNS.glob("*.json"))


def printed(record, width: int, wide: bool = False) -> str:
    con = Console(file=io.StringIO(), width=width, color_system=None)
    for point in record.points:
        report.print_point(con, record, point, wide=wide)
    return con.file.getvalue()


def table_lines(text: str) -> list[str]:
    """The table's lines: from each header row to the legend."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith(" ") and re.match(r" (#  +)?(point  +)?variant ", line):
            inside = True
        elif inside and not line.startswith(" "):
            inside = False
        if inside:
            out.append(line)
    return out


@pytest.mark.parametrize("width", [80, 100, 120, 160, 200])
@pytest.mark.parametrize("path", RECORDS, ids=[p.name for p in RECORDS])
def test_run_tables_fit_the_terminal_and_never_split_a_number_or_a_name(path, width):
    rec = load_record(path)
    text = printed(rec, width)
    lines = table_lines(text)
    assert lines and all(len(ln) <= width for ln in lines), "\n".join(ln for ln in lines if len(ln) > width)
    flat = "\n".join(lines)
    for point in rec.points:
        for r in point.results:
            assert re.search(rf"(^| ){re.escape(r.variant)}( |$)", flat, re.M), r.variant  # the whole name on a line
            if r.stats and width >= 100:
                assert report._ms(r.stats.median) in flat  # the whole median on a line


def test_the_default_view_fits_120_columns_with_every_default_column():
    rec = load_record(RUNS / "nvidia-h200-transpose.json")
    lines = table_lines(printed(rec, 120))
    head = lines[0]
    for col in ("variant", "block", "grid", "median ms", "± IQR", "GB/s", "% roofline", "speedup", "check", "status"):
        assert col in head, col
    assert "SM MHz" not in head and " n " not in head and "step" not in head and "hidden" not in "".join(lines)
    assert max(len(ln) for ln in lines) <= 120


@pytest.mark.parametrize("width", [80, 120])
def test_energy_columns_asked_for_are_shown_in_the_default_view_and_legends_only_for_shown_columns(width):
    """--energy measured its figures and the default view hid their columns, printing only their legend."""
    import dataclasses

    rec = load_record(RUNS / "nvidia-h200-transpose.json")
    point = rec.points[0]
    energy = {"sustained_w": 420.0, "energy_mj_per_launch": 0.26, "gb_per_j": 5.1}
    rows = tuple(dataclasses.replace(r, extra=r.extra | energy) if r.stats else r for r in point.results)
    rec = dataclasses.replace(rec, points=(dataclasses.replace(point, results=rows),))
    text = printed(rec, width)
    head = "\n".join(table_lines(text)[:2])
    assert "W busy" in head and "GB/J" in head and "--energy: W busy" in text
    assert "SM MHz" not in head and "telemetry (NVML" not in text  # their legend only with --wide's columns
    assert "telemetry (NVML" in printed(rec, 200, wide=True)


def test_reasons_wrap_as_words_on_a_narrow_terminal():
    rec = load_record(RUNS / "nvidia-h200-transpose.json")
    reason = next(r.reason for r in rec.points[0].results if r.reason)
    lines = table_lines(printed(rec, 100))
    words = " ".join(ln.split("  ")[-1].strip() for ln in lines[2:5])
    assert reason.split()[0] in words and all(w in " ".join(lines) for w in reason.split())


def test_wide_shows_every_column_and_the_pipe_is_never_cropped():
    rec = load_record(RUNS / "nvidia-h200-transpose.json")
    head = table_lines(printed(rec, 400, wide=True))[0]
    for col in ("#", " n ", "step", "SM MHz", "mem MHz", "°C"):
        assert col in head, col
    narrow = printed(rec, 80)
    assert "hidden at this width: ± IQR" in narrow


def test_compare_table_wraps_the_note_and_keeps_numbers_whole():
    a, b = load_record(RUNS / "nvidia-h100-80gb-hbm3-transpose.json"), load_record(RUNS / "nvidia-h200-transpose.json")
    c = C.compare(a, b, "A", "B")
    for width in (80, 100, 120):
        text = report.comparison_table(c).render_text(width)
        assert all(len(ln) <= width for ln in text.splitlines()[1:]), text
        assert "0.990" in text and "0.5142" in text and "vec4-band" in text


def test_report_reads_the_catalog_once_and_prints_a_few_times_a_point(tmp_path, monkeypatch, invoke):
    """A 1,000-point sweep took 62 s: the catalog was read for every point (30 ms) and rich's Table
    rendered each (30 ms). Counted here rather than timed: a test never asserts a speed."""
    from cudalab import catalog

    data = json.loads((RUNS / "nvidia-h200-transpose-sweep.json").read_text())
    data["points"] = [dict(data["points"][i % len(data["points"])], block=str(i)) for i in range(200)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(data))
    reads, prints = [], []
    real_load, real_print = catalog.load_catalog, Console.print
    monkeypatch.setattr(catalog, "load_catalog", lambda *a, **k: reads.append(1) or real_load(*a, **k))
    monkeypatch.setattr(Console, "print", lambda self, *a, **k: prints.append(1) or real_print(self, *a, **k))
    res = invoke("report", str(path))
    assert res.exit_code == 0
    assert len(reads) <= 2 and len(prints) <= 4 * 200 + 10, (len(reads), len(prints))


def test_list_and_compile_tables_fit_80_columns_wrapping_words_never_splitting_them():
    rows = [("vec4-band", "transpose_vec4_cf", "TV_TILE=64 TV_ROWS=32 TV_BAND=1 TV_WX=16", 31, 16640, 0, 0, 0, 0, "no"),
            ("naive", "transpose_naive", "–", 12, 0, 0, 0, 0, 0, "yes")]
    cols = ["variant", "kernel", "defines", "registers", "static smem B", "dynamic smem B", "spill st B", "spill ld B",
            "stack B", "cached"]
    table = report.simple_table(cols, rows, title="transpose compiled for sm_90", wrap=("defines",),
                                drop=("cached", "stack B", "spill ld B", "spill st B", "dynamic smem B", "static smem B"))
    text = table.render_text(80)
    lines = text.splitlines()
    assert all(len(ln) <= 80 for ln in lines), text
    for word in ("TV_TILE=64", "TV_ROWS=32", "TV_BAND=1", "TV_WX=16", "transpose_vec4_cf", "16640"):
        assert any(word in ln for ln in lines), (word, text)
    assert "hidden at this width: cached" in text and "16640" in text  # static smem B kept: dropped last
    assert "cached" in report.simple_table(cols, rows, wrap=("defines",)).render_text(400).splitlines()[0]
