"""Sweeps, --layout long, progress and the Python API on the CPU (a fake device where a run is needed)."""

from __future__ import annotations

import io
import json
import sys

import pytest
from click.testing import CliRunner

import cudalab
from cudalab.report import progress
from cudalab.worker import executor as runner
from cudalab.session import sweep
from cudalab.catalog import family
from cudalab.cli import cli
from cudalab.errors import GpuUnavailableError, UsageError
from cudalab.families import load
from cudalab.records.results import RunRecord


def requests_for(name: str, **kw):
    spec = family(name)
    fam = load(spec.module)
    base = sweep.base_request(spec, fam, variants=kw.pop("variants", None))
    defines = kw.pop("defines", ())
    options = kw.pop("options", {})
    return sweep.requests(spec, base, sweep.axes(spec, fam, options=options, defines=defines, **kw))


# --- cross products --------------------------------------------------------------------------------

def test_cross_product_of_every_axis():
    reqs = requests_for("reduce", n="1k,4k", dtype="float32,float64", block="128,256", defines=[("X", "1,2")])
    assert len(reqs) == 16
    points = {(r.n, r.dtype, r.block, dict(r.defines)["X"]) for r in reqs}
    assert len(points) == 16 and ("4k", "float64", "256", "2") in points
    assert [r.block for r in reqs[:2]] == ["128", "256"]  # block varies fastest


def test_family_int_option_as_a_list():
    reqs = requests_for("matmul", n="64", options={"tile": "8,16,32"})
    assert [dict(r.options)["tile"] for r in reqs] == [8, 16, 32]
    with pytest.raises(UsageError, match="--tile 'x' is not an int"):
        requests_for("matmul", options={"tile": "8,x"})


def test_default_is_one_point_with_option_defaults():
    reqs = requests_for("matmul")
    assert len(reqs) == 1 and dict(reqs[0].options)["tile"] == 32 and reqs[0].n is None


@pytest.mark.parametrize("kw, fragment", [
    ({"dtype": "float32,float16"}, "no dtype 'float16'"),
    ({"n": "1k,,4k"}, "empty entry"),
    ({"block": "32,"}, "empty entry"),
])
def test_bad_axes(kw, fragment):
    with pytest.raises(UsageError, match=fragment):
        requests_for("reduce", **kw)


def test_shapes_sweep():
    reqs = requests_for("transpose", shape="64x32,32x64")
    assert [r.shape for r in reqs] == ["64x32", "32x64"]


def test_point_where_nothing_fits_is_kept_when_another_can_run():
    # tiled-32x8 needs block_x % block_y == 0: 32x8 fits, 24x16 does not
    reqs = requests_for("transpose", n="64", block="32x8,24x16", variants="tiled-32x8")
    plans = sweep.plan_points(reqs)
    assert [len(p.variants) for p in plans] == [1, 1]
    assert plans[0].blocked is None and "block_x % block_y" in str(plans[1].blocked)
    with pytest.raises(UsageError, match="block_x % block_y"):
        sweep.plan_points(reqs[1:])
    with pytest.raises(UsageError, match="not a size"):
        sweep.plan_points(requests_for("transpose", n="64,big"))


# --- the command with a fake device -----------------------------------------------------------------

@pytest.fixture
def fake_device(fake_workers, tmp_path, monkeypatch):
    """Fake GPU workers (every row passes at 1 ms, or is skipped by its launch rules); returns ``ops()``:
    the operations the workers were sent."""
    log = tmp_path / "ops.log"
    monkeypatch.setenv("FAKE_WORKER_LOG", str(log))
    use = fake_workers({})
    use.ops = lambda: log.read_text().split() if log.exists() else []
    return use


def test_sweep_one_table_per_point_and_json_holds_every_point(fake_device, tmp_path):
    out = tmp_path / "s.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "64,96", "--block", "32x8,24x16", "--variant",
                                   "naive,tiled-32x8", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stdout.count("cudalab transpose --block") == 4
    data = json.loads(out.read_text())
    assert [(p["problem"]["dims"][0], p["block"]) for p in data["points"]] == [
        (64, "32x8"), (64, "24x16"), (96, "32x8"), (96, "24x16")]
    skipped = data["points"][1]["results"][1]
    assert skipped["variant"] == "tiled-32x8" and skipped["status"] == "skipped" and "block_x % block_y" in skipped["reason"]
    # one worker; it said bye and ends by itself (the table does not wait for its context's tear-down)
    assert len(fake_device.started) == 1 and fake_device.started[0].proc.wait(timeout=5) == 0


def test_layout_long_is_one_table_with_a_point_column(fake_device):
    res = CliRunner().invoke(cli, ["reduce", "--n", "1k,2k", "--variant", "interleaved", "--dtype",
                                   "float32,int32", "--layout", "long"])
    assert res.exit_code == 0, res.output
    assert "4 points" in res.stdout and res.stdout.count(" point ") == 1
    for label in ("1024 float32", "1024 int32", "2048 float32", "2048 int32"):
        assert label in res.stdout


