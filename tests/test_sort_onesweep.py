"""sort's onesweep variant without a GPU: the three kernels emulated in NumPy (the upfront histogram
of all four bytes, the warp-private ranking item by item, the look-back over packed status words played
by tiles that a seeded scheduler interleaves step by step, up to many tiles in flight), driven by the
module's own case through a fake device whose fresh memory is garbage; the mutations the kernel
carries for the GPU tests (a look-back that drops the predecessor's prefix, a dropped tail tile, an
unstable rank) caught by the family's check; the launch plan and its refusals; nvcc builds."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import build_share
from cudalab import plan as planning
from cudalab import build, catalog
from cudalab.worker import executor as runner
from cudalab import launch as L
from cudalab.records.results import Status
from test_runcore import FAST, FakeArray, FakeDevice
from test_sort_radix import image

SPEC = catalog.family("sort")
MOD = importlib.import_module("cudalab.families.sort")
OS = importlib.import_module("cudalab.families.sort_onesweep")
VARIANT = SPEC.variant("onesweep")

# --- the kernels, emulated ---------------------------------------------------------------------------------


def digits(keys: np.ndarray, p: int) -> np.ndarray:
    """os_digit: byte p of the radix image."""
    return ((image(keys) >> np.uint32(8 * p)) & np.uint32(0xFF)).astype(np.int64)


def emulate_init(scratch: np.ndarray, words: int) -> None:
    scratch[:words // 4 * 4] = 0


def emulate_hist(src: np.ndarray, n: int, counts: np.ndarray) -> None:
    """sort_onesweep_hist: counts[p * 256 + d] += keys whose byte p is d (atomics: order does not matter)."""
    for p in range(OS.PASSES):
        counts[p * OS.RADIX:(p + 1) * OS.RADIX] += np.bincount(digits(src[:n], p), minlength=OS.RADIX).astype(np.uint32)


class Tile:
    """One block of sort_onesweep_pass, as steps a scheduler can interleave with other blocks'."""

    def __init__(self, src, n, p, scratch, out, block, items, tile_id, mutation=0):
        self.src, self.n, self.p, self.scratch, self.out = src, n, p, scratch, out
        self.block, self.items, self.tile, self.mutation = block, items, tile_id, mutation
        self.tile_keys = block * items
        ntiles = OS.tiles(n, self.tile_keys)
        self.status = scratch[OS.status_offset(n, self.tile_keys, p):][:ntiles * OS.RADIX].reshape(ntiles, OS.RADIX)
        self.steps = self._steps()

    def rank(self):
        """Load, rank within the warps (match_any item by item), scan the warps and the digits."""
        base, warps = self.tile * self.tile_keys, self.block // 32
        start = np.zeros(OS.RADIX, np.int64)
        if self.tile == 0:
            c = self.scratch[self.p * OS.RADIX:(self.p + 1) * OS.RADIX].astype(np.int64)
            start = np.cumsum(c) - c
        count = np.zeros((warps, OS.RADIX), np.int64)
        lane = np.arange(32)
        before = (lane[None, :] < lane[:, None]) if self.mutation != 3 else (lane[None, :] > lane[:, None])
        warp = np.arange(warps)[:, None]
        slots = []                                  # (tile positions, digits, warps, ranks within the warp)
        for i in range(self.items):                 # every warp at once: they rank their own keys
            q = warp * 32 * self.items + 32 * i + lane        # [warp, lane]: tile positions of item i
            valid = base + q < self.n
            d = np.where(valid, digits(self.src[np.minimum(base + q, self.n - 1)], self.p), -1)
            same = d[:, None, :] == d[:, :, None]             # [warp, lane, other]: match_any
            ahead = (same & before).sum(axis=2)
            w = np.broadcast_to(warp, q.shape)[valid]
            slots.append((q[valid], d[valid], w, count[w, d[valid]] + ahead[valid]))
            np.add.at(count, (w, d[valid]), 1)
        total = count.sum(axis=0)
        warp_start = np.cumsum(count, axis=0) - count
        local = np.cumsum(total) - total
        self.sorted = np.empty(self.tile_keys, self.src.dtype)
        for q, d, w, r in slots:
            self.sorted[local[d] + warp_start[w, d] + r] = self.src[base + q]
        return start, total, local

    def _steps(self):
        start, total, local = self.rank()
        t = self.tile
        if t == 0:
            self.status[0] = OS.FLAG_PREFIX | (start + total)
            prefix = start
        else:
            self.status[t] = OS.FLAG_AGGREGATE | total
            yield                                   # published: others may read it from here on
            prefix = np.zeros(OS.RADIX, np.int64)
            j = np.full(OS.RADIX, t - 1)
            done = np.zeros(OS.RADIX, bool)
            while not done.all():                   # one relaxed load a digit per step
                w = self.status[j, np.arange(OS.RADIX)].astype(np.int64)
                is_p = ~done & ((w & OS.FLAG_PREFIX) != 0)
                is_a = ~done & ~is_p & ((w & OS.FLAG_AGGREGATE) != 0)
                if not (is_p | is_a).any():
                    yield "waiting"
                    continue
                add = np.where(is_p & (self.mutation == 1), 0, w & OS.COUNT_MASK)
                prefix = prefix + np.where(is_p | is_a, add, 0)
                assert np.all(j[is_a] > 0), "the walk passed tile 0"
                j = j - is_a
                done |= is_p
                yield
            self.status[t] = OS.FLAG_PREFIX | (prefix + total)
            yield
        glob = prefix - local
        left = self.n - t * self.tile_keys
        m = (self.tile_keys if left >= self.tile_keys else 0) if self.mutation == 2 else min(left, self.tile_keys)
        k = self.sorted[:m]
        at = glob[digits(k, self.p)] + np.arange(m)
        if self.mutation:                           # as the kernel's mutants: nothing past n
            keep = (at >= 0) & (at < self.n)
            at, k = at[keep], k[keep]
        self.out[at] = k


