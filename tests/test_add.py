"""``--add`` on the CPU: the syntax, missing files, paths no shell ever sees, PTX signatures read from
kernels compiled here with the real nvcc, the mismatch message, ``cudalab list`` showing the
convention, and the user kernel inside a RunRequest that survives JSON (the child protocol)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import build_share
from cudalab import plan as planning
from cudalab import build
from cudalab.worker import executor as runner
from cudalab.catalog import user
from cudalab import launch as L
from cudalab.catalog import family
from cudalab.cli import cli
from cudalab.errors import CompileError, UsageError
from cudalab.families import load

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
needs_nvcc = pytest.mark.nvcc

BAD = """extern "C" __global__ void k(float *out, const float *in, int rows, int cols, int pitch)
{ int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < cols && y < rows) out[(size_t)x * pitch + y] = in[(size_t)y * pitch + x]; }
"""
TRANSPOSE = """extern "C" __global__ void k(float *out, const float *in, int rows, int cols, int pin, int pout)
{ int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < cols && y < rows) out[(size_t)x * pout + y] = in[(size_t)y * pin + x]; }
"""


@pytest.fixture
def cu(tmp_path):
    def make(text: str, name: str = "k.cu") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path
    return make


# --- syntax ----------------------------------------------------------------------------------------

def test_parse_plain_and_with_keys(cu):
    path = cu(TRANSPOSE)
    k = user.parse_add(f"{path}:k")
    assert (k.path, k.kernel, k.name, k.block, k.grid) == (str(path), "k", "+k", "", "tiles")
    k = user.parse_add(f"{path}:k@block=32x8,tile=32x32,grid=tiles,-DTILE=32,name=mine,per_thread=1x4,shared=128")
    assert (k.block, k.tile, k.per_thread, k.name, k.shared) == ("32x8", ("32", "32"), "1x4", "+mine", "128")
    assert k.defines == (("TILE", "32"),)
    v = k.variant((32, 32, 1))
    assert v.block == (32, 8, 1) and v.source == str(path) and user.is_user(v)
    assert ("TILE_X", "tile_x") in v.defines and ("TILE", "32") in v.defines
    assert user.parse_add(f"{path}:k@grid=sm:4").grid == "sm:4"  # ':' after '@' is not the kernel separator


def test_relative_path_becomes_absolute(cu, tmp_path):
    cu(TRANSPOSE, "sub/k.cu")
    k = user.parse_add("sub/k.cu:k", cwd=tmp_path)
    assert Path(k.path).is_absolute() and k.path == str(tmp_path / "sub" / "k.cu")


@pytest.mark.parametrize("text, fragment", [
    ("{p}", "must be FILE.cu:KERNEL"),
    ("{p}:", "must be FILE.cu:KERNEL"),
    ("{p}:1k", "must be FILE.cu:KERNEL"),
    ("{p}:k@", "nothing after '@'"),
    ("{p}:k@colour=red", "is not KEY=VALUE"),
    ("{p}:k@block=0x8", "positive dims"),
    ("{p}:k@block=big", "positive dims"),
    ("{p}:k@grid=lots of", "grid="),
    ("{p}:k@tile=32*x", "tile="),
    ("{p}:k@tile=a x b x c x d", "tile="),
    ("{p}:k@shared=1k", "shared="),
    ("{p}:k@-DX", "-DNAME=VALUE"),
    ("{p}:k@-DX=$(rm -rf ~)", "-DNAME=VALUE"),
    ("{p}:k@-D1X=2", "-DNAME=VALUE"),
    ("{p}:k@name=a b", "name="),
])
def test_bad_syntax_is_one_usage_error(cu, text, fragment):
    path = cu(TRANSPOSE)
    with pytest.raises(UsageError, match=None) as exc:
        user.parse_add(text.format(p=path))
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_missing_file_is_one_line_exit_2(tmp_path):
    res = CliRunner().invoke(cli, ["transpose", "--add", f"{tmp_path}/nope.cu:k"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [f"cudalab: --add '{tmp_path}/nope.cu:k': no such file {tmp_path}/nope.cu"]


def test_two_rows_with_one_name_are_refused(cu):
    path = cu(TRANSPOSE)
    with pytest.raises(UsageError, match="name="):
        user.parse_adds([f"{path}:k", f"{path}:k@block=16x16"])
    assert len(user.parse_adds([f"{path}:k", f"{path}:k@name=k2"])) == 2


def test_user_rows_never_clash_with_built_ins(cu):
    path = cu(TRANSPOSE)
    req = planning.RunRequest(family="transpose", n="64", add=user.parse_adds([f"{path}:k@name=naive"]))
    names = [v.name for v in planning.precheck(req).variants]
    assert names.count("naive") == 1 and names[-1] == "+naive"


@needs_nvcc
def test_path_with_spaces_and_shell_metacharacters_never_reaches_a_shell(cu, tmp_path, monkeypatch):
    """The file is included by absolute path from a prelude; every subprocess gets an argv list, and
    no argument holds the user's path (nor a folder of it)."""
    path = cu(TRANSPOSE, "we ird $(touch PWNED); `id` & 'q'/my k;|.cu")
    calls = []
    real = subprocess.run

    def spy(argv, *a, **kw):
        assert isinstance(argv, list) and not kw.get("shell")
        calls.append(argv)
        return real(argv, *a, **kw)

    class PopenSpy(subprocess.Popen):  # nvcc runs under Popen (its process group is killed if interrupted)
        def __init__(self, argv, *a, **kw):
            assert isinstance(argv, list) and not kw.get("shell")
            calls.append(argv)
            super().__init__(argv, *a, **kw)

    monkeypatch.setattr(subprocess, "run", spy)
    monkeypatch.setattr(subprocess, "Popen", PopenSpy)
    monkeypatch.chdir(tmp_path)
    k = user.parse_add(f"{path}:k")
    req = planning.RunRequest(family="transpose", variants="none", n="64", add=(k,))
    _plan = planning.precheck(req)
    spec, fam, problem, variants = _plan.spec, _plan.family, _plan.problem, list(_plan.variants)
    assert [v.name for v in variants] == ["+k"]
    assert calls, "nvcc was not run"
    assert all(str(path.parent) not in arg and "PWNED" not in arg for argv in calls for arg in argv)
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()
    prelude = user.compile_source(variants[0])
    assert f'#include "{path}"' in prelude.read_text() and "$" not in str(prelude)


