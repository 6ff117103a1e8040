"""A kernel that crashes or hangs is one row, on a real GPU: the hostile kernels of
``docs/examples/hostile.cu`` beside a correct one, each fault in its own worker; Ctrl-C and SIGTERM
during a hung kernel end the run within 2 s with the JSON kept; ``cudalab info`` and a run hold no
CUDA context in the user's process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudalab.cli import cli
from cudalab.records.results import load_record

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
HOSTILE = EXAMPLES / "hostile.cu"
GOOD = f"{EXAMPLES / 'my_transpose.cu'}:my_transpose@block=32x8,tile=32x32"


def hostile(name: str, extra: str = "") -> str:
    return f"{HOSTILE}:{name}@block=32x8" + extra


def test_each_hostile_kernel_is_one_row_and_the_correct_one_after_passes(tmp_path):
    out = tmp_path / "run.json"
    adds = [hostile("hostile_oob"), hostile("hostile_trap"), hostile("hostile_hang"), hostile("hostile_misaligned"),
            hostile("hostile_smem", ",shared=1048576"), GOOD]
    args = ["transpose", "--n", "2048", "--variant", "bankopt", "--timeout", "5", "--budget", "0.1", "--json", str(out)]
    for a in adds:
        args += ["--add", a]
    t0 = time.monotonic()
    res = CliRunner().invoke(cli, args)
    took = time.monotonic() - t0
    assert res.exit_code == 1, res.output
    rec = load_record(out)
    rows = {r.variant: r for _, r in rec.rows()}
    status = {k: (v.status.value, v.reason) for k, v in rows.items()}
    assert rows["bankopt"].status.value == "passed", status
    assert rows["+my_transpose"].status.value == "passed", status
    assert rows["+hostile_oob"].status.value == "failed" and "illegal memory access" in rows["+hostile_oob"].reason
    assert "cudalab sanitize transpose --variant none --add" in rows["+hostile_oob"].reason
    assert rows["+hostile_trap"].status.value == "failed", status
    assert rows["+hostile_hang"].status.value == "timeout", status
    assert rows["+hostile_misaligned"].status.value == "failed" and "misaligned" in rows["+hostile_misaligned"].reason
    assert rows["+hostile_smem"].status.value in ("skipped", "failed") and "shared memory" in rows["+hostile_smem"].reason
    assert rec.points[0].roofline is not None, rec.points[0].roofline_note
    assert rows["+my_transpose"].pct_roofline and rows["bankopt"].pct_roofline
    assert "PyCUDA WARNING" not in res.output and "Traceback" not in res.output
    print(f"hostile run: {took:.1f} s", {k: v[0] for k, v in status.items()})


def _cudalab(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cudalab", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_hung_kernel_ends_the_run_within_2_s_with_the_json_kept(tmp_path, signum, code):
    out = tmp_path / "run.json"
    proc = _cudalab(["transpose", "--n", "1024", "--variant", "naive", "--add", hostile("hostile_hang"),
                     "--timeout", "600", "--json", str(out)])
    from fake_workers import signal_once_saved, still_running

    # the first row saved, then the hang started
    took, stdout, stderr, workers = signal_once_saved(proc, out, "naive", signum, 120, 2.0, 30)
    assert took < 2.0, took
    assert proc.returncode == code, stderr
    data = json.loads(out.read_text())
    assert data["incomplete"] is True
    assert [r["variant"] for p in data["points"] for r in p["results"]] == ["naive"]
    assert "Traceback" not in stderr and "PyCUDA WARNING" not in stderr
    assert workers and not still_running(workers)  # the worker with the hung kernel was killed
    print(f"signal {signum}: ended in {took:.2f} s")


def test_the_users_process_holds_no_cuda_context(tmp_path):
    """Run a family in a subprocess and ask NVML which processes compute on the GPU meanwhile: the
    worker, never the cudalab process itself."""
    pynvml = pytest.importorskip("pynvml")
    pynvml.nvmlInit()
    try:
        # the GPU this process's CUDA sees first: NVML ignores CUDA_VISIBLE_DEVICES (gpu-check's lanes set it,
        # with CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML's own order)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
        handle = pynvml.nvmlDeviceGetHandleByIndex(int(visible) if visible.isdigit() else 0)
        proc = _cudalab(["transpose", "--n", "8192", "--variant", "naive,bankopt", "--budget", "2"])
        seen: set[int] = set()
        children: set[int] = set()
        while proc.poll() is None:
            seen |= {int(p.pid) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
            kids = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
            children |= {int(k) for k in kids}
            time.sleep(0.05)
        proc.communicate()
    finally:
        pynvml.nvmlShutdown()
    assert proc.returncode == 0
    assert seen & children, (seen, children)  # the worker (a child) computed: NVML's pids are ours to compare
    assert proc.pid not in seen  # ... and the user's process never did


def test_devices_all_on_one_gpu_runs_every_point_there(tmp_path):
    out = tmp_path / "run.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "1k,2k", "--block", "32x8,16x16", "--variant", "naive,bankopt",
                                   "--devices", "all", "--budget", "0.05", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rec = load_record(out)
    assert len(rec.points) == 4 and {p.device for p in rec.points} == {0}
    assert all(r.status.value in ("passed", "skipped") for _, r in rec.rows())
    assert all(p.roofline is not None for p in rec.points)