def emulate_pass(src, n, p, scratch, out, grid, block, items, resident=6, seed=0, mutation=0):
    """One launch: blocks take tiles from pass p's counter as they start; a seeded scheduler runs one
    step of a random running block at a time, with at most `resident` blocks running."""
    rng = np.random.default_rng(seed)
    counter = OS.COUNTS_WORDS + p
    running: list[Tile] = []
    started = 0
    while started < grid or running:
        can_start = started < grid and len(running) < resident
        if can_start and (not running or rng.random() < 0.5):
            tile_id = int(scratch[counter])
            scratch[counter] += 1
            running.append(Tile(src, n, p, scratch, out, block, items, tile_id, mutation))
            started += 1
            continue
        progressed = False
        for t in rng.permutation(len(running)):
            step = next(running[t].steps, StopIteration)
            if step is StopIteration:
                running.pop(t)
                progressed = True
                break
            if step != "waiting":
                progressed = True
                break
        if not progressed and not can_start:
            raise AssertionError("deadlock: every running block waits")


def emulate_onesweep(x, block, items, resident=6, seed=0, mutation=0):
    """The whole sort by the module's schedule on garbage-filled buffers."""
    n, tile = x.size, block * items
    words = OS.scratch_words(n, tile)
    scratch = np.full(words, 0xA5A5A5A5, np.uint32)
    bufs = [np.full(n, -7, x.dtype) for _ in range(2)]
    emulate_init(scratch, words)
    emulate_hist(x, n, scratch[:OS.COUNTS_WORDS])
    for p, s, dst in OS.schedule():
        emulate_pass(x if s is None else bufs[s], n, p, scratch, bufs[dst], OS.tiles(n, tile), block, items,
                     resident, seed + p, mutation)
    return bufs[OS.result_buffer()]


def _inputs(n, dtype, kind, seed=7):
    return MOD.FAMILY.make_inputs(MOD.FAMILY.problem(str(n), None, dtype, {"input": kind}), np.random.default_rng(seed))["x"]


