"""Pure modules: catalog validation, launch math, expressions, timing statistics, ptxas parsing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cudalab import bench, build, catalog
from cudalab.catalog import expr
from cudalab import launch as L
from cudalab.errors import CatalogError, LaunchConfigError, UsageError

# --- catalog ------------------------------------------------------------------------------------


def test_every_family_loads_and_has_a_module():
    from cudalab.families import load

    cat = catalog.load_catalog()
    assert {"copy", "transpose"} <= set(cat)
    for spec in cat.values():
        module = load(spec.module)
        for name in ("problem", "extent", "work", "device_bytes", "make_inputs", "reference", "check", "setup"):
            assert callable(getattr(module, name)), (spec.name, name)
        for v in spec.variants:
            if v.kind == "kernel":
                assert (spec.directory / v.source).is_file()


def test_variant_order_is_declaration_order():
    assert catalog.family("transpose").names()[:5] == ["host", "naive", "shared", "block", "bankopt"]


def _family(tmp_path: Path, body: str, name: str = "demo") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "k.cu").write_text('extern "C" __global__ void demo_a(float *x) { x[threadIdx.x] = 1.0f; }\n')
    (d / "family.toml").write_text(textwrap.dedent(body))
    return d


GOOD = """
[family]
name = "demo"
[[variant]]
name = "a"
source = "k.cu"
kernel = "demo_a"
block = "32x8"
"""


def test_catalog_reads_a_good_family(tmp_path):
    spec = catalog.load_family(_family(tmp_path, GOOD))
    v = spec.variant("a")
    assert v.block == (32, 8, 1) and v.grid == "tiles" and v.kind == "kernel" and not v.grid_stride


@pytest.mark.parametrize("change, message", [
    (('block = "32x8"', 'block = "32x8"\ncolour = "red"'), "unknown keys"),
    (('name = "a"', 'name = "A b"'), "variant name"),
    (('source = "k.cu"', 'source = "missing.cu"'), "not found"),
    (('kernel = "demo_a"', 'kernel = "1bad"'), "not a C identifier"),
    (('block = "32x8"', 'block = "0x8"'), "at least 1"),
    (('block = "32x8"', 'grid = "sometimes"'), "grid"),
    (('block = "32x8"', 'kind = "magic"'), "kind"),
    (('name = "demo"', 'name = "other"'), "must match its folder"),
])
def test_catalog_refuses_bad_entries(tmp_path, change, message):
    with pytest.raises(CatalogError, match=message):
        catalog.load_family(_family(tmp_path, GOOD.replace(*change, 1)))


def test_catalog_refuses_duplicates(tmp_path):
    body = GOOD + GOOD.split("[family]\nname = \"demo\"", 1)[1]
    with pytest.raises(CatalogError, match="declared twice"):
        catalog.load_family(_family(tmp_path, body))


def test_unknown_family_and_variant_name_the_valid_ones():
    with pytest.raises(UsageError, match="valid: .*transpose"):
        catalog.family("transpos")
    with pytest.raises(UsageError, match="valid: host, naive"):
        catalog.family("transpose").select("naive,bogus")


# --- launch math -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [("16384", 16384), ("16k", 16384), ("1M", 2**20), ("2^24", 2**24),
                                         ("1_000", 1000), ("4g", 4 * 2**30)])
def test_parse_size(text, value):
    assert L.parse_size(text) == value


@pytest.mark.parametrize("text", ["0", "-5", "abc", "1.5", "", "16kk"])
def test_parse_size_refuses(text):
    with pytest.raises(UsageError):
        L.parse_size(text)


def test_parse_dims_and_format():
    assert L.parse_dims("32x8") == (32, 8, 1)
    assert L.parse_dims("8x8x4") == (8, 8, 4)
    assert L.fmt_dims((32, 8, 1)) == "32x8"
    assert L.fmt_dims((1, 1, 1)) == "1"
    for bad in ("32x", "x", "1x2x3x4", "0x4", "32*8"):
        with pytest.raises(UsageError):
            L.parse_dims(bad)


def test_grid_for_tiles_rounds_up():
    assert L.grid_for_tiles((1000, 33, 1), (32, 32, 1)) == (32, 2, 1)
    assert L.grid_for_tiles((1, 1, 1), (64, 64, 1)) == (1, 1, 1)


def test_check_launch_names_the_limit():
    lim = L.DeviceLimits()
    with pytest.raises(LaunchConfigError, match="1024 per block") as e:
        L.check_launch((64, 32, 1), (1, 1, 1), 0, lim)
    assert e.value.limit == "maxThreadsPerBlock"
    with pytest.raises(LaunchConfigError, match="dimension z") as e:
        L.check_launch((1, 1, 128), (1, 1, 1), 0, lim)
    with pytest.raises(LaunchConfigError, match="grid .* dimension y"):
        L.check_launch((32, 1, 1), (1, 70000, 1), 0, lim)
    with pytest.raises(LaunchConfigError, match="shared memory"):
        L.check_launch((32, 1, 1), (1, 1, 1), 10**6, lim)
    L.check_launch((1024, 1, 1), (2**31 - 1, 65535, 65535), 48 * 1024, lim)


def test_check_covers():
    with pytest.raises(LaunchConfigError, match="at least 4 blocks"):
        L.check_covers((3, 1, 1), (32, 1, 1), (100, 1, 1), grid_stride=False)
    L.check_covers((4, 1, 1), (32, 1, 1), (100, 1, 1), grid_stride=False)
    L.check_covers((1, 1, 1), (32, 1, 1), (100, 1, 1), grid_stride=True)


# --- expressions ----------------------------------------------------------------------------------


def test_expressions():
    names = {"block_x": 32, "block_y": 8, "threads": 256, "itemsize": 4}
    assert expr.evaluate("threads * itemsize", names) == 1024
    assert expr.evaluate("block_x % block_y == 0", names) == 1
    assert expr.evaluate("block_x <= 16 or block_y == 8", names) == 1
    assert expr.evaluate("block_x // 3", names) == 10
    assert expr.evaluate(7, names) == 7
    with pytest.raises(CatalogError, match="unknown name"):
        expr.evaluate("tile * 2", names)
    with pytest.raises(CatalogError, match="only integers"):
        expr.evaluate("__import__('os')", names)


# --- timing statistics ----------------------------------------------------------------------------


def test_summarize():
    s = bench.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0 and s.min == 1.0 and s.max == 100.0 and s.n == 5
    assert s.iqr == pytest.approx(2.0)
    assert s.samples == (1.0, 2.0, 3.0, 4.0, 100.0)
    with pytest.raises(ValueError):
        bench.summarize([])


def test_measure_stops_when_spread_is_small():
    calls = []

    def sample():
        calls.append(1)
        return 1.0

    s = bench.measure(sample, bench.Protocol(warmup=2, min_samples=10, budget_s=100))
    assert s.n == 10 and len(calls) == 12  # warm-ups are discarded


def test_measure_stops_at_budget_with_noisy_samples():
    clock = iter(range(1000))
    noisy = iter([1.0, 5.0] * 500)
    s = bench.measure(lambda: next(noisy), bench.Protocol(warmup=0, min_samples=4, budget_s=10),
                      clock=lambda: float(next(clock)))
    # the spread never gets small; the fake clock ticks once per check from sample 4 on, so the
    # 10 s budget is spent at the 13th sample
    assert s.n == 13


def test_measure_respects_max_samples():
    noisy = iter([1.0, 5.0] * 500)
    s = bench.measure(lambda: next(noisy), bench.Protocol(warmup=0, min_samples=2, max_samples=7, budget_s=1e9))
    assert s.n == 7


# --- ptxas parsing --------------------------------------------------------------------------------

PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'transpose_tiled' for 'sm_90'
ptxas info    : Function properties for transpose_tiled
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 16640 bytes smem
ptxas info    : Compile time = 13.395 ms
ptxas info    : Compiling entry function 'transpose_naive' for 'sm_90'
ptxas info    : Function properties for transpose_naive
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
"""


def test_parse_ptxas():
    a, b = build.parse_ptxas(PTXAS)
    assert (a.name, a.registers, a.static_shared, a.stack_frame, a.spill_stores, a.spill_loads, a.barriers) == (
        "transpose_tiled", 32, 16640, 8, 4, 12, 1)
    assert (b.name, b.registers, b.static_shared, b.spill_stores) == ("transpose_naive", 12, 0, 0)
