"""CUPTI samples a hot row as the fallback's own graph replay (issue 59): the reference and the graph fallback
time the same executions, so a kernel that runs differently back to back in a graph than enqueued on the stream
cannot set them apart (tests/fake_cupti.py: a kernel's ``graph_ns`` is its span as a graph node)."""

from __future__ import annotations

import pytest

from cudalab.bench import Protocol
from cudalab.families.model import Case
from cudalab.worker import cupti_sampling, cupti_timing
from cudalab.worker.graphs import graph_samples
from cudalab.worker.sampling import time_case

from fake_cupti import GAP_NS, CuptiGpu, install

COLD = Protocol(warmup=1, min_samples=5, max_samples=8, budget_s=10.0, launch="cupti")
HOT = Protocol(**{**COLD.__dict__, "flush_l2": False})
N = 16


def gpu_with(monkeypatch, **kw) -> CuptiGpu:
    """A fake GPU with graphs, CUPTI asked for the graph pattern (these tests are about it; the default is the
    stream pattern, tested below)."""
    monkeypatch.setenv(cupti_sampling.GRAPH_ENV, "1")
    gpu = CuptiGpu(graphs=True, **kw)
    install(monkeypatch, gpu)
    return gpu


def kernel_case(gpu: CuptiGpu, **kw) -> Case:
    return Case(run=lambda: gpu.kernel(**kw), result=lambda: None)


def test_hot_cupti_reads_the_spans_of_the_graphs_nodes(monkeypatch):
    gpu = gpu_with(monkeypatch)
    t = cupti_sampling.cupti_samples(gpu, kernel_case(gpu, ns=3_000, graph_ns=2_600), HOT, N)
    assert t.pattern == "graph" and t.stats.samples == pytest.approx([0.0026] * t.stats.n)
    assert gpu.replays == t.stats.n + HOT.warmup and t.launches == N * gpu.replays
    assert gpu.calls[-1] == "finalize" and gpu.enabled == set()


def test_the_fallback_and_cupti_time_the_same_executions(monkeypatch):
    """The graph fallback reads a node's span plus the node-to-node gap; CUPTI, the span of the same nodes."""
    gpu = gpu_with(monkeypatch)
    case = kernel_case(gpu, ns=3_000, graph_ns=2_600)
    ref = cupti_sampling.cupti_samples(gpu, case, HOT, N).stats.median
    fallback = graph_samples(gpu, case, HOT, N).stats.median
    assert fallback - ref == pytest.approx(GAP_NS / 1e6)


def test_by_default_cupti_reads_the_kernel_as_enqueued_on_the_stream(monkeypatch):
    gpu = gpu_with(monkeypatch)
    monkeypatch.delenv(cupti_sampling.GRAPH_ENV)
    t = cupti_sampling.cupti_samples(gpu, kernel_case(gpu, ns=3_000, graph_ns=2_600), HOT, N)
    assert t.pattern == "stream" and t.stats.median == pytest.approx(0.003) and gpu.replays == 0


@pytest.mark.parametrize("memset", [False, True])
def test_cold_cupti_reads_the_launches_of_the_windows_graph_without_its_flushes(monkeypatch, memset):
    gpu = gpu_with(monkeypatch, flush_as_memset=memset)

    def run():
        gpu.kernel(ns=3_000, cold_ns=5_000, name="first")
        gpu.memset(ns=700)

    t = cupti_sampling.cupti_samples(gpu, Case(run=run, result=lambda: None), COLD, N)
    assert t.pattern == "graph" and gpu.replays == t.stats.n + COLD.warmup
    assert t.stats.samples == pytest.approx([0.0057] * t.stats.n)   # each launch cold, no 30 µs flush inside
    assert gpu.flushes == N   # captured once, replayed


def test_a_cold_replay_that_does_not_split_into_flush_and_launch_blocks_is_not_a_figure():
    api = [(10, 20, 7)]
    work = [(100 * i, 100 * i + 50, 7) for i in range(5)]
    with pytest.raises(cupti_timing.CuptiUnavailable, match="5 activity records for a replay of 2"):
        cupti_sampling.per_cold_replay_ns((5, 25), api, work, 2)
    assert cupti_sampling.per_cold_replay_ns((5, 25), api, work[:4], 2) == pytest.approx(50)


@pytest.mark.parametrize("why", ["refused", "fresh"])
def test_a_refused_capture_and_a_row_reset_before_each_launch_stay_on_the_stream(monkeypatch, why):
    gpu = gpu_with(monkeypatch, refuse_capture=why == "refused")
    case = Case(run=lambda: gpu.kernel(ns=3_000, cold_ns=5_000, graph_ns=2_600), result=lambda: None,
                repeatable=why != "fresh")
    for proto, want in ((HOT, 0.003), (COLD, 0.005)):
        t = cupti_sampling.cupti_samples(gpu, case, proto, N)
        assert t.pattern == "stream" and gpu.replays == 0 and t.stats.median == pytest.approx(want)


def test_a_runs_kernels_in_a_replay_are_summed_per_launch(monkeypatch):
    gpu = gpu_with(monkeypatch)

    def run():
        gpu.kernel(ns=2_000, graph_ns=1_800, name="first")
        gpu.kernel(ns=1_500, graph_ns=1_200, name="second")

    t = cupti_sampling.cupti_samples(gpu, Case(run=run, result=lambda: None), HOT, N)
    assert t.pattern == "graph" and t.stats.median == pytest.approx(0.003)


def test_a_replay_with_fewer_records_than_launches_is_not_a_figure():
    api = [(10, 20, 7)]
    work = [(100, 200, 7)] * 3
    assert cupti_sampling.per_replay_ns((5, 25), api, work, 3) == pytest.approx(100)
    with pytest.raises(cupti_timing.CuptiUnavailable, match="3 activity records for a replay of 4"):
        cupti_sampling.per_replay_ns((5, 25), api, work, 4)


def test_time_case_names_the_graph_pattern_as_cupti(monkeypatch):
    gpu = gpu_with(monkeypatch)
    t = time_case(gpu, kernel_case(gpu, ns=3_000, graph_ns=2_600), HOT)
    assert t.method == "cupti" and t.stats.median == pytest.approx(0.0026)
    assert t.extra()["cupti_pattern"] == "graph"   # the record says which executions CUPTI read
