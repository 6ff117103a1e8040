"""sort's radix variant without a GPU: the three kernels emulated in NumPy lane by lane (warp ballots
as 32-bit masks, the shared-memory slots, the one-block scan in rounds), driven by the module's own
case through a fake device; the launch plan, the grid and ITEMS refusals, and nvcc builds."""

from __future__ import annotations

import importlib
import shutil

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import build, catalog
from cudalab.worker import executor as runner
from cudalab import launch as L
from cudalab.records.results import Status
from test_runcore import FAST, FakeDevice

SPEC = catalog.family("sort")
MOD = importlib.import_module("cudalab.families.sort")
RAD = importlib.import_module("cudalab.families.sort_radix")
VARIANT = SPEC.variant("radix")
FULL = np.uint64(0xFFFFFFFF)
LANES = np.arange(32, dtype=np.uint64)
DIGITS = np.arange(RAD.RADIX, dtype=np.uint32)

# --- the kernels, emulated ---------------------------------------------------------------------------------


def image(x: np.ndarray) -> np.ndarray:
    """radix_image: the unsigned image whose order is the key's order."""
    u = x.view(np.uint32)
    if x.dtype.kind == "f":
        return u ^ ((x.view(np.int32) >> 31).view(np.uint32) | np.uint32(0x80000000))
    return u ^ np.uint32(0x80000000)


def popc(m: np.ndarray) -> np.ndarray:
    """__popc of 32-bit masks held as uint64."""
    m = m.astype(np.uint64)
    m = m - ((m >> np.uint64(1)) & np.uint64(0x55555555))
    m = (m & np.uint64(0x33333333)) + ((m >> np.uint64(2)) & np.uint64(0x33333333))
    m = (m + (m >> np.uint64(4))) & np.uint64(0x0F0F0F0F)
    return ((m * np.uint64(0x01010101)) & FULL) >> np.uint64(24)


def ballot(pred: np.ndarray) -> np.ndarray:
    """__ballot_sync over the last axis (32 lanes): bit lane set where pred holds."""
    return (pred.astype(np.uint64) << LANES).sum(axis=-1, dtype=np.uint64)


def lanes_with_digit(bits, digit, lanes):
    """lanes_with_digit: AND of each vote or its complement, as the digit's bit says."""
    for b, vote in enumerate(bits):
        lanes = lanes & np.where(((digit >> b) & 1).astype(bool), vote, ~vote & FULL)
    return lanes


def tile_view(src: np.ndarray, n: int, blocks: int, block: int, items: int):
    """Each thread's ITEMS keys as (blocks, k, warp, lane), the valid flags, the digits' votes."""
    warps = block // 32
    keys = np.zeros(blocks * items * block, src.dtype)
    keys[:n] = src[:n]
    keys = keys.reshape(blocks, items, warps, 32)     # element k of thread w*32+lane: tileStart + k*block + t
    e = np.arange(blocks * items * block).reshape(keys.shape)
    valid = e < n
    return keys, valid, e


def votes(keys, valid, shift):
    d = (image(keys) >> np.uint32(shift)) & np.uint32(RAD.RADIX - 1)
    vmask = ballot(valid)
    bits = [ballot(((d >> b) & 1).astype(bool)) for b in range(RAD.RADIX_BITS)]
    return d, vmask, bits


def per_digit(bits, vmask):
    """What lane d < 16 counts: this warp's valid keys of digit d, as (blocks, k, warp, digit)."""
    return popc(lanes_with_digit([v[..., None] for v in bits], DIGITS, vmask[..., None]))


def emulate_hist(src, n, shift, counts, blocks, block, items):
    keys, valid, _ = tile_view(src, n, blocks, block, items)
    _, vmask, bits = votes(keys, valid, shift)
    counts[:] = per_digit(bits, vmask).sum(axis=(1, 2)).T.reshape(-1)   # counts[digit * blocks + block]


