"""Outputs never over inputs, and crafted runs are one line (issue 57's class): ``roofline`` refuses an ``-o`` that
is one of the runs it reads (itself or through a link), as ``report --plot`` does; a run whose rates are not rates
(inf, nan, negative, not numbers) is refused by the record's reader for every command that reads it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

RUN = Path(__file__).parent / "data" / "runs" / "nvidia-h200-transpose.json"


@pytest.mark.parametrize("how", ["link", "same", "hardlink"])
def test_roofline_never_writes_over_a_run_it_reads(tmp_path, invoke, one_line_exit_2, how):
    run = tmp_path / ("x.html" if how == "same" else "run.json")
    run.write_bytes(RUN.read_bytes())
    out = {"same": run, "link": tmp_path / "link.svg", "hardlink": tmp_path / "hard.png"}[how]
    if how == "link":
        out.symlink_to(run.name)
    elif how == "hardlink":
        out.hardlink_to(run)
    one_line_exit_2(invoke("roofline", str(run), "-o", str(out)), "which this command also reads")
    assert run.read_bytes() == RUN.read_bytes()


def _set(path: list, value):
    def change(d):
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return change


CRAFTED = {
    "row gbs nan": _set(["points", 0, "results", 0, "gbs"], "nan"),
    "row gbs inf": _set(["points", 0, "results", 0, "gbs"], "inf"),
    "row gbs negative": _set(["points", 0, "results", 0, "gbs"], -5.0),
    "row gflops inf": _set(["points", 0, "results", 0, "gflops"], "inf"),
    "row pct text": _set(["points", 0, "results", 0, "pct_roofline"], "lots"),
    "roofline inf": _set(["points", 0, "roofline", "gbs"], "inf"),
    "roofline zero": _set(["points", 0, "roofline", "gbs"], 0),
    "roofline negative": _set(["points", 0, "roofline", "gbs"], -1),
    "roofline list": _set(["points", 0, "roofline"], [1, 2]),
    "roofline dtod bool": _set(["points", 0, "roofline", "dtod_gbs"], True),
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
@pytest.mark.parametrize("command", ["roofline", "report", "compare"])
def test_a_crafted_run_is_one_line_for_every_reader(tmp_path, invoke, one_line_exit_2, name, command):
    d = json.loads(RUN.read_text())
    CRAFTED[name](d)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    args = {"roofline": ["roofline", str(bad), "-o", str(tmp_path / "c.svg")], "report": ["report", str(bad)],
            "compare": ["compare", str(RUN), str(bad)]}[command]
    one_line_exit_2(invoke(*args), "not a cudalab run record")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_a_gzipped_run_reads_and_a_benchmark_summary_is_named_in_one_line(tmp_path, invoke, one_line_exit_2):
    import gzip

    gz = tmp_path / "run.json.gz"
    gz.write_bytes(gzip.compress(RUN.read_bytes()))
    res = invoke("report", str(gz))
    assert res.exit_code == 0 and "transpose" in res.output, res.output
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (300 << 20)))  # more than cudalab reads, once decompressed
    one_line_exit_2(invoke("report", str(bomb)), "decompresses to more than")
    summary = Path(__file__).parents[1] / "docs" / "benchmarks" / "nvidia-h200.json"
    for command in (["report", str(summary)], ["compare", str(summary), str(RUN)],
                    ["roofline", str(summary), "-o", str(tmp_path / "c.svg")]):
        one_line_exit_2(invoke(*command), "a benchmark or study summary written by a script, not one run")
