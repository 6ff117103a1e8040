"""The one build path (cudalab.build) with the real nvcc, no GPU: resources and parameter sizes, the
disk cache (hits, misses, corrupt entries, an unwritable folder), defines that never reach a shell,
and compile errors that name the original file and line."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudalab import build, catalog
from cudalab.cli import cli
from cudalab.errors import CompileError, UsageError

pytestmark = pytest.mark.nvcc

TRANSPOSE = catalog.src_root() / "transpose" / "transpose.cu"
# The cache's behaviour does not depend on what is compiled: a one-kernel source builds in a third of
# the time of a family's, and these tests build about twenty times.
SMALL = ('#include "small.cuh"\n'
         '#ifndef PAD\n#define PAD 0\n#endif\n'
         'extern "C" __global__ void small_kernel(float *a) { a[threadIdx.x] = TILE + SMALL_PAD + PAD; }\n')


# nvcc's outputs for small.cu per (arch, prelude defines), in this process: see ``small``.
_REPLAYS: dict[tuple[str, tuple[str, ...]], tuple[subprocess.CompletedProcess, bytes, str]] = {}


def _replaying_run(argv: list[str]) -> subprocess.CompletedProcess:
    """``build._run`` that runs nvcc once per (arch, defines) and replays its cubin, PTX and log after."""
    if "-o" not in argv:  # nvcc --version
        return subprocess.run(argv, capture_output=True, text=True, check=False)
    work = Path(argv[-1])
    out, keep = Path(argv[argv.index("-o") + 1]), Path(argv[argv.index("--keep-dir") + 1])
    arch = next(a for a in argv if a.startswith("-arch="))
    defines = tuple(line for line in work.read_text().splitlines() if line.startswith("#define "))
    key = (arch, defines)
    if key not in _REPLAYS:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        ptx = "\n".join(p.read_text() for p in sorted(keep.glob("*.ptx")))
        _REPLAYS[key] = (proc, out.read_bytes(), ptx)
    proc, cubin, ptx = _REPLAYS[key]
    out.write_bytes(cubin)
    (keep / "small.ptx").write_text(ptx)
    return proc


@pytest.fixture
def small(tmp_path, monkeypatch) -> Path:
    """A one-kernel source (with a local header) in a folder of its own. Its builds run nvcc once per
    arch and define set and replay the result after: these tests are about the cache (did nvcc run, is
    the entry whole), not about what nvcc makes of an edit, and a real nvcc each time was ~20 builds."""
    folder = tmp_path / "small"
    folder.mkdir()
    (folder / "small.cuh").write_text("#define SMALL_PAD 1\n")
    (folder / "small.cu").write_text(SMALL)
    monkeypatch.setattr(build, "_run", _replaying_run)
    return folder / "small.cu"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A private, empty cache folder for one test."""
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "build"


@pytest.fixture
def no_nvcc(monkeypatch):
    """After this, running nvcc fails the test (the version, read once per process, is kept)."""
    build.nvcc_version()

    def refuse(argv):
        raise AssertionError(f"nvcc ran: {argv}")

    monkeypatch.setattr(build, "_run", refuse)


def test_build_of_a_family_source_reports_resources_and_param_sizes(cache):
    b = build.build(TRANSPOSE, {"TILE": "32"}, "sm_90")
    assert not b.cached and b.arch == "sm_90" and b.defines == (("TILE", "32"),)
    assert b.cubin[:4] == b"\x7fELF"
    assert "release" in b.nvcc_version and "ptxas info" in b.log
    naive = b.kernel("transpose_naive")
    assert naive.params == (8, 8, 4, 4, 4, 4)  # two pointers, four ints
    assert naive.registers > 0 and naive.barriers == 0 and naive.static_shared == 0
    tiled = b.kernel("transpose_tiled")
    assert tiled.static_shared > 0 and tiled.barriers >= 1 and tiled.spill_stores == 0
    assert b.kernel("nosuch") is None
    assert sorted(p.suffix for p in cache.iterdir()) == [".cubin", ".json"]


