"""What ``--launch auto`` times a kernel under 20 µs with (issue 59): CUPTI's own spans where cupti-python loads,
graph replay (the fallback designed to agree with CUPTI) where it does not or ``CUDALAB_NO_CUPTI`` is set, one launch
per event pair for a kernel of 20 µs or more; the batch never."""

from __future__ import annotations

import pytest

from cudalab.bench import AUTO_FALLBACK, AUTO_REFERENCE, Protocol, auto_method
from cudalab.families.model import Case
from cudalab.worker import cupti_timing
from cudalab.worker.sampling import time_case

from fake_cupti import CuptiGpu, install

AUTO = Protocol(warmup=1, min_samples=5, max_samples=8, budget_s=10.0)


def test_auto_is_cupti_where_it_loads_and_the_graph_otherwise():
    assert auto_method(True) == AUTO_REFERENCE == "cupti"
    assert auto_method(False) == AUTO_FALLBACK == "graph"


@pytest.mark.parametrize("value, off", [("1", True), ("yes", True), ("0", False), ("", False), (None, False)])
def test_the_switch_is_read_in_one_place(monkeypatch, value, off):
    if value is None:
        monkeypatch.delenv(cupti_timing.NO_CUPTI_ENV, raising=False)
    else:
        monkeypatch.setenv(cupti_timing.NO_CUPTI_ENV, value)
    assert cupti_timing.switched_off() is off
    assert cupti_timing.switched_off({cupti_timing.NO_CUPTI_ENV: value or ""}) is off


def test_switched_off_cupti_does_not_load_though_installed(monkeypatch):
    gpu = CuptiGpu()
    install(monkeypatch, gpu)
    monkeypatch.delenv(cupti_timing.NO_CUPTI_ENV, raising=False)
    assert cupti_timing.available() is True
    monkeypatch.setenv(cupti_timing.NO_CUPTI_ENV, "1")
    assert cupti_timing.available() is False
    with pytest.raises(cupti_timing.CuptiUnavailable, match="CUDALAB_NO_CUPTI"):
        cupti_timing.load()


def test_auto_times_a_short_kernel_by_cupti_where_it_loads(monkeypatch):
    monkeypatch.delenv(cupti_timing.NO_CUPTI_ENV, raising=False)
    gpu = CuptiGpu()
    install(monkeypatch, gpu)
    t = time_case(gpu, Case(run=lambda: gpu.kernel(ns=3_000, cold_ns=5_000), result=lambda: None), AUTO)
    assert t.method == "cupti" and t.note == "" and t.batch > 1
    assert t.stats.median == pytest.approx(0.005)


def test_auto_without_cupti_never_falls_to_the_batch_silently(monkeypatch):
    """cupti-python switched off and no graph on this device: the batch times it, and the row says why."""
    monkeypatch.setenv(cupti_timing.NO_CUPTI_ENV, "1")
    gpu = CuptiGpu()                       # has no capture()
    install(monkeypatch, gpu)
    t = time_case(gpu, Case(run=lambda: gpu.kernel(ns=3_000), result=lambda: None), AUTO)
    assert t.method == "batch" and t.note == "timed by batch: this device cannot capture a graph"
    assert gpu.calls == []                 # CUPTI never attached


def test_auto_times_a_long_kernel_by_events_even_with_cupti(monkeypatch):
    monkeypatch.delenv(cupti_timing.NO_CUPTI_ENV, raising=False)
    gpu = CuptiGpu()
    install(monkeypatch, gpu)
    t = time_case(gpu, Case(run=lambda: gpu.kernel(ns=50_000), result=lambda: None), AUTO)
    assert t.method == "events" and t.batch == 1 and t.note == "" and gpu.calls == []