def test_quote_or_newline_in_the_path_is_refused(tmp_path):
    with pytest.raises(UsageError, match="double quote"):
        user.parse_add(f'{tmp_path}/a"b.cu:k')


# --- PTX signatures --------------------------------------------------------------------------------

PTX = """
.visible .entry transpose_naive(
	.param .u64 .ptr .align 1 transpose_naive_param_0,
	.param .u64 .ptr .align 1 transpose_naive_param_1,
	.param .u32 transpose_naive_param_2,
	.param .f64 transpose_naive_param_3,
	.param .align 8 .b8 transpose_naive_param_4[24]
)
{
}
.visible .entry noargs()
{
}
"""


def test_ptx_params_reads_sizes():
    assert build.parse_ptx_params(PTX) == {"transpose_naive": (8, 8, 4, 8, 24), "noargs": ()}


def test_prototype_sizes_of_every_family():
    want = {"copy": (8, 8, 4, 4, 4), "transpose": (8, 8, 4, 4, 4, 4), "reduce": (8, 8, 4),
            "matmul": (8, 8, 8, 4, 4, 4), "gemm": (8, 8, 8, 8, 4, 4, 4, 4, 4), "gemv": (8, 8, 8, 8, 4, 4, 4, 4),
            "smem-square": (8,), "smem-rect": (8,)}
    for name, sizes in want.items():
        fam = load(family(name).module)
        assert fam.SIGNATURE, name
        assert user.prototype_sizes(fam.SIGNATURE) == sizes, name
    assert user.prototype_sizes("void K(unsigned long long n, double x, char c, ELEM_T v)", 8) == (8, 8, 1, 8)