def emulate_scan(counts, total, block):
    """sort_radix_scan as one block of `block` threads: rounds of 16 counts a thread, a carried total."""
    per, warps = 16, block // 32
    carry = 0
    for base in range(0, total, per * block):
        v = np.zeros(per * block, np.int64)
        seg = counts[base:base + per * block].astype(np.int64)
        v[:seg.size] = seg
        v = v.reshape(block, per)
        s = v.sum(axis=1).reshape(warps, 32)
        incl = np.cumsum(s, axis=1)                          # warp_inclusive_scan
        warp_sum = np.cumsum(incl[:, 31])                     # warp 0 scans the warps' totals
        before = np.concatenate([[0], warp_sum[:-1]])
        run = (carry + before[:, None] + incl - s).reshape(block, 1)
        out = run + np.cumsum(v, axis=1) - v
        counts[base:base + seg.size] = out.reshape(-1)[:seg.size]
        carry += int(warp_sum[-1])


def emulate_scatter(src, n, shift, offsets, out, blocks, block, items, positions=None):
    keys, valid, e = tile_view(src, n, blocks, block, items)
    d, vmask, bits = votes(keys, valid, shift)
    below = (np.uint64(1) << LANES) - np.uint64(1)
    rank = popc(lanes_with_digit([v[..., None] for v in bits], d, vmask[..., None]) & below)
    warps = block // 32
    slot = per_digit(bits, vmask).transpose(0, 3, 1, 2).reshape(blocks, RAD.RADIX, items * warps).astype(np.int64)
    start = offsets.reshape(RAD.RADIX, blocks).T.astype(np.int64)      # offsets[d * blocks + b]
    slot = start[..., None] + np.cumsum(slot, axis=2) - slot           # exclusive, started at the block's place
    j = (np.arange(items)[:, None] * warps + np.arange(warps)[None, :])[None, :, :, None]
    b = np.arange(blocks)[:, None, None, None]
    pos = slot[b, d.astype(np.int64), j] + rank.astype(np.int64)
    out[pos[valid]] = keys[valid]
    if positions is not None:
        positions.append((e[valid], pos[valid]))


def emulate_radix(x: np.ndarray, block: int, items: int, scan_block: int = RAD.SCAN_BLOCK):
    """The whole sort by the module's schedule; also returns each key's original index (the moves)."""
    n, tile = x.size, block * items
    blocks = RAD.tiles(n, tile)
    bufs = [np.empty(n, x.dtype) for _ in range(2)]
    index = [np.empty(n, np.int64) for _ in range(2)]
    counts = np.empty(RAD.RADIX * blocks, np.int64)
    for shift, s, dst in RAD.schedule():
        src, src_index = (x, np.arange(n)) if s is None else (bufs[s], index[s])
        emulate_hist(src, n, shift, counts, blocks, block, items)
        emulate_scan(counts, counts.size, scan_block)
        moves: list = []
        emulate_scatter(src, n, shift, counts, bufs[dst], blocks, block, items, moves)
        (frm, to), = moves
        assert np.array_equal(np.sort(to), np.arange(n)), "positions are not a permutation"
        index[dst][to] = src_index[frm]
    return bufs[RAD.result_buffer()], index[RAD.result_buffer()]


def _inputs(n, dtype, kind, seed=7):
    return MOD.FAMILY.make_inputs(MOD.FAMILY.problem(str(n), None, dtype, {"input": kind}), np.random.default_rng(seed))["x"]


SPECIAL = {
    "float32": np.array([np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 1e-45, -1e-45, 3.4028235e38, -3.4028235e38,
                         1.5, -1.5, 2.0, -2.0, 1e-38, -1e-38, 0.0, -0.0, 1.0, -1.0], np.float32),
    "int32": np.array([-2**31, 2**31 - 1, -1, 0, 1, -2, 2, 0x0F0F0F0F, -0x0F0F0F0F, 0x70000000, -0x70000000,
                       0x10, -0x10, 0xF, -0xF, 0, -1, 2**31 - 1, -2**31], np.int32),
}


@pytest.mark.parametrize("block, items", [(32, 1), (32, 4), (64, 2), (96, 3), (256, 16)])
@pytest.mark.parametrize("n", [1, 2, 31, 33, 1000, 4096, 5003])
@pytest.mark.parametrize("dtype", ("int32", "float32"))
def test_emulated_radix_is_a_stable_sort(block, items, n, dtype):
    for kind in MOD.INPUTS:
        x = _inputs(n, dtype, kind)
        keys, order = emulate_radix(x, block, items, scan_block=64)
        assert np.array_equal(keys, np.sort(x)), (kind, block, items)
        assert np.array_equal(order, np.argsort(x, kind="stable")), (kind, "not stable")