@pytest.mark.parametrize("block, items", [(256, 8), (288, 9)])
@pytest.mark.parametrize("n", [1, 2305, 7000])
@pytest.mark.parametrize("dtype", ("int32", "float32"))
def test_emulated_onesweep_is_a_stable_sort(block, items, n, dtype):
    for kind in MOD.INPUTS:
        x = _inputs(n, dtype, kind)
        keys = emulate_onesweep(x, block, items, seed=n)
        assert np.array_equal(keys, np.sort(x)), (kind, block, items)
    # Stability a keys-only sort can show: ties on every byte but the last, carried through 4 passes.
    x = (np.arange(n, dtype=np.int64)[::-1] % 251 | (np.arange(n) % 3 << 24)).astype(np.int32)
    assert np.array_equal(emulate_onesweep(x, block, items), np.sort(x))


@pytest.mark.parametrize("resident", [1, 2, 40])
def test_lookback_under_any_interleaving(resident):
    # One block at a time (every predecessor done: PREFIX at once), two (the walk often meets an
    # AGGREGATE), forty (long walks over tiles still looking back themselves).
    x = _inputs(256 * 8 * 23 + 5, "int32", "random")
    for seed in range(3):
        assert np.array_equal(emulate_onesweep(x, 256, 8, resident=resident, seed=seed), np.sort(x))


def test_status_words_pack_flag_and_count():
    assert OS.FLAG_AGGREGATE & OS.FLAG_PREFIX == 0 and OS.COUNT_MASK == (1 << 30) - 1
    assert MOD.MAX_N <= OS.COUNT_MASK                       # a count never reaches the flags
    assert (OS.FLAG_PREFIX | MOD.MAX_N) & OS.COUNT_MASK == MOD.MAX_N
    assert OS.FLAG_PREFIX < 2**32 and OS.scratch_words(5000, 4096) % 4 == 0


@pytest.mark.parametrize("mutation, n", [(1, 2048 * 9), (2, 2048 * 9 + 100), (3, 5000)])
def test_emulated_mutations_are_caught(mutation, n):
    p = MOD.FAMILY.problem(str(n), None, "int32", {"input": "random"})
    x = MOD.FAMILY.make_inputs(p, np.random.default_rng(1))["x"]
    keys = emulate_onesweep(x, 256, 8, mutation=mutation)
    assert not MOD.FAMILY.check(p, MOD.Sorted(keys), MOD.FAMILY.reference(p, {"x": x})).ok


# --- the module's case on a fake device whose kernels are the emulations ------------------------------------

class OnesweepDevice(FakeDevice):
    """A fake GPU whose sort_onesweep_* launches run the emulations; fresh memory is garbage, not zeros."""

    def __init__(self, mutation=0, skip_init=False):
        super().__init__({})
        self.mutation, self.skip_init = mutation, skip_init
        self.launches: list[tuple[str, tuple, tuple, int, tuple]] = []

    def empty(self, shape, dtype, pitched=False):
        arr = FakeArray(shape, dtype)
        arr.poison(0xA5)
        return arr

    def compile(self, source, defines, names):
        return {name: _Kernel(self, name, int(defines["ITEMS"])) for name in names}


class _Kernel:
    num_regs = 80

    def __init__(self, dev, name, items):
        self.dev, self.name, self.items = dev, name, items

    def launch(self, grid, block, args, shared=0):
        self.dev.launches.append((self.name, grid, block, shared, args))
        if self.name == "sort_onesweep_init":
            scratch, words = args
            if not self.dev.skip_init:
                emulate_init(scratch.data, int(words))
        elif self.name == "sort_onesweep_hist":
            src, n, scratch = args
            emulate_hist(src.data, int(n), scratch.data[:OS.COUNTS_WORDS])
        else:
            src, n, p, scratch, out = args
            emulate_pass(src.data, int(n), int(p), scratch.data, out.data, grid[0], block[0], self.items,
                         seed=int(p), mutation=self.dev.mutation)


