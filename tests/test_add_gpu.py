"""``--add`` on a real GPU: the kernels of ``docs/examples/`` beside the ladder. A correct user kernel
passes; deliberately wrong ones (an off-by-one bounds check, a missing ``__syncthreads()``) come out
incorrect with the first wrong element named; a sweep over n and block; and a user kernel through the
child-run protocol (JSON request, profile mode) that ncu and compute-sanitizer use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from gpu_util import FAST

from cudalab import plan as planning
from cudalab.execute import toolchild as child
from cudalab.worker import executor as runner
from cudalab.catalog import user
from cudalab.cli import cli

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
T_KEYS = "block=32x8,tile=32x32"
R_KEYS = "block=512,per_thread=2"


def add(name: str, keys: str) -> str:
    return f"{EXAMPLES / (name + '.cu')}:{name}@{keys}"


def user_rows(device, family: str, adds: list[str], **kw) -> dict[str, runner.Result]:
    """Run only the given --add kernels (fast protocol, no roofline) and return their rows by name."""
    req = planning.RunRequest(family=family, variants="none", roofline=False, protocol=FAST,
                            add=user.parse_adds(adds), **kw)
    return {r.variant: r for r in runner.FamilyRun(planning.precheck(req), device).run()}


@pytest.mark.parametrize("n", ["1000", "4096"])
def test_transpose_correct_edge_and_nosync(device, n):
    rows = user_rows(device, "transpose", [add("my_transpose", T_KEYS), add("my_transpose_edge", T_KEYS),
                                           add("my_transpose_nosync", T_KEYS)], n=n)
    good, edge, nosync = rows["+my_transpose"], rows["+my_transpose_edge"], rows["+my_transpose_nosync"]
    assert good.status == runner.PASSED, good.reason
    assert good.grid == {"1000": "32x32", "4096": "128x128"}[n] and good.block == "32x8"
    # out is cols x rows; the bug leaves its last column (x = rows - 1) unwritten: the poison shows
    assert edge.status == runner.INCORRECT, edge.reason
    assert f"first at row 0, column {int(n) - 1}" in edge.reason and "unwritten" in edge.reason
    # a missing barrier: other warps' tile rows are read before they are written (a race: it shows
    # at these sizes on H100/H200, where thousands of blocks run)
    assert nosync.status == runner.INCORRECT, nosync.reason
    assert "first at row" in nosync.reason


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_reduce_correct_edge_and_nosync(device, dtype):
    n = str(2**20)  # the last element sits in the second half of its block's tile: the edge bug drops it
    rows = user_rows(device, "reduce", [add("my_reduce", R_KEYS), add("my_reduce_edge", R_KEYS),
                                        add("my_reduce_nosync", R_KEYS)], n=n, dtype=dtype)
    good, edge, nosync = rows["+my_reduce"], rows["+my_reduce_edge"], rows["+my_reduce_nosync"]
    assert good.status == runner.PASSED, good.reason
    assert good.grid == "1024" and good.block == "512"
    assert edge.status == runner.INCORRECT, edge.reason
    assert "first at element 0: got" in edge.reason and "expected" in edge.reason
    assert nosync.status == runner.INCORRECT, nosync.reason


def test_add_beside_the_ladder_through_the_cli(tmp_path):
    out = tmp_path / "t.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "2048", "--variant", "naive,bankopt", "--budget", "0.05",
                                   "--min-samples", "3", "--add", add("my_transpose", T_KEYS), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "+my_transpose" in res.stdout
    rows = json.loads(out.read_text())["points"][0]["results"]
    assert [r["variant"] for r in rows] == ["naive", "bankopt", "+my_transpose"]
    assert all(r["status"] == "passed" and r["stats"]["n"] >= 3 for r in rows)


def test_a_wrong_kernel_beside_the_ladder_exits_1_and_names_the_element(tmp_path):
    res = CliRunner().invoke(cli, ["transpose", "--n", "1000", "--variant", "naive", "--budget", "0.05",
                                   "--add", add("my_transpose_edge", T_KEYS)])
    assert res.exit_code == 1, res.output
    assert "first at row 0, column 999" in res.stdout


def test_sweep_over_n_and_block(tmp_path):
    out = tmp_path / "s.json"
    res = CliRunner().invoke(cli, ["transpose", "--n", "1000,4096", "--block", "32x8,32x16", "--variant",
                                   "naive,tiled-32x8", "--budget", "0.02", "--min-samples", "2", "--no-roofline",
                                   "--add", add("my_transpose", "tile=32x32"), "--json", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    points = json.loads(out.read_text())["points"]
    assert [(p["problem"]["dims"][0], p["block"]) for p in points] == [
        (1000, "32x8"), (1000, "32x16"), (4096, "32x8"), (4096, "32x16")]
    for p in points:
        assert [(r["variant"], r["status"], r["block"]) for r in p["results"]] == [
            (v, "passed", p["block"]) for v in ("naive", "tiled-32x8", "+my_transpose")]


def test_user_kernel_through_the_child_protocol(device):
    req = planning.RunRequest(family="transpose", variants="none", n="1000", protocol=FAST,
                            add=user.parse_adds([add("my_transpose", T_KEYS)]), profile=True, roofline=False)
    back = planning.RunRequest.from_dict(json.loads(json.dumps(req.to_dict())))
    assert back == req
    device.launch_log = []
    try:
        rows = runner.FamilyRun(planning.precheck(back), device).run()
    finally:
        device.launch_log = None
    assert [(r.variant, r.status) for r in rows] == [("+my_transpose", runner.PASSED)]
    assert [x[0] for x in child.launches(rows[0])] == ["my_transpose"]
    # and in a real child process, as a tool would start it (no tool prefix here)
    plan = planning.precheck(req)
    assert planning.Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan  # the plan as the child reads it
    run = child.run_child(plan, [], timeout=300)
    assert run.returncode == 0, run.output
    assert [(r.variant, r.status) for r in run.result.rows] == [("+my_transpose", runner.PASSED)]
    assert child.launches(run.result.rows[0])[0][0] == "my_transpose"


BIG_SMEM = r"""
extern "C" __global__ void big_smem(float *out, const float *in, int rows, int cols, int pin, int pout)
{
    __shared__ float stat[4096];   // 16 KiB static
    extern __shared__ float dyn[]; // the launch's dynamic bytes
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    float v = (x < cols && y < rows) ? in[(size_t)y * pin + x] : 0.0f;
    stat[t] = v;
    dyn[t] = v;
    __syncthreads();
    if (x < cols && y < rows)
        out[(size_t)x * pout + y] = 0.5f * (stat[t] + dyn[t]);
}
"""


def test_static_and_dynamic_shared_memory_over_48k_together(device, tmp_path):
    # 16 KiB static + 40,000 dynamic bytes: each under 48 KiB, together over it, so the kernel must
    # opt in (it failed with "invalid argument" when only the dynamic bytes were compared with 48 KiB).
    src = tmp_path / "big_smem.cu"
    src.write_text(BIG_SMEM)
    rows = user_rows(device, "transpose", [f"{src}:big_smem@block=32x8,shared=40000",
                                           f"{src}:big_smem@block=32x8,shared=220000,name=too_big"], n="1000")
    assert rows["+big_smem"].status == runner.PASSED, rows["+big_smem"].reason
    # over the device's per-block limit in all (each part alone is within it): one clear reason
    assert rows["+too_big"].status == runner.FAILED
    assert "16384 bytes of static and 220000 of dynamic shared memory" in rows["+too_big"].reason
