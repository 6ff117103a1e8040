"""The measured compute ceilings (cudalab.worker.ceilings) on a real GPU: plausible against the datasheet rate
at the device's SM clock, and kept in the cache the roofline chart reads."""

from __future__ import annotations

import pytest

from cudalab.inspect import ceilings as cache
from cudalab.worker import ceilings
from cudalab.inspect.rooflinechart import datasheet_fma_gflops

pytestmark = pytest.mark.gpu


def test_fma_and_tensor_ceilings_are_plausible(device, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path))
    c = ceilings.measure(device)
    sheet = datasheet_fma_gflops(device.info.arch, device.info.sm_count, device.info.sm_clock_mhz)
    print(f"{c}  datasheet FMA at {device.info.sm_clock_mhz} MHz: {sheet}")
    assert c.fma_gflops and sheet
    # The kernel cannot beat the FMA pipes; at the reported clock it should reach most of them (boost varies).
    assert 0.6 * sheet < c.fma_gflops < 1.1 * sheet
    if device.info.compute_capability >= (8, 0):
        assert c.tensor_gflops and c.tensor_gflops > 3 * c.fma_gflops
    cache.store(c)
    assert cache.cached(device.info.name, device.info.sm_clock_mhz) == c


def test_the_read_and_write_streams_sit_beside_the_copy(device):
    """The roofline's streams on a real GPU: both measured, neither far under the copy (all three walk the buffer
    the same way), and a copy row rated against them at 100%."""
    from cudalab.bench import Protocol
    from cudalab.roofline import pct_of
    from cudalab.records.results import PASSED, Result
    from cudalab.worker.executor import measure_roofline

    roof = measure_roofline(device, 512 * 2**20, Protocol())
    print(f"copy {roof.gbs:,.0f} GB/s ({roof.source}), read {roof.read_gbs:,.0f}, write {roof.write_gbs:,.0f}")
    assert roof.read_gbs and roof.write_gbs
    assert roof.read_gbs > 0.8 * roof.gbs and roof.write_gbs > 0.8 * roof.gbs
    copy = Result("c", "kernel", PASSED, gbs=roof.gbs, extra={"bytes_read": 2**29, "bytes_written": 2**29})
    assert pct_of(copy, roof) == pytest.approx(100.0)