def test_second_build_is_a_hit_without_nvcc(cache, small, monkeypatch):
    first = build.build(small, {"TILE": "32"}, "sm_90")
    monkeypatch.setattr(build, "_run", lambda argv: pytest.fail(f"nvcc ran: {argv}"))
    again = build.build(small, {"TILE": "32"}, "sm_90")
    assert again.cached and not first.cached
    assert (again.cubin, again.kernels, again.key, again.log) == (first.cubin, first.kernels, first.key, first.log)


@pytest.mark.parametrize("change", ["define", "arch", "value"])
def test_a_change_of_define_or_arch_misses(cache, small, change):
    build.build(small, {"TILE": "32"}, "sm_90")
    defines, arch = {"TILE": "32"}, "sm_90"
    if change == "define":
        defines = {"TILE": "32", "PAD": "1"}
    elif change == "value":
        defines = {"TILE": "16"}
    else:
        arch = "sm_80"
    b = build.build(small, defines, arch)
    assert not b.cached and b.arch == arch
    assert build.build(small, defines, arch).cached


def test_a_change_of_an_included_header_misses(cache, small):
    header = small.parent / "small.cuh"
    assert header.resolve() in build.includes(small)
    assert not build.build(small, {"TILE": "32"}, "sm_90").cached
    assert build.build(small, {"TILE": "32"}, "sm_90").cached
    header.write_text(header.read_text() + "\n// edited\n")
    assert not build.build(small, {"TILE": "32"}, "sm_90").cached


def test_a_header_outside_the_source_folder_is_found_beside_the_includer(tmp_path):
    # gemm.cu includes ../matmul/sgemm.cuh: a header outside its own folder, found beside the includer.
    src = tmp_path / "src"
    for fam in ("matmul", "gemm"):
        shutil.copytree(catalog.src_root() / fam, src / fam)
    assert (src / "matmul" / "sgemm.cuh").resolve() in build.includes(src / "gemm" / "gemm.cu")


def test_a_change_of_the_source_misses(cache, small):
    src = small
    assert not build.build(src, {"TILE": "32"}, "sm_90").cached
    src.write_text(src.read_text() + "\n// edited\n")
    assert not build.build(src, {"TILE": "32"}, "sm_90").cached


@pytest.mark.parametrize("damage", ["cubin", "json", "truncated-json", "cubin-missing"])
def test_a_corrupt_cache_entry_is_rebuilt(cache, small, damage):
    first = build.build(small, {"TILE": "32"}, "sm_90")
    cubin, meta = cache / f"{first.key}.cubin", cache / f"{first.key}.json"
    if damage == "cubin":
        cubin.write_bytes(b"not a cubin")
    elif damage == "json":
        meta.write_text('{"format": 1, "kernels": "what"}')
    elif damage == "truncated-json":
        meta.write_text(meta.read_text()[:40])
    else:
        cubin.unlink()
    again = build.build(small, {"TILE": "32"}, "sm_90")
    assert not again.cached and again.kernels == first.kernels  # (cubins differ: nvcc hashes the temp path into internal names)
    assert build.build(small, {"TILE": "32"}, "sm_90").cached  # and the entry is whole again


def test_an_unusable_cache_the_user_named_is_refused_in_one_line(tmp_path, monkeypatch, invoke, one_line_exit_2):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a file where the folder should be: mkdir fails even for root
    for value in (blocker, blocker / "cache"):
        monkeypatch.setenv("CUDALAB_CACHE", str(value))
        with pytest.raises(UsageError, match=f"CUDALAB_CACHE={value} cannot hold the build cache"):
            build.build(TRANSPOSE, {"TILE": "32"}, "sm_90")
    one_line_exit_2(invoke("compile", "transpose", "--variant", "naive"), "point it at a writable folder or unset it")


def test_an_unwritable_default_cache_means_no_caching(tmp_path, small, monkeypatch):
    monkeypatch.delenv("CUDALAB_CACHE")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # the default place cannot be made: runs go on
    assert not build.build(small, {"TILE": "32"}, "sm_90").cached
    assert not build.build(small, {"TILE": "32"}, "sm_90").cached