@pytest.mark.parametrize("dtype", ("int32", "float32"))
def test_emulated_radix_orders_the_extremes(dtype):
    rng = np.random.default_rng(3)
    x = np.concatenate([SPECIAL[dtype], rng.choice(SPECIAL[dtype], 3000), _inputs(2000, dtype, "random")])
    keys, order = emulate_radix(x, 64, 4, scan_block=32)
    assert np.array_equal(keys, np.sort(x))       # == : -0.0 and +0.0 are equal to NumPy (radix puts -0.0 first)
    assert np.array_equal(order, np.argsort(image(x), kind="stable"))
    if dtype == "float32":
        zeros = keys[keys == 0]
        assert np.all(np.signbit(zeros[:np.count_nonzero(np.signbit(zeros))]))


def test_image_orders_like_the_keys():
    for dtype, x in SPECIAL.items():
        x = np.unique(x)                            # NumPy: -0.0 == 0.0, one of them stays
        assert np.all(np.diff(image(x).astype(np.int64)) > 0), dtype
    f = np.array([-0.0, 0.0], np.float32)
    assert image(f)[0] + 1 == image(f)[1]


@pytest.mark.parametrize("scan_block", [32, 64, 1024])
def test_emulated_scan_is_exclusive_across_rounds(scan_block):
    rng = np.random.default_rng(1)
    for total in (16, 16 * 33, 16 * 1024 * 3 + 16 * 5):
        c = rng.integers(0, 4097, total)
        got = c.copy()
        emulate_scan(got, total, scan_block)
        assert np.array_equal(got, np.cumsum(c) - c), (total, scan_block)


# --- the module's case on a fake device whose kernels are the emulations ------------------------------------

class RadixDevice(FakeDevice):
    """A fake GPU whose sort_radix_* launches run the NumPy emulations (with the compiled ITEMS)."""

    def __init__(self, break_scatter=False):
        super().__init__({})
        self.break_scatter = break_scatter
        self.launches: list[tuple[str, tuple, tuple, int, tuple]] = []

    def compile(self, source, defines, names):
        items = int(defines["ITEMS"])
        return {name: _Kernel(self, name, items) for name in names}


class _Kernel:
    num_regs = 40

    def __init__(self, dev, name, items):
        self.dev, self.name, self.items = dev, name, items

    def launch(self, grid, block, args, shared=0):
        self.dev.launches.append((self.name, grid, block, shared, args))
        if self.name == "sort_radix_hist":
            src, n, shift, counts = args
            emulate_hist(src.data, int(n), int(shift), counts.data, grid[0], block[0], self.items)
        elif self.name == "sort_radix_scan":
            counts, total = args
            emulate_scan(counts.data, int(total), block[0])
        else:
            src, n, shift, offsets, out = args
            m = int(n) - 1 if self.dev.break_scatter else int(n)   # drops the last key of every pass
            emulate_scatter(src.data, m, int(shift), offsets.data, out.data, grid[0], block[0], self.items)


def _run(dev, n, dtype="int32", kind="random", **kw):
    req = planning.RunRequest(family="sort", variants="radix", n=str(n), dtype=dtype, options=(("input", kind),),
                            protocol=FAST, seed=1, roofline=False, **kw)
    fr = runner.FamilyRun(planning.precheck(req), dev)
    return fr.run()[0], fr


