"""The ceilings measured once per GPU and clock and cached (``cudalab roofline --measure``): the tensor ceiling is
the best of the mma.sync probe and a GEMM, named by what reached it; the memory streams ride along; old cache
files still read. The GPU side is tests/test_ceilings_gpu.py and scripts/roofline_h200.sh."""

from __future__ import annotations

import json

import pytest

from cudalab.inspect import ceilings as cache
from cudalab.inspect.ceilings import Ceilings
from cudalab.records.results import Roofline
from cudalab.worker import ceilings


def probe(tensor):
    return Ceilings(gpu="NVIDIA H200", sm_clock_mhz=1980, fma_gflops=61000.0, tensor_gflops=tensor)


@pytest.fixture
def measured(monkeypatch):
    """measure_all with the GPU parts played: the probes, the GEMM and the memory roofline."""
    from cudalab.worker import executor

    def run(probe_tensor, gemm):
        monkeypatch.setattr(ceilings, "measure", lambda device: probe(probe_tensor))
        monkeypatch.setattr(ceilings, "best_gemm", lambda device, n: gemm)
        monkeypatch.setattr(executor, "measure_roofline", lambda device, nbytes, proto: Roofline(
            4100.0, "memcpy_dtod", 4100.0, read_gbs=4400.0, write_gbs=4300.0))
        dev = type("D", (), {"mem_info": lambda self: (100 << 30, 140 << 30)})()
        return ceilings.measure_all(dev)

    return run


def test_the_tensor_ceiling_is_the_best_of_the_probe_and_the_gemm_named_by_its_source(measured):
    c = measured(480000.0, (720000.0, "hgemm cublas 8192³ fp16"))
    assert c.tensor_gflops == 720000.0 and c.tensor_source == "hgemm cublas 8192³ fp16" and c.mma_gflops == 480000.0
    assert (c.copy_gbs, c.read_gbs, c.write_gbs) == (4100.0, 4400.0, 4300.0) and c.memory_gbs == 4400.0
    assert c.fma_gflops == 61000.0  # the fp32 ceiling is the FFMA probe's, never a GEMM's
    slower = measured(480000.0, (300000.0, "hgemm cublas 8192³ fp16"))
    assert slower.tensor_gflops == 480000.0 and slower.tensor_source == "mma.sync probe"
    none = measured(480000.0, (None, "no GEMM row passed"))
    assert none.tensor_gflops == 480000.0 and none.tensor_source == "mma.sync probe"


def test_the_cache_keeps_every_figure_and_reads_files_written_before_them(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path))
    c = Ceilings("NVIDIA H200", 1980, 61000.0, 720000.0, "hgemm cublas 8192³ fp16", 480000.0, 4100.0, 4400.0, 4300.0)
    cache.store(c)
    assert cache.cached("NVIDIA H200", 1980) == c
    assert cache.cached("NVIDIA H200", 1755) is None  # another clock: measured again
    old = cache.cache_file("NVIDIA H100", 1980)
    old.write_text(json.dumps({"gpu": "NVIDIA H100", "sm_clock_mhz": 1980, "fma_gflops": 60000.0,
                               "tensor_gflops": 600000.0}))
    got = cache.cached("NVIDIA H100", 1980)
    assert got.tensor_source == "mma.sync probe" and got.copy_gbs is None and got.memory_gbs is None


def test_describe_names_what_reached_each_ceiling():
    c = Ceilings("NVIDIA H200", 1980, 61000.0, 720000.0, "hgemm cublas 8192³ fp16", 480000.0, 4100.0, 4400.0, 4300.0)
    text = cache.describe(c)
    assert "FP32 FMA 61.0 TFLOP/s (FFMA probe)" in text
    assert "fp16 tensor 720 TFLOP/s (hgemm cublas 8192³ fp16; mma.sync probe 480)" in text
    assert "copy 4,100 GB/s, read stream 4,400 GB/s, write stream 4,300 GB/s" in text


def test_roofline_measure_caches_what_the_worker_measured(invoke, tmp_path, monkeypatch):
    from cudalab.cli import roofline as cmd

    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path))
    c = Ceilings("NVIDIA H200", 1980, 61000.0, 720000.0, "hgemm cublas 8192³ fp16", 480000.0, 4100.0, 4400.0, 4300.0)
    monkeypatch.setattr(cmd, "_measure", lambda device: c)
    res = invoke("roofline", "--measure")
    assert res.exit_code == 0, res.output
    assert "fp16 tensor 720 TFLOP/s" in res.output and "kept in" in res.output
    assert cache.cached("NVIDIA H200", 1980) == c


