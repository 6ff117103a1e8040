"""``cudalab report`` of a run of many points (issue 57: 100,000 points took over 60 s): the work is counted, not
timed. Above :data:`cudalab.report.POINTS_LAYOUT_MAX` points a report prints one long table per group of points
sharing family, metric and protocol, so the number of prints and tables does not grow with the points; reading
a record checks its samples a list at a time, not one call each."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from cudalab import report
from cudalab.records import fields
from cudalab.records.results import RunRecord, load_record
from cudalab.report import core, saved
from cudalab.report.console import CleanConsole

SWEEP = Path(__file__).parent / "data" / "runs" / "nvidia-h200-transpose-sweep.json"


def _record(points: int) -> RunRecord:
    """A ``-D TILE=0..points-1`` sweep of the committed H200 sweep's first point (what scripts/bench_report.py
    makes, as objects)."""
    rec = load_record(SWEEP)
    base = rec.points[0]
    return replace(rec, points=tuple(replace(base, defines=(("TILE", str(i)),)) for i in range(points)))


class Counting(CleanConsole):
    """A console into a string that counts its prints and the run tables it renders."""

    def __init__(self) -> None:
        super().__init__(file=io.StringIO(), width=400, soft_wrap=False, highlight=False)
        self.prints = 0
        self.tables = 0

    def print(self, *objects, **kw):  # noqa: ANN002, ANN003
        self.prints += 1
        self.tables += sum(isinstance(o, report.grid.Grid) for o in objects)
        super().print(*objects, **kw)


def test_a_record_above_the_limit_prints_in_a_number_of_calls_that_does_not_grow_with_its_points():
    n = report.POINTS_LAYOUT_MAX + 1000
    con = Counting()
    report.print_record(con, _record(n), "run.json")
    text = con.file.getvalue()
    assert con.tables == 1 and con.prints <= 5, (con.tables, con.prints)  # one table per point: 2,000 and 2,000+
    assert f"{n:,} points: shown as one table per family and timing protocol" in text
    assert text.count("roofline 4,108 GB/s") == 1  # a roofline all points share: said once, not once a point
    assert f"-DTILE={n - 1} " in text and text.count(" naive ") == n and text.count(" bankopt ") == n  # every row


def test_up_to_the_limit_and_when_asked_every_point_has_its_own_table(monkeypatch):
    monkeypatch.setattr(saved, "POINTS_LAYOUT_MAX", 3)
    for n, layout, tables in ((3, None, 3), (4, None, 1), (4, "points", 4), (2, "long", 1)):
        con = Counting()
        report.print_record(con, _record(n), "run.json", layout)
        assert con.tables == tables, (n, layout, con.tables)
        assert ("points: shown as one table" in con.file.getvalue()) == (layout is None and n > 3)


def test_points_of_another_protocol_or_family_start_a_table_of_their_own():
    rec = _record(6)
    hot = dict(rec.points[0].protocol, flush_l2=False)
    pts = rec.points[:2] + tuple(replace(p, protocol=hot) for p in rec.points[2:4]) + tuple(
        replace(p, family="copy") for p in rec.points[4:])
    assert [len(g) for g in core.point_groups(pts)] == [2, 2, 2]
    con = Counting()
    report.print_record(con, replace(rec, points=pts), "run.json", "long")
    text = con.file.getvalue()
    assert con.tables == 3 and "cudalab copy: 2 points" in text and "hot L2 (--hot)" in text


def test_points_with_rooflines_of_their_own_name_them_each():
    rec = _record(3)
    pts = tuple(replace(p, roofline=replace(p.roofline, gbs=1000.0 + i)) for i, p in enumerate(rec.points))
    con = Counting()
    report.print_record(con, replace(rec, points=pts), "run.json", "long")
    text = con.file.getvalue()
    assert [f"-DTILE={i}: roofline {1000 + i:,} GB/s" in text for i in range(3)] == [True] * 3


def test_reading_a_record_checks_its_samples_a_list_at_a_time(tmp_path, monkeypatch):
    data = json.loads(SWEEP.read_text())
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    rows = sum(len(p["results"]) for p in data["points"])
    samples = sum(len(r["stats"]["samples"]) for p in data["points"] for r in p["results"] if r.get("stats"))
    calls = []
    real = fields.saved_time
    monkeypatch.setattr(fields, "saved_time", lambda x, what: calls.append(what) or real(x, what))
    load_record(path)
    assert samples > 5 * rows and len(calls) <= 5 * rows  # median, iqr, min, max, mean; not one per sample
    data["points"][0]["results"][1]["stats"]["samples"][3] = -1.0  # a bad sample is still named
    path.write_text(json.dumps(data))
    with pytest.raises(fields.UsageError, match="'stats.samples' must be a time in ms, at least 0; got -1.0"):
        load_record(path)


def test_report_help_names_the_limit(invoke):
    assert f"{report.POINTS_LAYOUT_MAX:,} points" in invoke("report", "--help").output