def _run(dev, n, dtype="int32", kind="random", **kw):
    req = planning.RunRequest(family="sort", variants="onesweep", n=str(n), dtype=dtype, options=(("input", kind),),
                            protocol=FAST, seed=1, roofline=False, **kw)
    fr = runner.FamilyRun(planning.precheck(req), dev)
    return fr.run()[0], fr


@pytest.mark.parametrize("dtype", ("int32", "float32"))
@pytest.mark.parametrize("n", [1, 6144, 9000])
def test_case_sorts_on_the_fake_device(n, dtype):
    dev = OnesweepDevice()
    row, fr = _run(dev, n, dtype, "dups")
    assert row.status == Status.PASSED, row.reason
    assert row.extra["passes"] == 6 and row.extra["digit_passes"] == 4
    tile = 256 * 24
    first_run = dev.launches[:6]
    assert [k for k, *_ in first_run] == ["sort_onesweep_init", "sort_onesweep_hist"] + ["sort_onesweep_pass"] * 4
    words = OS.scratch_words(n, tile)
    (_, g0, b0, _, (scratch, w)), (_, g1, b1, _, hist_args) = first_run[:2]
    assert int(w) == words and scratch.shape == (words,) and b0 == b1 == (256, 1, 1)
    assert g0 == (OS.init_grid(words, dev.limits.sm_count), 1, 1) and g1 == (OS.hist_grid(n, dev.limits.sm_count), 1, 1)
    d_x = hist_args[0]
    passes = first_run[2:]
    assert [int(args[2]) for *_, args in passes] == [0, 1, 2, 3]
    assert passes[0][4][0] is d_x and all(args[3] is scratch for *_, args in passes)
    for _, grid, block, shared, _ in passes:
        assert grid == (OS.tiles(n, tile), 1, 1) and block == (256, 1, 1) and shared == 4 * tile + 1024 * 8
    assert all(a[4] is b[0] for (*_, a), (*_, b) in zip(passes, passes[1:]))     # each pass reads the last one's output
    assert all(args[4] is not d_x for *_, args in passes)
    assert np.array_equal(d_x.data, fr.inputs["x"])


def test_the_scratch_is_zeroed_every_run():
    # Garbage in fresh memory: without the init launch the counters and the status words are wrong.
    row, _ = _run(OnesweepDevice(skip_init=True), 3000)
    assert row.status != Status.PASSED


@pytest.mark.parametrize("mutation", [1, 2, 3])
def test_a_mutated_pass_is_caught(mutation):
    row, _ = _run(OnesweepDevice(mutation=mutation), 6144 + 7)
    assert row.status == Status.INCORRECT, row.reason


def test_the_family_sets_the_grid():
    row, _ = _run(OnesweepDevice(), 7000, grid="7")
    assert row.status == Status.SKIPPED and "sets its own grid (2 tiles of 6144)" in row.reason


def test_block_must_match_the_compiled_block():
    row, _ = _run(OnesweepDevice(), 5000, defines=(("BLOCK", "128"),), block="256")
    assert row.status == Status.SKIPPED and "BLOCK = 128" in row.reason


# --- plan, schedule, build ---------------------------------------------------------------------------------

def test_schedule_starts_from_the_input_and_ends_in_the_result_buffer():
    plan = OS.schedule()
    assert [p for p, _, _ in plan] == [0, 1, 2, 3]
    assert plan[0][1] is None and all(src is not None for _, src, _ in plan[1:])
    assert all(plan[i][2] == plan[i + 1][1] for i in range(len(plan) - 1))
    assert plan[-1][2] == OS.result_buffer() == 1