def test_roofline_without_runs_or_measure_is_one_line(invoke, one_line_exit_2, tmp_path):
    one_line_exit_2(invoke("roofline"), "give RUN.json files")
    one_line_exit_2(invoke("roofline", str(tmp_path / "x.json")), "--out FILE is required")


H200_RUN = "docs/plots/runs/nvidia-h200-matmul-4096-ncu.json"
H200 = Ceilings("NVIDIA H200", 1980, 61000.0, 720000.0, "hgemm cublas 8192³ fp16", 480000.0, 4100.0, 4400.0, 4300.0)


@pytest.fixture
def chart(invoke, tmp_path, monkeypatch):
    """``cudalab roofline`` of the committed H200 matmul run, with this machine's GPU and the worker played;
    returns the output and what was drawn."""
    import os

    from cudalab.cli import roofline as cmd
    from cudalab.report import plot_roofline

    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    drawn, asked = [], []
    monkeypatch.setattr(plot_roofline, "draw", lambda chart, out: drawn.append(chart))

    def run(here, measured=H200, *extra):
        monkeypatch.setattr(cmd, "_gpu_here", lambda device: here)

        def measure(device):
            asked.append(device)
            if isinstance(measured, Exception):
                raise measured
            return measured

        monkeypatch.setattr(cmd, "_measure", measure)
        run_file = os.path.join(os.path.dirname(__file__), "..", H200_RUN)
        res = invoke("roofline", run_file, "-o", str(tmp_path / "m.svg"), *extra)
        assert res.exit_code == 0, res.output
        return res.output, drawn[-1], asked

    return run


def solid(chart_obj):
    return [c.label for c in chart_obj.ceilings if c.measured]


def test_the_chart_measures_missing_ceilings_where_this_machine_has_the_gpu(chart):
    out, drawn, asked = chart("NVIDIA H200")
    assert asked == [0] and "measuring this GPU's ceilings" in out and "datasheet lines drawn" not in out
    assert cache.cached("NVIDIA H200", 1980) == H200 and any("61.0" in label for label in solid(drawn))
    out, _, asked = chart("NVIDIA H200")   # the next chart reads the cache
    assert asked == [0] and "measuring" not in out


@pytest.mark.parametrize("here", [None, "NVIDIA H100 80GB HBM3"])
def test_without_that_gpu_here_one_line_says_how_and_nothing_is_measured(chart, here):
    out, drawn, asked = chart(here)
    assert asked == [] and not solid(drawn)
    lines = [ln for ln in out.splitlines() if "datasheet lines drawn" in ln]
    assert lines == ["NVIDIA H200 at 1980 MHz: no measured ceilings cached, datasheet lines drawn (on that GPU, "
                     "cudalab roofline --measure measures and caches them once)"]


def test_a_failed_measurement_is_one_line_and_the_datasheet_chart(chart):
    from cudalab.errors import GpuError

    out, drawn, _ = chart("NVIDIA H200", GpuError("the worker died"))
    assert "the ceilings could not be measured: the worker died" in out and "datasheet lines drawn" in out
    assert cache.cached("NVIDIA H200", 1980) is None


def test_no_ceilings_measures_nothing(chart):
    out, _, asked = chart("NVIDIA H200", H200, "--no-ceilings")
    assert asked == [] and "datasheet" not in out


def test_this_machines_gpu_is_asked_of_nvml_else_nvidia_smi(monkeypatch):
    import subprocess
    import sys
    from types import SimpleNamespace

    from cudalab.cli import roofline as cmd

    monkeypatch.setitem(sys.modules, "pynvml", None)   # no telemetry extra
    monkeypatch.setattr(subprocess, "run", lambda argv, **kw: SimpleNamespace(returncode=0, stdout="NVIDIA H200\n"))
    assert cmd._gpu_here(0) == "NVIDIA H200"

    def missing(argv, **kw):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(subprocess, "run", missing)
    assert cmd._gpu_here(0) is None
