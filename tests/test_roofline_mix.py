"""A row's roofline follows its own traffic: reads at the read stream's rate, writes at the write stream's, pairs
of the two at the copy's (roofline.py); a row above 100% beyond the noise floor is marked, not printed plain."""

from __future__ import annotations

import pytest

from cudalab.bench import Protocol, summarize
from cudalab import roofline as R
from cudalab.families.model import Size, Work
from cudalab.records.results import OVER_ROOFLINE, PASSED, Result, Roofline
from cudalab.report.core import markdown_table
from cudalab.report.runtable import OVER_MARK, over_note, pct_cell

ROOF = Roofline(gbs=4000.0, source="memcpy_dtod", dtod_gbs=4000.0, read_gbs=4400.0, write_gbs=4200.0, floor=0.02)
GB = 1e9


def row(gbs: float, read: float | None, written: float | None, **extra) -> Result:
    more = {} if read is None else {R.READ_KEY: read, R.WRITTEN_KEY: written}
    return Result("v", "kernel", PASSED, gbs=gbs, extra=dict(more, **extra))


def test_a_copy_is_rated_at_the_copy_rate_and_pure_streams_at_their_own():
    assert R.min_seconds(ROOF, GB, GB) == pytest.approx(2 * GB / (4000 * GB))  # a copy: its own measured rate
    assert R.min_seconds(ROOF, GB, 0) == pytest.approx(1 / 4400)
    assert R.min_seconds(ROOF, 0, GB) == pytest.approx(1 / 4200)
    # 3 read, 1 written: one copied pair (2 bytes at the copy rate) and 2 bytes read at the read rate
    assert R.min_seconds(ROOF, 3 * GB, GB) == pytest.approx(2 / 4000 + 2 / 4400)


def test_a_stream_slower_than_the_copy_counts_as_the_copy():
    slow = Roofline(gbs=4000.0, source="memcpy_dtod", dtod_gbs=4000.0, read_gbs=3000.0, write_gbs=None)
    assert R.min_seconds(slow, GB, 0) == pytest.approx(1 / 4000)
    assert R.min_seconds(slow, 0, GB) == pytest.approx(1 / 4000)


def test_a_reading_row_is_rated_against_the_read_stream_not_the_copy():
    # a reduction at the read stream's rate is at 100% (a copy roofline read it as 110%)
    assert R.pct_of(row(4400.0, 1e9, 0), ROOF) == pytest.approx(100.0)
    assert R.pct_of(row(4000.0, 1e9, 1e9), ROOF) == pytest.approx(100.0)  # the copy itself
    assert R.pct_of(row(2000.0, 1e9, 1e9), ROOF) == pytest.approx(50.0)
    # a row saved without its mix (older records, problems that declare none) is rated as a copy
    assert R.pct_of(row(4400.0, None, None), ROOF) == pytest.approx(110.0)


def test_a_row_above_100_beyond_the_floor_is_flagged_and_within_it_is_not():
    within = R.with_roofline(row(4000.0 * 1.015, 1e9, 1e9), ROOF)
    assert within.pct_roofline == pytest.approx(101.5) and OVER_ROOFLINE not in within.extra
    over = R.with_roofline(row(4000.0 * 1.05, 1e9, 1e9), ROOF)
    assert over.pct_roofline == pytest.approx(105.0) and over.extra[OVER_ROOFLINE] == pytest.approx(102.0)
    # rated again against a faster roofline: the flag goes
    again = R.with_roofline(over, Roofline(gbs=5000.0, source="memcpy_dtod", dtod_gbs=5000.0))
    assert OVER_ROOFLINE not in again.extra
    # no floor measured: the default effect (2%)
    bare = Roofline(gbs=4000.0, source="memcpy_dtod", dtod_gbs=4000.0)
    assert R.over_limit(bare) == pytest.approx(102.0)


def test_the_table_marks_a_flagged_row_and_says_why_once():
    over = R.with_roofline(row(4000.0 * 1.05, 1e9, 1e9), ROOF)
    plain = R.with_roofline(row(3000.0, 1e9, 1e9), ROOF)
    text, style = pct_cell(over)
    assert text == f"{OVER_MARK} 105.0" and style
    assert pct_cell(plain) == "75.0"
    assert over_note([plain]) is None
    note = over_note([plain, over])
    assert note.startswith(OVER_MARK) and "noise floor" in note and "102%" in note
    md = markdown_table([plain, over], "bandwidth")
    assert f"| {OVER_MARK} 105.0 |" in md and note in md