@needs_nvcc
@pytest.mark.parametrize("name", ["copy", "transpose", "reduce", "matmul", "gemm", "gemv", "smem-square", "smem-rect"])
def test_every_built_in_kernel_fits_its_family_signature_where_it_takes_the_plain_convention(name, monkeypatch):
    """The SIGNATURE is the convention the family's own kernels are launched with (checked on the first
    kernel variant, whose launch has no extra arguments). The --add prelude only includes the family's
    file: its build is the family's own (build_share.py), the one test_compile_all made."""
    real = build.build
    monkeypatch.setattr(build, "build", lambda source, defines, arch="sm_90": build_share.build(source, defines, arch,
                                                                                               real=real))
    spec = family(name)
    fam = load(spec.module)
    v = next(v for v in spec.variants if v.kind == "kernel")
    problem = planning.make_problem(spec, fam, planning.RunRequest(family=name, n="64"))
    lau = planning.plan_launch(v, fam, problem)
    from dataclasses import replace
    as_user = replace(v, source=str(spec.directory / v.source), params=(("user", True),))
    user.check_signature(as_user, name, fam.SIGNATURE, dict(lau.defines), problem.np_dtype.itemsize)


@needs_nvcc
def test_real_kernel_signature_and_mismatch_message(cu):
    good = cu(TRANSPOSE, "good.cu")
    bad = cu(BAD, "bad.cu")
    v = user.parse_add(f"{good}:k").variant((32, 32, 1))
    assert user.kernel_params(v, {})["k"] == (8, 8, 4, 4, 4, 4)
    user.check_signature(v, "transpose", load("transpose").SIGNATURE, {}, 4)
    vb = user.parse_add(f"{bad}:k").variant((32, 32, 1))
    with pytest.raises(user.SignatureError) as exc:
        user.check_signature(vb, "transpose", load("transpose").SIGNATURE, {}, 4)
    msg = str(exc.value)
    assert "\n" not in msg
    assert "takes 5 parameter(s) of (8, 8, 4, 4, 4)" in msg
    assert "transpose launches 6 of (8, 8, 4, 4, 4, 4)" in msg
    assert "void k(float *out, const float *in, int rows, int cols, int pitch_in, int pitch_out)" in msg


@needs_nvcc
def test_missing_or_mangled_kernel_is_named(cu):
    path = cu(TRANSPOSE.replace('extern "C" ', ""), "cpp.cu")
    v = user.parse_add(f"{path}:k").variant((32, 32, 1))
    with pytest.raises(user.SignatureError, match='found _Z1k.*declare it extern "C"'):
        user.check_signature(v, "transpose", load("transpose").SIGNATURE, {}, 4)


@needs_nvcc
def test_compile_error_carries_the_nvcc_log(cu):
    path = cu('extern "C" __global__ void k(float *out) { this is not C }', "broken.cu")
    v = user.parse_add(f"{path}:k").variant((32, 32, 1))
    with pytest.raises(CompileError) as exc:
        user.kernel_params(v, {})
    assert "broken.cu" in exc.value.log and "error" in exc.value.log


@needs_nvcc
def test_signature_mismatch_exits_2_when_only_user_rows(cu):
    bad = cu(BAD, "bad.cu")
    res = CliRunner().invoke(cli, ["transpose", "--n", "64", "--variant", "none", "--add", f"{bad}:k"])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "int pitch_in, int pitch_out" in lines[0], res.output


@needs_nvcc
def test_signature_mismatch_beside_built_ins_is_a_failed_row(cu, fake_gpu):
    bad = cu(BAD, "bad.cu")
    req = planning.RunRequest(family="transpose", variants="naive", n="64", add=user.parse_adds([f"{bad}:k"]))
    _plan = planning.precheck(req)
    spec, fam, problem, variants = _plan.spec, _plan.family, _plan.problem, list(_plan.variants)
    run = runner.FamilyRun(planning.precheck(req), fake_gpu)
    row = run.run_variant(None, variants[-1], {}, None)
    assert row.status == runner.FAILED and "launches 6 of" in row.reason


