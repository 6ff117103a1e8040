"""sort without a GPU: catalog, problem parsing, inputs, the check against the wrong answers it must
catch (unstable but sorted, a lost key, unwritten poison), the poison choice, the host row, NumPy
emulations of the kernels' index arithmetic driven by the module's own launch schedule, the 'rate'
metric plumbing, and nvcc builds for both dtypes (radix's and onesweep's own tests: test_sort_radix.py,
test_sort_onesweep.py)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import catalog, report
from cudalab import launch as L
from cudalab.bench import Stats
from cudalab.errors import UsageError
from cudalab.families import load
from cudalab.families.model import SetupContext
from cudalab.records.results import PASSED, Result

SPEC = catalog.family("sort")
MOD = importlib.import_module("cudalab.families.sort")
Sorted = MOD.Sorted
DTYPES = ("int32", "float32")


def _problem(n="1000", dtype="int32", kind="random"):
    return MOD.FAMILY.problem(str(n), None, dtype, {"input": kind})


def _inputs(p, seed=5):
    return MOD.FAMILY.make_inputs(p, np.random.default_rng(seed))


# --- catalog and problem ---------------------------------------------------------------------------------

def test_catalog():
    assert SPEC.names() == ["host", "bitonic", "merge-rank", "radix", "onesweep", "cupy"]
    assert SPEC.metric == "rate" and set(SPEC.dtypes) == set(DTYPES) and SPEC.default_dtype == "int32"
    assert SPEC.variant("cupy").kind == "library" and SPEC.variant("host").kind == "host"
    assert SPEC.variant("merge-rank").param("stable") and not SPEC.variant("bitonic").param("stable")
    # radix is stable but returns no index: claiming stability would make its result carry one
    assert SPEC.variant("radix").param("radix") and not SPEC.variant("radix").param("stable")
    assert SPEC.variant("onesweep").param("onesweep") and not SPEC.variant("onesweep").param("stable")
    assert SPEC.variant("bitonic").param("pad_pow2")
    assert load("sort") is MOD.FAMILY


def test_problem_parsing():
    p = MOD.FAMILY.problem(None, None, "int32", {})
    assert p.dims == (2**24,) and p.opt("input") == "random"
    assert _problem("2^28").dims == (2**28,)
    assert _problem("1", kind="reverse").opt("input") == "reverse"
    with pytest.raises(UsageError, match="out of range"):
        _problem(str(2**28 + 1))
    with pytest.raises(UsageError, match="--input"):
        _problem(kind="shuffled")
    with pytest.raises(UsageError, match="--n"):
        MOD.FAMILY.problem(None, "8x8", "int32", {})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", MOD.INPUTS)
def test_inputs(dtype, kind):
    x = _inputs(_problem("5000", dtype, kind))["x"]
    assert x.dtype == np.dtype(dtype) and x.shape == (5000,) and x.flags.c_contiguous
    d = np.diff(x.astype(np.float64))
    if kind == "sorted":
        assert np.all(d >= 0)
    elif kind == "reverse":
        assert np.all(d <= 0)
    elif kind == "dups":
        assert np.unique(x).size <= MOD.DUP_VALUES
    else:
        assert np.unique(x).size > 4900 and np.any(d < 0) and np.any(d > 0)


# --- check -----------------------------------------------------------------------------------------------------

@pytest.fixture
def dups():
    p = _problem("3000", "int32", "dups")
    inp = _inputs(p)
    return p, inp["x"], MOD.FAMILY.reference(p, inp)


def test_check_passes_keys_and_stable_order(dups):
    p, x, ref = dups
    assert MOD.FAMILY.check(p, Sorted(np.sort(x)), ref).ok
    assert MOD.FAMILY.check(p, Sorted(ref.keys, np.argsort(x, kind="stable").astype(np.int32)), ref).ok


def test_check_catches_unstable_but_sorted(dups):
    p, x, ref = dups
    # Sorted keys, but two equal keys swapped: exactly what a non-stable merge would return.
    order = ref.order.copy()
    order[0], order[1] = order[1], order[0]
    assert x[order[0]] == x[order[1]]
    chk = MOD.FAMILY.check(p, Sorted(x[order], order), ref)
    assert not chk.ok and "not stable" in chk.detail
    # A real unstable sort (heap sort) also fails.
    heap = np.argsort(x, kind="heapsort").astype(np.int32)
    assert np.array_equal(x[heap], ref.keys)
    assert not MOD.FAMILY.check(p, Sorted(x[heap], heap), ref).ok


def test_check_catches_a_lost_or_wrong_key(dups):
    p, x, ref = dups
    lost = ref.keys.copy()
    lost[-1] = lost[0]          # one key dropped, another written twice
    assert not MOD.FAMILY.check(p, Sorted(lost), ref).ok
    assert not MOD.FAMILY.check(p, Sorted(ref.keys[:-1]), ref).ok
    swapped = ref.keys.copy()
    i = int(np.argmax(swapped != swapped[0]))
    swapped[0], swapped[i] = swapped[i], swapped[0]
    assert not MOD.FAMILY.check(p, Sorted(swapped), ref).ok
    order = ref.order.copy()
    order[5] = order[6]          # an index lost: keys right, payload wrong
    chk = MOD.FAMILY.check(p, Sorted(ref.keys, order), ref)
    assert not chk.ok and "lost" in chk.detail


def test_check_catches_the_poison():
    p = _problem("1000", "float32")
    x = _inputs(p)["x"]
    ref = MOD.FAMILY.reference(p, {"x": x})
    keys = ref.keys.copy()
    keys.view(np.uint8)[-4:] = MOD.key_poison(x)
    assert np.isnan(keys[-1]) and not MOD.FAMILY.check(p, Sorted(keys), ref).ok
    pi = _problem("1000", "int32", "dups")
    xi = _inputs(pi)["x"]
    refi = MOD.FAMILY.reference(pi, {"x": xi})
    order = refi.order.copy()
    order.view(np.uint8)[-4:] = MOD.INDEX_POISON
    assert not MOD.FAMILY.check(pi, Sorted(refi.keys, order), refi).ok


def test_int_poison_is_never_an_input_key():
    x = np.array([5, -1, 7], dtype=np.int32)        # -1 is 0xFFFFFFFF: the first candidate is taken
    b = MOD.key_poison(x)
    assert b != 0xFF
    assert np.frombuffer(bytes([b]) * 4, dtype=np.int32)[0] not in x
    assert MOD.key_poison(np.array([1, 2], np.int32)) == 0xFF
    assert MOD.key_poison(np.array([1.0], np.float32)) == 0xFF      # NaN
    full = np.frombuffer(b"".join(bytes([c]) * 4 for c in MOD.POISON_BYTES), dtype=np.int32)
    with pytest.raises(UsageError):
        MOD.key_poison(full)


def test_stable_order_is_computed_only_when_asked():
    p = _problem("100")
    ref = MOD.FAMILY.reference(p, _inputs(p))
    assert ref._order is None
    MOD.FAMILY.check(p, Sorted(ref.keys), ref)
    assert ref._order is None


# --- host row ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", MOD.INPUTS)
def test_host_row(kind):
    p = _problem("2001", "float32", kind)
    inp = _inputs(p)
    c = MOD.FAMILY.setup(SetupContext(SPEC.variant("host"), None, p, inp, None))
    c.run()
    assert c.timer == "host" and c.items == 2001
    assert MOD.FAMILY.check(p, c.result(), MOD.FAMILY.reference(p, inp)).ok


# --- the kernels' arithmetic, emulated in NumPy, driven by the module's schedule ---------------------------------

def _pair_low(t, j):
    return ((t & ~(j - 1)) << 1) | (t & (j - 1))


def _cx(buf, i, j, asc):
    a, b = buf[i].copy(), buf[i + j].copy()
    swap = (a > b) == asc
    buf[i] = np.where(swap, b, a)
    buf[i + j] = np.where(swap, a, b)


def _tile_steps(buf, tile, block, per, k, jtop):
    """bitonic_tile_steps for every tile: thread tid handles pairs tid + p * blockDim. The tiles are
    independent blocks, so each step runs on all of them at once (one NumPy call, not one a tile)."""
    t = np.concatenate([np.arange(block) + p * block for p in range(per // 2)])
    bases = np.arange(0, buf.size, tile)[:, None]
    j = jtop
    while j > 0:
        i = (bases + _pair_low(t, j)).ravel()
        _cx(buf, i, j, (i & k) == 0)
        j >>= 1


def _global_steps(buf, levels, k, j):
    """bitonic_global_steps<L>: 2^L elements a thread, distances j .. j >> (L-1)."""
    t = np.arange(buf.size >> levels)
    i = t
    for b in range(levels - 1, -1, -1):
        i = _pair_low(i, j >> b)
    asc = (i & k) == 0
    offs = [sum(j >> (levels - 1 - b) for b in range(levels) if e & (1 << b)) for e in range(1 << levels)]
    v = [buf[i + o].copy() for o in offs]
    for b in range(levels - 1, -1, -1):
        for e in range(1 << levels):
            if not e & (1 << b):
                lo, hi = v[e], v[e | (1 << b)]
                swap = (lo > hi) == asc
                v[e], v[e | (1 << b)] = np.where(swap, hi, lo), np.where(swap, lo, hi)
    for o, val in zip(offs, v):
        buf[i + o] = val


def emulate_bitonic(x, block, per=8):
    tile = per * block
    n2 = max(MOD.pow2_at_least(x.size), tile)
    pad = np.iinfo(x.dtype).max if x.dtype.kind == "i" else np.inf
    buf = np.full(n2, pad, dtype=x.dtype)
    buf[:x.size] = x
    k = 2
    while k <= tile:
        _tile_steps(buf, tile, block, per, k, k >> 1)
        k <<= 1
    for name, k, j in MOD.bitonic_plan(n2, tile):
        if name == "sort_bitonic_merge":
            _tile_steps(buf, tile, block, per, k, tile >> 1)
        else:
            _global_steps(buf, MOD.LEVELS[name], k, j)
    return buf[:x.size]


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 100, 1000, 4097])
@pytest.mark.parametrize("kind", MOD.INPUTS)
def test_bitonic_schedule_sorts(n, kind):
    x = _inputs(_problem(n, "int32", kind))["x"]
    for block, per in ((2, 4), (2, 8), (4, 8)):   # tiles of 8, 16, 32: many global stages at small n
        assert np.array_equal(emulate_bitonic(x, block, per), np.sort(x)), (n, kind, block, per)


def test_bitonic_schedule_fuses_distances():
    plan = MOD.bitonic_plan(2**24, 4096)
    names = [p[0] for p in plan]
    assert names.count("sort_bitonic_merge") == 12                       # stages 2^13 .. 2^24
    assert {"sort_bitonic_step4", "sort_bitonic_step3", "sort_bitonic_step2", "sort_bitonic_step"} <= set(names)
    assert len(plan) - 12 == sum(-(-s // 4) for s in range(1, 13))      # ceil(steps / 4) passes a stage
    for name, k, j in plan:                                              # every fused distance >= tile
        if name != "sort_bitonic_merge":
            assert j >> (MOD.LEVELS[name] - 1) >= 4096


def _rank(a, lo, hi, key, strict):
    first = lo
    while lo < hi:
        mid = lo + ((hi - lo) >> 1)
        if (a[mid] < key) if strict else not (key < a[mid]):
            lo = mid + 1
        else:
            hi = mid
    return lo - first


def _merged_position(a, m, w, l, key):
    run = l // w
    left = (run & ~1) * w
    if run & 1 == 0:
        r0 = left + w
        if r0 >= m:
            return l
        return l + _rank(a, r0, min(r0 + w, m), key, True)
    return l - w + _rank(a, left, left + w, key, False)


def emulate_merge_rank(x, tile):
    """sort_merge_tile (per tile, runs 1 .. tile) then sort_merge_pass (runs tile .. n), as sort.cu."""
    n = x.size
    keys, vals = x.copy(), np.arange(n, dtype=np.int32)
    for base in range(0, n, tile):
        m = min(tile, n - base)
        k0, v0 = keys[base:base + m].copy(), vals[base:base + m].copy()
        w = 1
        while w < tile:
            k1, v1 = np.empty_like(k0), np.empty_like(v0)
            for l in range(m):
                p = _merged_position(k0, m, w, l, k0[l])
                k1[p], v1[p] = k0[l], v0[l]
            k0, v0 = k1, v1
            w <<= 1
        keys[base:base + m], vals[base:base + m] = k0, v0
    w = tile
    while w < n:
        k1, v1 = np.empty_like(keys), np.empty_like(vals)
        for l in range(n):
            p = _merged_position(keys, n, w, l, keys[l])
            k1[p], v1[p] = keys[l], vals[l]
        keys, vals = k1, v1
        w *= 2
    return keys, vals


@pytest.mark.parametrize("n", [1, 2, 5, 16, 17, 100, 333])
@pytest.mark.parametrize("kind", MOD.INPUTS)
def test_merge_rank_arithmetic_is_a_stable_sort(n, kind):
    p = _problem(n, "int32", kind)
    x = _inputs(p)["x"]
    keys, order = emulate_merge_rank(x, tile=8)
    assert MOD.FAMILY.check(p, Sorted(keys, order), MOD.FAMILY.reference(p, {"x": x})).ok


def test_merge_rank_pass_count():
    lau = planning.plan_launch(SPEC.variant("merge-rank"), MOD.FAMILY, _problem("2^24"), None, None, L.DeviceLimits())
    assert lau.tile[0] == 1024 and lau.grid[0] == 2**24 // 1024
    assert lau.shared == 2 * 1024 * 8


# --- launch plans and builds ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 1000, 4096, 4097, 2**24, 2**28])
def test_bitonic_plan_covers_the_padded_buffer(n):
    lau = planning.plan_launch(SPEC.variant("bitonic"), MOD.FAMILY, _problem(n), None, None, L.DeviceLimits())
    n2 = max(MOD.pow2_at_least(n), lau.tile[0])
    assert lau.grid == (n2 // lau.tile[0], 1, 1)
    assert lau.shared == lau.tile[0] * 4 and dict(lau.defines)["PER"] == "8"


def test_sanitize_sizes_one_multiple_of_the_tiles_one_not():
    sizes = [int(s["n"]) for s in MOD.FAMILY.SANITIZE_SIZES]
    assert any(s % 8192 == 0 and s % 6144 == 0 and s % 4096 == 0 for s in sizes)
    assert any(s % 1024 and s % 4096 and s % 6144 for s in sizes)


@pytest.mark.nvcc
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernels_compile_for_both_dtypes(dtype):
    from cudalab import build

    defines = dict(MOD.FAMILY.defines(_problem(dtype=dtype), SPEC.variant("bitonic")), PER="4", ITEMS="8")
    res = {k.name: k for k in build.build(SPEC.directory / "sort.cu", defines, 'sm_90').kernels}
    assert set(res) >= {"sort_bitonic_tile", "sort_bitonic_merge", "sort_bitonic_step", "sort_bitonic_step2",
                        "sort_bitonic_step3", "sort_bitonic_step4", "sort_merge_tile", "sort_merge_pass",
                        "sort_radix_hist", "sort_radix_scan", "sort_radix_scatter"}
    assert not any(n.startswith("sort_onesweep") for n in res)  # its own source: test_sort_onesweep builds it
    assert all(k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0 for k in res.values())


# --- the 'rate' metric (items per second, % of the library row) --------------------------------------------------

def _row(name, kind, ms, items):
    stats = Stats(median=ms, iqr=0.0, min=ms, max=ms, mean=ms, n=3, samples=(ms,))
    return Result(variant=name, kind=kind, status=PASSED, stats=stats, extra={"rate": items / (ms / 1e3) / 1e9})


def test_rate_metric_percent_of_library_row():
    rows = [_row("bitonic", "kernel", 4.0, 2**24), _row("cupy", "library", 1.0, 2**24)]
    out = report.pct_column(rows, "rate")
    assert out[0].pct_roofline == pytest.approx(25.0) and out[1].pct_roofline == pytest.approx(100.0)
    assert report.rate_of(out[1], "rate") == pytest.approx(2**24 / 1e-3 / 1e9)
    table = report.results_table(out, "rate")
    assert "G items/s" in [c.header for c in table.columns] and "% of ref" in [c.header for c in table.columns]
    assert "G items/s" in report.markdown_table(out, "rate")
    assert report.pct_column(rows, "bandwidth") == rows
