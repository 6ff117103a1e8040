"""What users can get wrong, and the one line each gets: exit 2, no traceback (CPU, through CliRunner).

Every check that needs only the device's *default* limits happens in planning.precheck before the GPU
is opened, so on this CPU-only machine a bad block or grid is refused with its rule, not with the
no-pycuda message. ``REFUSED_BEFORE_GPU`` keeps the paths where the no-pycuda message (or a crash
later) once won although the input was bad.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from cudalab import plan as planning
from cudalab import catalog
from cudalab.worker import gpu
from cudalab.launch import DeviceLimits

HAVE_PYCUDA = importlib.util.find_spec("pycuda") is not None
FAMILIES = set(catalog.load_catalog())


BAD = [
    # sizes
    (["transpose", "--n", "0"], "--n must be positive (got 0)"),
    (["transpose", "--n", "-5"], "--n must be positive (got -5)"),
    (["transpose", "--n", "abc"], "--n 'abc' is not a size (examples: 4096, 16k, 1M, 2^24)"),
    (["transpose", "--n", "1.5"], "--n '1.5' is not a size"),
    (["transpose", "--n", "16q"], "is not a size"),
    (["transpose", "--shape", "0x16"], "must be positive"),
    (["transpose", "--shape", "16"], "shape '16' must have 2 sizes"),
    (["transpose", "--shape", "4x"], "must have 2 sizes"),
    (["transpose", "--n", "16", "--shape", "4x4"], "give --n or --shape, not both"),
    (["transpose", "--n", "2^40"], "each side must be below 2^31"),
    (["copy", "--shape", "100000x100000"], "has more elements than the kernels index"),
    (["reduce", "--n", "2^32"], "2^31"),
    (["matmul", "--n", "50000"], "2^31"),
    (["matmul", "--shape", "4x4"], "must have 3 sizes"),
    # blocks
    (["reduce", "--block", "128,,256"], "empty entry"),
    # a sweep is refused only when no point can run (a point where nothing fits is shown as skipped rows)
    (["reduce", "--block", "2000,3000"], "power-of-two block size (got 2000 threads)"),
    (["transpose", "--variant", "naive", "--block", "64x32"], "block 64x32 has 2048 threads; the device allows 1024 per block"),
    (["transpose", "--variant", "naive", "--block", "2048"], "has 2048 threads"),
    (["transpose", "--variant", "naive", "--block", "1x1x128"], "block 1x1x128: dimension z = 128 exceeds the device limit 64"),
    (["transpose", "--block", "0x8"], "block '0x8': every dimension must be at least 1"),
    (["transpose", "--block", "-32"], "every dimension must be at least 1"),
    (["transpose", "--block", "32x"], "block '32x' is not of the form X, XxY or XxYxZ"),
    (["transpose", "--block", "8x8x4x1"], "is not of the form X, XxY or XxYxZ"),
    (["transpose", "--variant", "shared", "--block", "16x16"], "shared is compiled for block 32x32 only (got 16x16)"),
    (["transpose", "--variant", "tiled-32x8", "--block", "32x7"], "tiled-32x8 needs block_x % block_y == 0"),
    (["transpose", "--variant", "tiled-32x8", "--block", "128x8"], "tiled-32x8 needs block_x <= 64"),
    # grids
    (["transpose", "--variant", "naive", "--n", "1024", "--grid", "1x1"],
     "grid 1 covers 32 elements along x, the problem has 1024: use at least 32 blocks there"),
    (["transpose", "--variant", "naive", "--n", "1024", "--grid", "32x31"], "covers 992 elements along y"),
    (["transpose", "--variant", "naive", "--grid", "0"], "grid '0': every dimension must be at least 1"),
    (["transpose", "--variant", "naive", "--grid", "8x"], "grid '8x' is not of the form"),
    (["transpose", "--variant", "naive", "--shape", "3000000x2"], "dimension y = 93750 exceeds the device limit 65535"),
    # names and options
    (["nosuch"], "No such command 'nosuch'"),
    (["transpose", "--variant", "nosuch"], "transpose has no variant 'nosuch'; valid: host, naive"),
    (["transpose", "--variant", "naive,nosuch"], "has no variant 'nosuch'"),
    (["transpose", "--dtype", "float64"], "transpose has no dtype 'float64'; valid: float32"),
    (["reduce", "--dtype", "float64,float16"], "reduce has no dtype 'float16'"),
    (["transpose", "--n", "1k,,4k"], "--n '1k,,4k' has an empty entry"),
    (["transpose", "--add", "docs/examples/my_transpose.cu"], "must be FILE.cu:KERNEL"),
    (["list", "nosuch"], "no family 'nosuch'; valid: "),
    (["compile", "nosuch"], "no family 'nosuch'; valid: "),
    (["compile", "transpose", "--variant", "nosuch"], "has no variant 'nosuch'"),
    (["transpose", "--all", "--variant", "naive"], "give --all or --variant, not both"),
    (["transpose", "--budget", "0"], "Invalid value for '--budget': '0' must be a positive number of seconds"),
    (["transpose", "--min-samples", "0"], "Invalid value for '--min-samples'"),
    (["transpose", "--seed", "x"], "Invalid value for '--seed'"),
    (["transpose", "--bogus"], "No such option '--bogus'"),
    (["sanitize", "transpose", "--tool", "bogus"], "unknown sanitizer tool bogus"),
    (["sanitize", "transpose", "--variant", "naive", "--n", "64,0"], "--n must be positive"),
    (["ncu", "nosuch"], "no family 'nosuch'"),
    (["ncu", "transpose", "--import", "no/such.csv"], "no such file"),
    (["ncu", "transpose", "--import", "a.csv", "--export", "b.csv"], "not both"),
    (["ncu", "transpose", "--metrics", "not a metric"], "--metrics takes"),
    (["ncu", "transpose", "--block", "32x8,32x16"], "one --block"),
    (["ncu", "smem-square", "--import", "tests/data/ncu_import_copy_memory_h200.csv"], "holds no launch of smem-square"),
    (["sanitize", "transpose", "--n", "0"], "--n must be positive"),
    (["sanitize", "transpose", "--variant", "host"], "no kernel variant selected"),
    (["sanitize", "nosuch"], "no family 'nosuch'"),
]

_FAMILY_ROWS = {"reduce", "matmul"}


def _params():
    for args, frag in BAD:
        marks = []
        if args[0] in _FAMILY_ROWS and args[0] not in FAMILIES:
            marks.append(pytest.mark.skip(reason=f"no {args[0]} family yet"))
        yield pytest.param(args, frag, marks=marks, id=" ".join(args))


@pytest.mark.parametrize("args,fragment", list(_params()))
def test_bad_input_one_line_exit_2(invoke, one_line_exit_2, args, fragment):
    one_line_exit_2(invoke(args), fragment)


# Bad input that once reached the GPU (or the no-pycuda message): each is now refused on the CPU,
# before a GPU is opened, with or without pycuda.
REFUSED_BEFORE_GPU = [
    (["transpose", "--n", "64", "--block", "64x32"], "2048 threads",
     "precheck refuses only when every selected variant is a kernel: the host row hides a block that "
     "every kernel refuses"),
    (["transpose", "--n", "64", "--block", "1x1x128"], "exceeds the device limit 64", "as above"),
    (["transpose", "--n", "1024", "--grid", "1x1"], "covers 32 elements", "as above, for a grid override"),
    (["transpose", "--variant", ",", "--n", "64"], "variant", "an empty --variant list selects nothing"),
    (["transpose", "--variant", "naive", "--shape", "1x3000000000"], "2^31",
     "a side of 2^31 or more passes the 2^33-element check but overflows the kernels' int arguments"),
    (["transpose", "--device", "-1", "--n", "64"], "--device", "a negative device index reaches the driver"),
]


@pytest.mark.parametrize("args,fragment,why", [pytest.param(*b, id=" ".join(b[0])) for b in REFUSED_BEFORE_GPU])
def test_bad_input_refused_before_the_gpu(invoke, one_line_exit_2, args, fragment, why):
    res = invoke(args)
    assert "pycuda is not installed" not in res.output, why
    one_line_exit_2(res, fragment)


# --- environment: no pycuda, no tools, a kernel that does not compile -------------------------------

@pytest.mark.skipif(HAVE_PYCUDA, reason="pycuda is installed here")
@pytest.mark.parametrize("args", [["transpose"], ["transpose", "--variant", "bankopt", "--n", "64"], ["info"]])
def test_no_pycuda_is_one_line(invoke, one_line_exit_2, args):
    res = invoke(args)
    one_line_exit_2(res, "pycuda is not installed")
    assert "pip install" in res.output


def test_missing_compute_sanitizer(invoke, one_line_exit_2, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if Path("/usr/local/cuda/bin/compute-sanitizer").exists():
        pytest.skip("compute-sanitizer is installed in /usr/local/cuda")
    one_line_exit_2(invoke(["sanitize", "transpose"]), "compute-sanitizer not found")


def test_missing_ncu(invoke, one_line_exit_2, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if list(Path("/usr/local/cuda/bin").glob("ncu")) or Path("/opt/nvidia/nsight-compute").exists():
        pytest.skip("ncu is installed in a default place")
    res = invoke(["ncu", "transpose"])
    one_line_exit_2(res, "ncu")
    assert "not found" in res.output or "pycuda" in res.output


@pytest.fixture
def tree(family_tree):
    """A private copy of the transpose family that the tests may break."""
    return family_tree("transpose")


@pytest.mark.nvcc
def test_cu_file_that_does_not_compile(invoke, tree):
    src = tree / "transpose" / "transpose.cu"
    src.write_text(src.read_text() + "\nthis is not CUDA;\n")
    res = invoke(["compile", "transpose", "--variant", "naive"])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert res.output.startswith("cudalab: ")
    assert "transpose.cu" in res.output and "error" in res.output  # nvcc's log names file and line


def test_shared_memory_beyond_the_device(invoke, one_line_exit_2, tree):
    toml = tree / "transpose" / "family.toml"
    toml.write_text(toml.read_text() + '\n[[variant]]\nname = "huge"\nsource = "transpose.cu"\n'
                    'kernel = "transpose_naive"\nblock = "32x32"\nshared = "threads * 1000"\n')
    one_line_exit_2(invoke(["transpose", "--variant", "huge", "--n", "64"]),
                           "1024000 bytes of shared memory per block; the device allows 232448")


def test_broken_family_toml_is_one_line(invoke, tree):
    (tree / "transpose" / "family.toml").write_text("[family\n")
    res = invoke(["list"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "family.toml" in res.output


class _TinyDevice:
    """A stand-in GPU with 1 MiB free: the out-of-memory refusal happens before any allocation."""

    def __init__(self, index: int = 0):
        self.limits = DeviceLimits()
        self.info = SimpleNamespace(sm_count=132, to_dict=lambda: {})
        self.closed = False

    def mem_info(self):
        return 2**20, 80 * 2**30

    def build_own_soon(self):
        return []

    def close(self):
        self.closed = True


def test_larger_than_gpu_memory_says_needed_and_free(invoke, one_line_exit_2, monkeypatch, inline_worker):
    monkeypatch.setattr(gpu, "Device", _TinyDevice)
    res = invoke(["transpose", "--variant", "naive", "--n", "1024"])
    one_line_exit_2(res, "GPU memory: needs 521.0 MiB, 1.0 MiB of GPU memory free")


@pytest.mark.gpu
def test_larger_than_gpu_memory_on_a_real_gpu(device, monkeypatch):
    """On a GPU: the same refusal from the run core with the real device (its free memory made small),
    before any allocation. (The command's path from a worker's refusal to one line is the test above;
    the worker is another process, which a patch here would not reach.)"""
    from cudalab.worker import executor as runner
    from cudalab.errors import OutOfMemoryError

    monkeypatch.setattr(type(device), "mem_info", lambda self: (2**20, 80 * 2**30))
    run = runner.FamilyRun(planning.precheck(planning.RunRequest(family="transpose", variants="naive", n="1024", roofline=False)), device)
    with pytest.raises(OutOfMemoryError, match="MiB, 1.0 MiB of GPU memory free"):
        run.run()


def test_debug_shows_the_traceback_instead(invoke):
    res = invoke(["--debug", "transpose", "--n", "0"])
    assert res.exit_code != 0 and res.exception is not None and not isinstance(res.exception, SystemExit)
