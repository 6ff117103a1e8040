"""Theoretical occupancy without a GPU (cudalab.inspect.occupancy), on cases worked by hand from the
CUDA occupancy calculator's rules; each one is chosen so that one rule (the sub-partition split of the
register file, the register unit, the 1 KiB reserved per block, the 128-byte shared-memory unit, the
block cap) changes the answer when it is left out."""

from __future__ import annotations

import pytest

from cudalab.errors import LaunchConfigError
from cudalab.inspect.occupancy import BLOCKS, REGISTERS, SHARED, WARPS, limits_for, occupancy


def test_warps_and_registers_tie_at_full_occupancy():
    o = occupancy("sm_90", 256, 32, 0)
    assert (o.blocks, o.warps, o.pct, o.limiter) == (8, 64, 100.0, "warps, registers")
    assert o.limits == {WARPS: 8, BLOCKS: 32, REGISTERS: 8, SHARED: 228}


def test_255_registers_round_to_8192_a_warp():
    o = occupancy("sm_90", 128, 255, 0)  # 255 x 32 = 8160 -> 8192: 2 warps a sub-partition, 8 an SM
    assert (o.blocks, o.warps, o.pct, o.limiter) == (2, 8, 12.5, REGISTERS)


def test_register_unit_rounds_up():
    # 36 x 32 = 1152 -> 1280: 12 warps a sub-partition (14 without the rounding): 48 warps, 6 blocks of 8
    o = occupancy("sm_90", 256, 36, 0)
    assert (o.blocks, o.limiter) == (6, REGISTERS) and o.pct == 75.0


def test_registers_are_split_among_four_sub_partitions():
    # 80 x 32 = 2560: 16384 // 2560 = 6 a sub-partition, 24 an SM (65536 // 2560 = 25 without the split)
    o = occupancy("sm_90", 32, 80, 0)
    assert (o.blocks, o.warps, o.limiter) == (24, 24, REGISTERS)


def test_a_thread_is_allocated_at_least_16_registers():
    # copy_naive: ptxas 8 registers, 1024 threads. Nsight Compute (H100, H200): 16 registers a thread,
    # register limit 4 blocks (8 if 8 were allocated); the warps limit (2) binds either way
    o = occupancy("sm_90", 1024, 8, 0)
    assert (o.blocks, o.limiter, o.limits[REGISTERS]) == (2, WARPS, 4)
    assert occupancy("sm_90", 256, 8, 0).limits[REGISTERS] == occupancy("sm_90", 256, 16, 0).limits[REGISTERS] == 16


def test_tiny_blocks_hit_the_block_cap():
    o = occupancy("sm_90", 32, 16, 0)
    assert (o.blocks, o.pct, o.limiter) == (32, 50.0, BLOCKS)


def test_shared_memory_counts_the_reserved_kilobyte():
    # 45 KiB + 1 KiB reserved = 47104 B: 233472 // 47104 = 4 blocks (5 without the reserved KiB)
    o = occupancy("sm_90", 128, 32, 45 * 1024)
    assert (o.blocks, o.warps, o.limiter) == (4, 16, SHARED)


def test_shared_memory_rounds_to_128_bytes():
    # 45666 + 1024 = 46690 -> 46720: 233472 // 46720 = 4 (46690 unrounded fits 5)
    assert occupancy("sm_90", 128, 32, 45666).blocks == 4
    assert occupancy("sm_90", 128, 32, 45568).blocks == 5  # 45568 + 1024 = 46592, a whole unit: 5 fit


def test_other_generations():
    assert occupancy("sm_86", 1024, 16, 0).pct == pytest.approx(200 / 3)  # 48 warps an SM: one block of 32
    assert occupancy("sm_90a", 256, 32, 0) == occupancy("sm_90", 256, 32, 0)
    assert limits_for("9.0") is limits_for("sm_90")
    assert occupancy("sm_120", 256, 32, 0) is None  # no table: shown as unknown, never guessed


@pytest.mark.parametrize("threads, regs, smem, limit", [
    (1025, 16, 0, "maxThreadsPerBlock"), (1024, 255, 0, "maxRegistersPerBlock"),
    (256, 32, 227 * 1024 + 1, "maxSharedMemoryPerBlockOptin")])
def test_a_block_that_cannot_be_resident(threads, regs, smem, limit):
    with pytest.raises(LaunchConfigError) as err:
        occupancy("sm_90", threads, regs, smem)
    assert err.value.limit == limit


# --- a run's rows: the worker adds the occupancy of the variant's kernel, --wide shows it -------------------

class _Kernel:
    def __init__(self, name, regs, static, launched):
        self.name, self.num_regs, self.static_shared, self.last_launch = name, regs, static, launched


def test_a_row_gets_its_kernels_occupancy():
    from cudalab.records.results import PASSED, Result
    from cudalab.inspect.occupancy import with_occupancy

    row = Result("regblock", "kernel", PASSED)
    other = _Kernel("helper", 16, 0, ((32, 1, 1), 0))
    main = _Kernel("matmul_regblock", 118, 16640, ((256, 1, 1), 0))
    got = with_occupancy(row, [other, main], "matmul_regblock", "sm_90").extra
    assert got == {"occupancy": 25.0, "occupancy_limiter": REGISTERS, "occupancy_blocks": 2}
    assert with_occupancy(row, [], "k", "sm_90") == row  # host, library rows: nothing
    assert with_occupancy(row, [_Kernel("k", 16, 0, None)], "k", "sm_90") == row  # never launched
    assert with_occupancy(row, [main], "k", "sm_120") == row  # no limits known: no guess
    assert with_occupancy(row, [other], "k", "sm_90").extra["occupancy_kernel"] == "helper"


def test_the_wide_table_and_the_rows_show_it():
    from cudalab.report.runtable import results_table
    from cudalab.records.results import PASSED, Result, RunPoint, RunRecord

    r = Result("regblock", "kernel", PASSED, extra={"occupancy": 25.0, "occupancy_limiter": REGISTERS})
    wide = results_table([r], "flops", wide=True)
    narrow = results_table([r], "flops", wide=False)
    assert "occupancy" in [c.header for c in wide.columns] and "occupancy" not in [c.header for c in narrow.columns]
    assert ("25% registers", "") in wide.rows[0]
    rec = RunRecord("0", (), 0.0, {}, (RunPoint("matmul", "flops", {"dims": [64]}, results=(r,)),))
    assert rec.to_rows()[0]["occupancy"] == 25.0 and Result.from_dict(r.to_dict()).extra["occupancy"] == 25.0