def test_cache_folder_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "a"))
    assert build.cache_dir() == tmp_path / "a" / "build"
    monkeypatch.delenv("CUDALAB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert build.cache_dir() == tmp_path / "x" / "cudalab" / "build"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert build.cache_dir() == tmp_path / "h" / ".cache" / "cudalab" / "build"


# --- defines ---------------------------------------------------------------------------------------------

GOOD_VALUES = ["8", "8u", "8UL", "1.5f", "2.", ".5", "1e-3", "0x20", "-1", "float", "unsigned int",
               "(TILE + 1) * 2", "1 << 4", "block_x/2", "64 % 7", "__half"]
BAD_VALUES = ["$(touch F)", "`touch F`", "'a'", '"a"', "1;", "#x", "1\n#include <x>", "a\\", "", "  ",
              "(1", "1)", "a, b", "a && b", "x[1]", "1.5.3", "2x"]


@pytest.mark.parametrize("value", GOOD_VALUES)
def test_plain_values_are_accepted(value):
    build.validate_define("X", value)


@pytest.mark.parametrize("value", BAD_VALUES)
def test_other_values_are_refused_in_one_line(value):
    with pytest.raises(UsageError) as exc:
        build.validate_define("X", value)
    assert "\n" not in str(exc.value) and "X" in str(exc.value)


@pytest.mark.parametrize("name", ["1X", "A-B", "", "__X", "_Reserved", "defined", "A B", "X$"])
def test_bad_names_are_refused(name):
    with pytest.raises(UsageError):
        build.validate_define(name, "1")


@pytest.mark.parametrize("value", ["$(touch {f})", "`touch {f}`"])
def test_shell_injection_is_refused_before_nvcc(cache, no_nvcc, tmp_path, value):
    flag = tmp_path / "F"
    with pytest.raises(UsageError):
        build.build(TRANSPOSE, {"X": value.format(f=flag)}, "sm_90")
    assert not flag.exists()


def test_defines_reach_the_source_as_a_prelude(cache, tmp_path):
    src = tmp_path / "k.cu"
    src.write_text('#if !(WIDTH == 24)\n#error "WIDTH"\n#endif\n'
                   'extern "C" __global__ void k(ELEM_T *p) { p[threadIdx.x] = WIDTH; }\n')
    b = build.build(src, {"WIDTH": "(4 + 2) * 4", "ELEM_T": "unsigned int"}, "sm_90")
    assert b.kernel("k").params == (8,)
    assert b"-D" not in build.prelude(src, {"A": "1"}) and build.prelude(src, {"A": "1"}).startswith(b"#define A 1\n")


def test_a_bad_arch_is_a_usage_error(cache, no_nvcc):
    with pytest.raises(UsageError, match="sm_90"):
        build.build(TRANSPOSE, {}, "compute_90; rm")


# --- errors ----------------------------------------------------------------------------------------------

def test_syntax_error_names_the_original_file_and_line(cache, tmp_path):
    src = tmp_path / "broken.cu"
    lines = TRANSPOSE.read_text().splitlines()
    lines.insert(9, "this is not CUDA;")  # line 10
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(CompileError) as exc:
        build.build(src, {"TILE": "32"}, "sm_90")
    log = exc.value.log
    assert f"{src}(10): error" in log, log
    assert "cudalab-build-" not in log  # the temporary copy is never named
    assert str(src) in str(exc.value).splitlines()[0]
    assert not cache.exists() or not any(cache.iterdir())  # a failed build leaves no entry


def test_missing_source_is_a_compile_error(cache, tmp_path):
    with pytest.raises(CompileError, match="cannot read"):
        build.build(tmp_path / "nope.cu", {}, "sm_90")


def test_ptx_params_of_every_kind():
    ptx = """
.visible .entry a(
\t.param .align 8 .b8 a_param_0[16],
\t.param .u8 a_param_1,
\t.param .u16 a_param_2,
\t.param .f32 a_param_3,
\t.param .u64 .ptr .global .align 4 a_param_4,
\t.param .f64 a_param_5
)
{ ret; }
.visible .entry b()
{ ret; }
"""
    assert build.parse_ptx_params(ptx) == {"a": (16, 1, 2, 4, 8, 8), "b": ()}


# --- the command line ------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [["compile", "transpose"], ["compile", "transpose", "--variant", "naive"],
                                  ["transpose", "--n", "64"]])