@pytest.mark.parametrize("dtype", ("int32", "float32"))
@pytest.mark.parametrize("n", [1, 1000, 4096, 4097, 9000])
def test_case_sorts_on_the_fake_device(n, dtype):
    dev = RadixDevice()
    row, fr = _run(dev, n, dtype, "dups", block="64")
    assert row.status == Status.PASSED, row.reason
    assert row.extra["passes"] == 24 and row.extra["digit_passes"] == 8
    tiles = RAD.tiles(n, 64 * 16)
    first_run = dev.launches[:24]
    assert [k for k, *_ in first_run] == list(RAD.KERNELS) * 8
    for name, grid, block, shared, _ in first_run:
        if name == "sort_radix_scan":
            assert grid == (1, 1, 1) and block == (RAD.SCAN_BLOCK, 1, 1)
        else:
            assert grid == (tiles, 1, 1) and block == (64, 1, 1)
            assert shared == (4 * 16 * (16 * 2 + 1) if name == "sort_radix_scatter" else 0)
    d_x = first_run[0][4][0]                    # pass 0 reads the uploaded input, and nothing writes it
    assert all(args[-1] is not d_x for name, *_, args in dev.launches if name == "sort_radix_scatter")
    assert np.array_equal(d_x.data, fr.inputs["x"])


def test_an_unwritten_key_is_caught():
    row, _ = _run(RadixDevice(break_scatter=True), 3000, "float32", block="32")
    assert row.status == Status.INCORRECT


def test_the_family_sets_the_grid():
    row, _ = _run(RadixDevice(), 5000, grid="7")
    assert row.status == Status.SKIPPED and "sets its own grid (2 tiles of 4096)" in row.reason


def test_items_must_match_the_tile():
    row, _ = _run(RadixDevice(), 5000, defines=(("ITEMS", "8"),))
    assert row.status == Status.SKIPPED and "ITEMS (8)" in row.reason


# --- plan, schedule, build ---------------------------------------------------------------------------------

def test_schedule_starts_from_the_input_and_ends_in_the_result_buffer():
    plan = RAD.schedule()
    assert [s for s, _, _ in plan] == list(range(0, 32, 4))
    assert plan[0][1] is None and all(src is not None for _, src, _ in plan[1:])
    assert all(src != dst for _, src, dst in plan[1:])
    assert all(plan[i][2] == plan[i + 1][1] for i in range(len(plan) - 1))
    assert plan[-1][2] == RAD.result_buffer()


@pytest.mark.parametrize("n", [1, 4095, 4096, 4097, 2**24, 2**26])
def test_plan(n):
    p = MOD.FAMILY.problem(str(n), None, "int32", {})
    lau = planning.plan_launch(VARIANT, MOD.FAMILY, p, None, None, L.DeviceLimits())
    assert lau.tile == (4096, 1, 1) and lau.grid == (RAD.tiles(n, 4096), 1, 1)
    assert dict(lau.defines)["ITEMS"] == "16" and lau.shared == 4 * 16 * (16 * 8 + 1)
    assert 16 * lau.grid[0] <= 16 * 2**26 // 4096                 # the scan's counts: 262,144 at most
    radix_bytes = n * 4 + 2 * n * 4 + 4 * RAD.RADIX * RAD.tiles(n, 32)
    assert MOD.FAMILY.device_bytes(p) >= radix_bytes


def test_block_must_be_whole_warps():
    p = MOD.FAMILY.problem("5000", None, "int32", {})
    with pytest.raises(Exception, match="block_x % 32"):
        planning.plan_launch(VARIANT, MOD.FAMILY, p, "48", None, L.DeviceLimits())
    lau = planning.plan_launch(VARIANT, MOD.FAMILY, p, "1024", None, L.DeviceLimits())
    assert lau.tile == (16384, 1, 1) and lau.shared <= 48 * 1024


@pytest.mark.skipif(shutil.which("nvcc") is None and not __import__("os").path.exists("/usr/local/cuda/bin/nvcc"),
                    reason="nvcc not installed")
@pytest.mark.parametrize("dtype", ("int32", "float32"))
def test_radix_kernels_compile_without_spills(dtype):
    p = MOD.FAMILY.problem("2^24", None, dtype, {})
    lau = planning.plan_launch(VARIANT, MOD.FAMILY, p, None, None, L.DeviceLimits())
    res = {k.name: k for k in build.build(SPEC.directory / "sort.cu", dict(lau.defines), "sm_90").kernels}
    assert set(RAD.KERNELS) <= set(res)
    for name in RAD.KERNELS:
        k = res[name]
        assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0, name
        assert k.registers <= 64, (name, k.registers)   # 256 threads x 64: 4 blocks an SM