@pytest.mark.parametrize("n", [1, 6143, 6144, 6145, 2**24, 2**28])
def test_plan(n):
    p = MOD.FAMILY.problem(str(n), None, "int32", {})
    lau = planning.plan_launch(VARIANT, MOD.FAMILY, p, None, None, L.DeviceLimits())
    assert lau.tile == (6144, 1, 1) and lau.grid == (OS.tiles(n, 6144), 1, 1)
    assert dict(lau.defines)["ITEMS"] == "24" and dict(lau.defines)["BLOCK"] == "256"
    assert lau.shared == 4 * 6144 + 1024 * 8              # the ordered tile, then 256 counters a warp
    onesweep_bytes = n * 4 + 2 * n * 4 + 4 * OS.scratch_words(n, 2048)
    assert MOD.FAMILY.device_bytes(p) >= onesweep_bytes


@pytest.mark.parametrize("block, why", [("128", "block_x >= 256"), ("288", None), ("320", None), ("272", "% 32")])
def test_block_rules(block, why):
    p = MOD.FAMILY.problem("5000", None, "int32", {})
    if why:
        with pytest.raises(Exception, match=why):
            planning.plan_launch(VARIANT, MOD.FAMILY, p, block, None, L.DeviceLimits())
    else:
        lau = planning.plan_launch(VARIANT, MOD.FAMILY, p, block, None, L.DeviceLimits())
        assert dict(lau.defines)["BLOCK"] == block and lau.shared == 4 * 24 * int(block) + 1024 * (int(block) // 32)


def test_items_set_the_tile():
    # -D ITEMS=8: the planner's tile is ITEMS x block (family.toml's tile names the define), so the passes
    # launch one block per 8 x 256 keys and sort
    dev = OnesweepDevice()
    row, _ = _run(dev, 5000, defines=(("ITEMS", "8"),))
    assert row.status == Status.PASSED, row.reason
    passes = [launch for launch in dev.launches if launch[0] == "sort_onesweep_pass"]
    assert passes and all(grid == (-(-5000 // (8 * 256)), 1, 1) for _, grid, *_ in passes)


def test_hist_and_init_grids():
    assert OS.hist_grid(1, 132) == 1 and OS.hist_grid(2**28, 132) == 4 * 132
    assert OS.init_grid(4, 132) == 1 and OS.init_grid(OS.scratch_words(2**28, 4096), 132) == 8 * 132


@pytest.mark.nvcc
@pytest.mark.parametrize("dtype", ("int32", "float32"))
@pytest.mark.parametrize("block", ["256", "384"])
def test_onesweep_kernels_compile_without_spills(dtype, block):
    p = MOD.FAMILY.problem("2^24", None, dtype, {})
    lau = planning.plan_launch(VARIANT, MOD.FAMILY, p, block, None, L.DeviceLimits())
    res = {k.name: k for k in build.build(SPEC.directory / "sort_onesweep.cu", dict(lau.defines), "sm_90").kernels}
    assert set(OS.KERNELS) <= set(res)
    for name in OS.KERNELS:
        k = res[name]
        assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0, name
    # 3 blocks of 256 (2 of 384) an SM: the register cap of __launch_bounds__(BLOCK, 768 / BLOCK), and
    # 24 keys a thread fit under it.
    assert res["sort_onesweep_pass"].registers <= 65536 // (768 // int(block) * int(block))


@pytest.mark.nvcc
def test_mutations_change_the_device_code():
    # Each mutation is a different kernel (nvcc -E, 0.15 s apiece: the three mutant builds cost 5 s of a
    # 2-core CI's test loop). That they compile and fail the check is tests/test_sort_onesweep_gpu.py's.
    p = MOD.FAMILY.problem("2^24", None, "int32", {})
    lau = planning.plan_launch(VARIANT, MOD.FAMILY, p, None, None, L.DeviceLimits())
    digests = {m: build_share.device_digest(SPEC.directory / "sort_onesweep.cu", {**dict(lau.defines), "MUTATION": str(m)},
                                            "sm_90") for m in (0, 1, 2, 3)}
    assert None not in digests.values() and len(set(digests.values())) == 4