@needs_nvcc
def test_compile_error_row_keeps_the_log(cu, fake_gpu):
    path = cu('extern "C" __global__ void k(float *out) { this is not C }', "broken.cu")
    req = planning.RunRequest(family="transpose", variants="naive", n="64", add=user.parse_adds([f"{path}:k"]))
    run = runner.FamilyRun(planning.precheck(req), fake_gpu)
    row = run.run_variant(None, run.variants[-1], {}, None)
    assert row.status == runner.FAILED and row.reason.startswith("nvcc could not compile")
    assert "broken.cu" in row.extra["log"]


@pytest.fixture
def fake_gpu():
    from cudalab.launch import DeviceLimits

    class Dev:
        limits = DeviceLimits()
        launch_log = None

    return Dev()


# --- list, the child protocol --------------------------------------------------------------------

def test_list_transpose_shows_the_signature():
    res = CliRunner().invoke(cli, ["list", "transpose"])
    assert res.exit_code == 0
    assert 'extern "C" __global__' in res.output
    assert "int pitch_out)" in res.output and "elements between the starts of two rows of out" in res.output
    assert "--add FILE.cu:KERNEL" in res.output


@pytest.mark.parametrize("name", ["copy", "reduce", "matmul", "gemm", "gemv", "smem-square", "smem-rect"])
def test_list_shows_every_family_signature(name):
    res = CliRunner().invoke(cli, ["list", name])
    assert res.exit_code == 0 and "void KERNEL(" in res.output


def test_help_documents_add():
    res = CliRunner().invoke(cli, ["transpose", "--help"])
    assert "--add" in res.output and "FILE.cu:KERNEL" in res.output


def test_request_with_user_kernel_round_trips_json(cu):
    path = cu(TRANSPOSE, "dir with space/k.cu")
    req = planning.RunRequest(family="transpose", n="64", add=user.parse_adds([f"{path}:k@block=16x16,-DPAD=1"]))
    back = planning.RunRequest.from_dict(json.loads(json.dumps(req.to_dict())))
    assert back == req
    assert back.add[0].path == str(path) and back.add[0].defines == (("PAD", "1"),)


def test_examples_parse():
    for f in EXAMPLES.glob("*.cu"):
        k = user.parse_add(f"{f}:{f.stem}@block=32x8,tile=32x32")
        assert k.kernel == f.stem


def test_the_nvcc_log_is_printed_after_the_tables(capsys):
    from cudalab.report.saved import print_logs
    from cudalab.records.results import RunPoint, RunRecord

    log = "nvcc could not compile /x/broken.cu\n/x/broken.cu(1): error: expected a ';'"
    rows = (runner.Result("naive", "kernel", runner.PASSED),
            runner.Result("+k", "kernel", runner.FAILED, reason=log.splitlines()[0], extra={"log": log}))
    rec = RunRecord(cudalab="x", command=(), started=0.0, device={},
                    points=(RunPoint("transpose", "bandwidth", {"dims": [64, 64]}, results=rows),) * 2)
    print_logs(rec)
    err = capsys.readouterr().err
    assert err.count("broken.cu(1): error") == 1 and err.startswith("--- +k: nvcc could not compile")


def test_a_persistent_grid_on_a_2d_family_is_capped_by_all_its_tiles_not_one_row(tmp_path):
    """grid=sm:K on transpose: 4 blocks per SM (528 on 132 SMs) are fewer than the 256x256 tiles of
    16384², so all 528 launch (capping at one row of tiles, 256, starved a persistent 2-D kernel);
    at 128² (2x2 tiles) the grid is the 4 tiles."""
    spec = family("transpose")
    fam = load(spec.module)
    (tmp_path / "k.cu").write_text(TRANSPOSE)
    v = user.parse_add(f"{tmp_path / 'k.cu'}:k@block=64x8,tile=64x64,grid=sm:4").variant((64, 8, 1))
    limits = L.DeviceLimits(sm_count=132)
    big = planning.make_problem(spec, fam, planning.RunRequest(family="transpose", n="16384"))
    assert planning.plan_launch(v, fam, big, limits=limits).grid == (528, 1, 1)
    small = planning.make_problem(spec, fam, planning.RunRequest(family="transpose", n="128"))
    assert planning.plan_launch(v, fam, small, limits=limits).grid == (4, 1, 1)