def test_define_sweep(fake_device, tmp_path):
    out = tmp_path / "d.json"
    res = CliRunner().invoke(cli, ["copy", "--n", "64", "--variant", "vec4", "-D", "UNROLL=2,4", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert [p["defines"] for p in json.loads(out.read_text())["points"]] == [[["UNROLL", "2"]], [["UNROLL", "4"]]]


def test_progress_is_one_line_per_variant_when_stderr_is_not_a_tty(fake_device):
    res = CliRunner().invoke(cli, ["transpose", "--n", "64", "--block", "32x8,16x16", "--variant", "naive"])
    assert res.exit_code == 0
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert lines == ["  [1/2 64x64 float32 block=32x8] transpose/naive: passed 1.0000 ms",
                     "  [2/2 64x64 float32 block=16x16] transpose/naive: passed 1.0000 ms"]


def test_quiet_prints_no_progress(fake_device):
    res = CliRunner().invoke(cli, ["transpose", "--n", "64", "--variant", "naive", "--quiet"])
    assert res.exit_code == 0 and res.stderr == "" and "naive" in res.stdout


def test_interrupt_in_a_sweep_keeps_earlier_points(fake_device, tmp_path):
    fake_device({"naive@96": "sigint"})  # Ctrl-C while the second point runs
    out = tmp_path / "i.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "64,96", "--variant", "naive", "--json", str(out)])
    assert res.exit_code == 130
    data = json.loads(out.read_text())
    assert data["incomplete"] and len(data["points"]) == 2 and data["points"][0]["results"]
    assert not data["points"][1]["results"]


# --- progress ---------------------------------------------------------------------------------------

class Tty(io.StringIO):
    def isatty(self):
        return True


def test_for_stderr_picks_bar_lines_or_nothing():
    assert type(progress.for_stderr(stream=io.StringIO())) is progress.Lines
    assert type(progress.for_stderr(stream=Tty())) is progress.Bar
    assert type(progress.for_stderr(quiet=True, stream=Tty())) is progress.Observer


def test_bar_runs_through_a_sweep_and_leaves_nothing_behind():
    stream = Tty()
    bar = progress.Bar(stream, delay_s=0.0)
    bar.start(4, "transpose")
    for i in range(2):
        bar.point(i, 2, f"{64 * (i + 1)}")
        for v in ("naive", "+mine"):
            bar.stage(v, "compiling")
            bar.stage(v, "running")
            bar.result(runner.Result(v, "kernel", runner.PASSED))
    assert bar.progress.tasks[0].completed == 4 and bar.progress.tasks[0].total == 4
    bar.close()
    bar.close()  # twice is harmless


def test_short_runs_show_no_bar():
    stream = Tty()
    bar = progress.Bar(stream, delay_s=60)
    bar.start(1, "copy")
    bar.result(runner.Result("naive", "kernel", runner.PASSED))
    bar.close()
    assert stream.getvalue() == ""


# --- the Python API ---------------------------------------------------------------------------------

def test_import_cudalab_is_light_and_run_is_lazy():
    import subprocess

    code = "import sys, cudalab; f = cudalab.run; print('pycuda' in sys.modules, 'click' in sys.modules, f.__module__)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.split() == ["False", "False", "cudalab.api"], proc.stderr


def test_api_without_gpu_raises_the_one_line_gpu_error(fake_workers):
    fake_workers({"_open": "error"})
    with pytest.raises(GpuUnavailableError) as exc:
        cudalab.run("transpose", n=64)
    assert "\n" not in str(exc.value)


def test_api_refuses_bad_input_before_the_gpu(monkeypatch):
    from cudalab.worker import gpu

    monkeypatch.setattr(gpu, "Device", lambda index=0: pytest.fail("the GPU was opened"))
    with pytest.raises(UsageError, match="no variant"):
        cudalab.run("transpose", variants=["nope"])
    with pytest.raises(UsageError, match="no such file"):
        cudalab.run("transpose", add="does/not/exist.cu:k")


def test_api_sweep_returns_a_record_and_prints_nothing(fake_device, capsys):
    rec = cudalab.run("transpose", variants=["naive", "tiled-32x8"], n=[64, 96], block=[(32, 8), "16x16"])
    assert isinstance(rec, RunRecord) and len(rec.points) == 4
    assert [p.block for p in rec.points] == ["32x8", "16x16", "32x8", "16x16"]
    assert capsys.readouterr() == ("", "")
    rows = rec.to_rows()
    assert len(rows) == 8 and rows[0]["variant"] == "naive" and rows[0]["size"] == "64x64"
    assert {"point", "dtype", "status", "median_ms", "gbs", "max_error", "block", "grid"} <= set(rows[0])
    one = cudalab.run("matmul", variants="naive", n=64, tile=[8, 16], defines={"X": [1, 2]})
    assert len(one.points) == 4 and one.to_rows()[0]["tile"] == 8 and one.to_rows()[0]["-DX"] == "1"


def test_to_pandas_without_pandas_is_one_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    rec = RunRecord(cudalab="x", command=(), started=0.0, device={}, points=())
    with pytest.raises(ImportError, match="^RunRecord.to_pandas needs pandas: pip install pandas$"):
        rec.to_pandas()


def test_to_pandas_with_pandas(fake_device):
    pd = pytest.importorskip("pandas")
    df = cudalab.run("copy", variants="naive", n=[64, 128]).to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df["size"]) == ["64x64", "128x128"]


def test_points_of_one_size_share_one_roofline(fake_device):
    rec = cudalab.run("transpose", variants="naive", n=[64, 96], block=["32x8", "16x16"])
    assert fake_device.ops().count("roofline") == 2  # one per size, not per point
    assert all(p.roofline and p.roofline.gbs == 200.0 and p.results[0].pct_roofline == 50.0 for p in rec.points)
