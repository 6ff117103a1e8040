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