@pytest.mark.parametrize("value", ["X=$(touch {f})", "X=`touch {f}`"])
def test_cli_refuses_a_shell_value_in_one_line(tmp_path, args, value):
    flag = tmp_path / "F"
    res = CliRunner().invoke(cli, [*args, "-D", value.format(f=flag)])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cudalab: define X="), res.output
    assert "pycuda" not in res.output  # refused before any GPU work
    assert not flag.exists()


def test_compile_command_shows_the_cached_column(cache):
    first = CliRunner().invoke(cli, ["compile", "transpose", "--variant", "naive"])
    again = CliRunner().invoke(cli, ["compile", "transpose", "--variant", "naive"])
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert "cached" in first.output
    last = lambda out: next(ln for ln in out.splitlines() if "transpose_naive" in ln).split()[-1]  # noqa: E731
    assert (last(first.output), last(again.output)) == ("no", "yes")


def test_a_path_with_spaces_and_shell_text_builds(cache, tmp_path):
    odd = tmp_path / "a dir $(touch F) `x`" / "t.cu"
    odd.parent.mkdir()
    shutil.copy(TRANSPOSE, odd)
    assert build.build(odd, {"TILE": "32"}, "sm_90").kernel("transpose_naive") is not None
    assert not (tmp_path / "F").exists() and not Path("F").exists()


def test_a_path_with_a_double_quote_is_refused_in_words(cache, no_nvcc, tmp_path):
    # nvcc copies the #line name unescaped into the PTX's .file directive, where ptxas fails on it.
    odd = tmp_path / 'a "quoted" dir' / "t.cu"
    odd.parent.mkdir()
    shutil.copy(TRANSPOSE, odd)
    with pytest.raises(UsageError, match="double quote"):
        build.build(odd, {"TILE": "32"}, "sm_90")


def test_a_variant_with_its_own_arch_is_built_for_it_by_the_run_and_by_compile():
    """params.arch = "sm_90a" (hgemm's wgmma): the run and `cudalab compile` build that target on an
    sm_90 GPU; on another generation the row is refused naming the rule."""
    from cudalab import catalog
    from cudalab.errors import UsageError
    from cudalab.plan import variant_arch

    spec = catalog.family("hgemm")
    wg = next(v for v in spec.variants if v.name == "wgmma")
    plain = next(v for v in spec.variants if v.name == "mma")
    assert variant_arch(wg, "sm_90") == "sm_90a" and variant_arch(plain, "sm_90") == "sm_90"
    with pytest.raises(UsageError, match="runs on sm_90 GPUs only, not sm_80"):
        variant_arch(wg, "sm_80")


def test_compile_shows_the_sm_90a_build_of_wgmma(invoke):
    res = invoke(["compile", "hgemm", "--variant", "wgmma"])
    assert res.exit_code == 0, res.output
    row = next(ln for ln in res.output.splitlines() if "hgemm_wgmma" in ln)
    assert "wgmma (sm_90a)" in row
    assert int(row.split()[5]) > 64  # the real kernel's registers, not a trap stub's
    res = invoke(["compile", "hgemm", "--variant", "wgmma", "--arch", "sm_80"])
    assert res.exit_code == 0 and "runs on sm_90 GPUs only, not sm_80" in res.output