def test_work_declares_its_reads_and_writes_with_the_copy_mix_as_default():
    assert (Work(bytes=100).read_bytes, Work(bytes=100).write_bytes) == (50, 50)
    assert (Work(bytes=100, written=0).read_bytes, Work(bytes=100, written=0).write_bytes) == (100, 0)
    from cudalab.families import load

    def mix(name, dims, dtype="float32"):
        w = load(name).work(Size(dims=dims, dtype=dtype))
        return w.read_bytes, w.write_bytes

    assert mix("copy", (64, 32)) == (64 * 32 * 4, 64 * 32 * 4)
    assert mix("transpose", (64, 32)) == (64 * 32 * 4, 64 * 32 * 4)
    assert mix("reduce", (1024,), "float64") == (1024 * 8, 0)
    assert mix("gemv", (64, 32)) == ((64 * 32 + 32) * 4, 64 * 4)


def test_an_own_problem_declares_its_mix_and_an_old_one_keeps_the_copy_mix(tmp_path):
    from cudalab.errors import CatalogError
    from cudalab.problems import adapter

    class Spec:
        work = staticmethod(lambda s: Work(bytes=80, written=8))

    fam = adapter.ProblemFamily.__new__(adapter.ProblemFamily)
    fam.spec, fam.where = Spec(), "p.py"
    fam._call = lambda what, fn, *a: fn(*a)
    fam.size = lambda p: p
    assert fam.work(None) == Work(bytes=80, written=8)
    Spec.work = staticmethod(lambda s: (80, 0))
    assert fam.work(None).written is None and fam.work(None).write_bytes == 40
    Spec.work = staticmethod(lambda s: Work(bytes=80, written=81))
    with pytest.raises(CatalogError, match="written=81 above bytes=80"):
        fam.work(None)


def test_rows_carry_their_families_mix_and_the_roofline_its_streams(monkeypatch):
    from test_runcore import FAST, FakeDevice, good_copy, run
    from cudalab.worker import executor, streams

    seen = {}

    def fake_streams(device, source, nbytes, protocol):
        seen["nbytes"] = nbytes
        return 5000.0, 4500.0

    monkeypatch.setattr(streams, "measure", fake_streams)
    dev = FakeDevice({"copy_block": good_copy, "transpose_naive": lambda out, src, *a: out.data.__setitem__(..., src.data.T)})
    rows = run(dev, family="transpose", variants="naive", n="48")
    r = rows["naive"]
    assert (r.extra[R.READ_KEY], r.extra[R.WRITTEN_KEY]) == (48 * 48 * 4, 48 * 48 * 4)
    roof = executor.measure_roofline(dev, 48 * 48 * 4, FAST)
    assert (roof.read_gbs, roof.write_gbs) == (5000.0, 4500.0) and seen["nbytes"] == 48 * 48 * 4
    assert roof.floor == pytest.approx(0.02)  # never calibrated here: the default effect


def test_the_streams_rate_is_the_bytes_over_the_median(monkeypatch):
    from cudalab.worker import sampling, streams

    class Arr:
        def __init__(self):
            self.freed = False

        def free(self):
            self.freed = True

    made = []

    class Dev:
        def compile(self, src, defines, names):
            return {n: type("K", (), {"launch": lambda self, *a: None})() for n in names}

        def empty(self, shape, dtype):
            made.append(Arr())
            return made[-1]

    times = iter([0.25, 0.5])
    monkeypatch.setattr(streams, "time_case",
                        lambda dev, case, proto: sampling.Timing(summarize([next(times)]), "test"))
    read, write = streams.measure(Dev(), object(), 2**30, Protocol())
    assert read == pytest.approx(2**30 / 0.25e-3 / 1e9) and write == pytest.approx(2**30 / 0.5e-3 / 1e9)
    assert all(a.freed for a in made)
    assert streams.grid_for(2**30) == 2**30 // 16 // (1024 * 4)
