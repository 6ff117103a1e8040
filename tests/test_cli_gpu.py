"""The family commands end to end on a GPU: tables, JSON with raw samples, block sweeps, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent


def cudalab(*args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "cudalab", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=path), timeout=600)


def test_transpose_bankopt_json_has_raw_samples_and_environment(tmp_path):
    out = tmp_path / "t.json"
    res = cudalab("transpose", "--variant", "bankopt", "--n", "4096", "--json", str(out), "--csv", str(tmp_path / "t.csv"))
    assert res.returncode == 0, res.stderr
    assert "bankopt" in res.stdout and "GB/s" in res.stdout and "roofline" in res.stdout
    data = json.loads(out.read_text())
    point = data["points"][0]
    row = point["results"][0]
    assert row["status"] == "passed" and len(row["stats"]["samples"]) == row["stats"]["n"] >= 10
    assert data["device"]["name"] and data["device"]["driver_version"] and point["roofline"]["dtod_gbs"] > 0
    assert (tmp_path / "t.csv").read_text().splitlines()[1].startswith("bankopt,kernel,passed")


def test_sweep_over_n_and_dtype_with_long_layout(tmp_path):
    out = tmp_path / "long.json"
    res = cudalab("reduce", "--n", "1000,2^20", "--dtype", "float64,int32", "--variant", "interleaved,modern",
                  "--layout", "long", "--no-roofline", "--budget", "0.05", "--json", str(out))
    assert res.returncode == 0, res.stderr
    assert "4 points" in res.stdout and res.stdout.count("interleaved") == 4
    points = json.loads(out.read_text())["points"]
    assert [(p["problem"]["dims"][0], p["problem"]["dtype"]) for p in points] == [
        (1000, "float64"), (1000, "int32"), (2**20, "float64"), (2**20, "int32")]


def test_block_sweep_prints_one_table_per_block(tmp_path):
    out = tmp_path / "sweep.json"
    res = cudalab("reduce", "--n", "2^20", "--variant", "interleaved,modern", "--block", "128,256,1024",
                  "--no-roofline", "--json", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("cudalab reduce --block") == 3
    sweep = json.loads(out.read_text())["points"]
    assert [s["block"] for s in sweep] == ["128", "256", "1024"]
    assert all(r["status"] == "passed" and r["block"] == s["block"] for s in sweep for r in s["results"])


def test_a_wrong_kernel_is_a_row_and_exit_1(tmp_path):
    # a define that breaks one variant's result must not take the other down
    res = cudalab("transpose", "--variant", "tiled-32x8,naive", "--n", "256", "-D", "ROWS=16", "--no-roofline")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "incorrect" in res.stdout and "passed" in res.stdout


def test_matmul_show_prints_the_9x9_exercise():
    res = cudalab("matmul", "--variant", "tiled", "--n", "9", "--tile", "3", "--show", "--no-roofline")
    assert res.returncode == 0, res.stderr
    assert "3x3" in res.stdout and "A (9x9)" in res.stdout and "--- tiled" in res.stdout


def test_energy_gives_each_row_its_sustained_power_and_work_per_joule(tmp_path):
    pytest.importorskip("pynvml")
    out = tmp_path / "e.json"
    res = cudalab("copy", "--n", "8192", "--variant", "naive,block", "--energy", "--no-roofline", "--json", str(out))
    assert res.returncode == 0, res.stderr
    assert "W busy" in res.stdout and "GB/J" in res.stdout
    for row in json.loads(out.read_text())["points"][0]["results"]:
        e = row["extra"]
        assert 20 < e["sustained_w"] < 2000 and e["energy_span_s"] >= 1.0, e   # a board's power, over a second
        assert e["energy_mj_per_launch"] == pytest.approx(e["sustained_w"] * row["stats"]["median"])
        assert e["gb_per_j"] == pytest.approx(row["gbs"] / e["sustained_w"], rel=1e-6)


#: Another process with a CUDA context, computing until killed (CuPy: a different CUDA stack than ours).
BUSY = """
import time, cupy
a = cupy.ones(1 << 22, dtype=cupy.float32)
float(a.sum())
print("ready", flush=True)
while True:
    a *= 1.0000001
    cupy.cuda.Device().synchronize()
    time.sleep(0.001)
"""


def test_a_second_process_on_the_gpu_is_warned_about_and_exclusive_refuses(tmp_path, gpu_alone):
    pytest.importorskip("pynvml")
    pytest.importorskip("cupy")
    alone = cudalab("copy", "--variant", "naive", "--n", "4096", "--no-roofline", "--budget", "0.1")
    assert alone.returncode == 0 and "another process" not in alone.stdout + alone.stderr  # nothing else yet
    busy = subprocess.Popen([sys.executable, "-c", BUSY], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout.readline().strip() == "ready"
        out = tmp_path / "r.json"
        res = cudalab("copy", "--variant", "naive", "--n", "4096", "--no-roofline", "--budget", "0.1", "--json", str(out))
        text = res.stdout + res.stderr
        assert res.returncode == 0, text
        assert "WARNING: another process (pid" in text and "naive !" in text
        row = json.loads(out.read_text())["points"][0]["results"][0]
        assert row["extra"]["other_process"]
        ex = cudalab("copy", "--variant", "naive", "--n", "4096", "--exclusive")
        assert ex.returncode == 2 and "--exclusive: another process is computing" in ex.stderr, ex.stdout + ex.stderr
        assert "Traceback" not in ex.stderr
    finally:
        busy.kill()
        busy.wait()
