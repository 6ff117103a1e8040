"""An outside family through the whole command line on the CPU: the real worker loop (in a thread) on a
fake GPU whose kernels are NumPy, so the run table (✓, % of the roofline), --json, report and compare
are the ones a GPU run prints; and ``cudalab.run`` with a problem defined inline."""

from __future__ import annotations

import numpy as np
import pytest

import cudalab
from cudalab.worker import gpu
from cudalab.instruments import telemetry
from cudalab.records.device import DeviceInfo
from test_problem import drops_last, good, make_family
from test_runcore import FakeDevice


def copy_block(out, src, rows, cols, pitch):
    out.data[...] = src.data


class CliGpu(FakeDevice):
    """A fake GPU for the worker: NumPy kernels, 1 ms a launch."""

    def __init__(self, index=0):
        super().__init__({"dbl_good": good, "dbl_bad": drops_last, "copy_block": copy_block,
                          "copy_vec4": copy_block, "mine": good})
        self.info = DeviceInfo(0, "Fake GPU", (9, 0), 132, 80 * 2**30, 50 * 2**20, 1980, 2619, 5120, "13.0", "13.0")

    def close(self):
        pass

    def compile(self, source, defines, names, **kw):
        return super().compile(source, defines, names)


@pytest.fixture
def fake_gpu(monkeypatch, inline_worker, tmp_path):
    monkeypatch.setattr(telemetry, "import_nvml", lambda: (None, "no NVML"))
    monkeypatch.setattr(gpu, "pci_bus_id", lambda index: "0000:01:00.0")
    monkeypatch.setattr(gpu, "Device", CliGpu)
    monkeypatch.setenv("CUDALAB_PATH", str(tmp_path / "families"))
    make_family(tmp_path / "families")
    return tmp_path


def test_the_run_table_json_report_and_compare_of_an_outside_family(fake_gpu, invoke):
    out = fake_gpu / "run.json"
    res = invoke("dbl", "--n", "4096", "--budget", "0.01", "--json", str(out))
    assert res.exit_code == 1, res.output  # a row came out incorrect: exit 1, as for a built-in
    good_line = next(x for x in res.output.splitlines() if x.strip().startswith("good"))
    bad_line = next(x for x in res.output.splitlines() if x.strip().startswith("bad"))
    assert "✓" in good_line and "100.0" in good_line and "% roofline" in res.output, res.output
    assert "✗" in bad_line
    rep = invoke("report", str(out))
    assert "✓" in rep.output and "✗" in rep.output, rep.output
    cmp = invoke("compare", str(out), str(out))
    assert cmp.exit_code == 0 and "dbl" in cmp.output, cmp.output


def test_a_sweep_of_an_outside_family(fake_gpu, invoke):
    res = invoke("dbl", "--n", "64,128", "--variant", "good", "--budget", "0.01", "--no-roofline")
    assert res.exit_code == 0, res.output
    assert res.output.count("✓") >= 2


def test_a_wrong_reference_refuses_the_run_in_one_line(fake_gpu, invoke, one_line_exit_2):
    make_family(fake_gpu / "families", name="wrongref", reference="lambda s, i: np.zeros(3, np.float32)")
    res = invoke("wrongref", "--n", "64", "--budget", "0.01")
    assert res.exit_code == 2 and "wrongref.py: reference gave shape (3,)" in res.output, res.output
    assert invoke("dbl", "--n", "64", "--variant", "good", "--budget", "0.01", "--no-roofline").exit_code == 0


def test_cudalab_run_takes_a_problem_defined_inline(fake_gpu, monkeypatch):
    monkeypatch.delenv("CUDALAB_PATH")
    cu = 'extern "C" __global__ void dbl_good(float *y, const float *x, int n) { }\n'
    problem = cudalab.Problem(
        name="inline-dbl", dims=("n",), default=256,
        inputs=lambda s, rng: {"x": rng.standard_normal(s.n, dtype=np.float32)},
        outputs=(cudalab.Output("y", lambda s: (s.n,)),), args=("y", "x", "n"),
        reference=lambda s, i: 2 * i["x"], work=lambda s: cudalab.Work(bytes=8 * s.n),
        kernels=(cudalab.Kernel("mine", cu, "dbl_good", block="128"),))
    rec = cudalab.run(problem, budget=0.01, roofline=False)
    (row,) = rec.points[0].results
    assert row.variant == "mine" and row.status == "passed" and row.block == "128"
    assert "CUDALAB_PATH" not in __import__("os").environ


@pytest.mark.nvcc
def test_add_runs_your_kernel_in_the_problems_signature(fake_gpu, invoke, one_line_exit_2):
    cu = fake_gpu / "mine.cu"
    cu.write_text('extern "C" __global__ void mine(float *y, const float *x, int n) {\n'
                  '    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }\n')
    res = invoke("dbl", "--n", "1000", "--add", f"{cu}:mine@block=128", "--variant", "none", "--budget", "0.01",
                 "--no-roofline")
    assert res.exit_code == 0, res.output
    assert "+mine" in res.output and "✓" in res.output
    cu.write_text('extern "C" __global__ void mine(float *y, int n) { }\n')
    one_line_exit_2(invoke("dbl", "--add", f"{cu}:mine", "--variant", "none"), "void mine(float *y, const float *x, int n)")