def test_two_processes_asking_for_one_build_compile_it_once(tmp_path, monkeypatch):
    """The second asker waits on the key's lock and reads the first's build (two test workers, two GPU
    workers of a sweep): nvcc runs once. Threads stand in for processes (flock holds between open files)."""
    import threading
    import time

    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "nvcc_version", lambda: "fake")
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k() {}\n')
    compiled = []

    def slow_compile(source, text, defines, arch, version, key):
        compiled.append(key)
        time.sleep(0.3)  # the other asker arrives meanwhile
        b = build.Build(source=source, arch=arch, defines=(), cubin=b"CUBIN", kernels=(), log="", cached=False,
                        nvcc_version=version, key=key)
        build._store(b)
        return b

    monkeypatch.setattr(build, "_compile", slow_compile)
    got = []
    threads = [threading.Thread(target=lambda: got.append(build.build(src, {}, "sm_90"))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(compiled) == 1 and [b.cubin for b in got] == [b"CUBIN", b"CUBIN"]
    assert sorted(b.cached for b in got) == [False, True]


def test_a_failed_build_leaves_nothing_in_the_temporary_folder(cache, tmp_path, monkeypatch):
    """nvcc's cicc wrote an empty ``*.lgenfe.bc`` into $TMPDIR on every failed build (--keep-dir does not
    cover it): its TMPDIR is now the build's own folder."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(build.tempfile, "tempdir", str(tmp))
    src = tmp_path / "bad.cu"
    src.write_text('extern "C" __global__ void k(float *o) { o[0] = ; }\n')
    with pytest.raises(CompileError, match="expected an expression"):
        build.build(src, {}, "sm_90")
    assert list(tmp.iterdir()) == []


def _processes_naming(text: str) -> list[str]:
    out = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            out.append(args)
    return out


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists() or shutil.which("nvcc") is None and not Path(
    "/usr/local/cuda/bin/nvcc").exists(), reason="needs /proc and nvcc")
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_signal_during_compile_ends_nvcc_and_removes_the_build_folder(tmp_path, signame):
    import os
    import signal
    import sys
    import time

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), CUDALAB_CACHE=str(tmp_path / "cache"),
               PYTHONPATH=str(Path(__file__).parent.parent))
    proc = subprocess.Popen([sys.executable, "-m", "cudalab", "compile", "transpose"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not _processes_naming(str(tmp / "cudalab-build-")) and proc.poll() is None:
            assert time.monotonic() < deadline, "nvcc never started"
            time.sleep(0.02)
        assert proc.poll() is None, "the build ended before it could be signalled"
        proc.send_signal(getattr(signal, signame))
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 5
    while _processes_naming(str(tmp)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_naming(str(tmp)) == []
    assert list(tmp.glob("cudalab-build-*")) == []
    assert proc.returncode == 128 + getattr(signal, signame), proc.stderr.read()


def test_two_builds_of_different_keys_run_at_once_even_where_their_keys_begin_alike(tmp_path, monkeypatch):
    """Each key's lock is its own (a campaign's builds ahead run at once: none waits for another's nvcc). Keys
    that begin with the same two hex digits shared one lock file, and the second build waited for the first."""
    import threading

    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "nvcc_version", lambda: "fake")
    monkeypatch.setattr(build, "cache_key", lambda source, text, defines, arch, version: "ab" + defines["N"] + "0" * 61)
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(int *o) { o[0] = N; }\n')
    both = threading.Barrier(2, timeout=3)  # each compile waits here for the other: only builds at once pass

    def compile_at_once(source, text, defines, arch, version, key):
        both.wait()
        return build.Build(source=source, arch=arch, defines=(), cubin=key.encode(), kernels=(), log="",
                           cached=False, nvcc_version=version, key=key)

    monkeypatch.setattr(build, "_compile", compile_at_once)
    got, errors = [], []

    def one(n: str) -> None:
        try:
            got.append(build.build(src, {"N": n}, "sm_90").key)
        except Exception as exc:  # noqa: BLE001  (a broken barrier: the builds ran one after the other)
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in "12"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and sorted(got) == ["ab1" + "0" * 61, "ab2" + "0" * 61]
