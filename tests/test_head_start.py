"""A campaign's first trials are built while its GPU worker opens (cudalab/tuning/prepare.py: first_requests, handed
to the executor's prebuild), for the architecture NVML or nvidia-smi name without a CUDA context
(cudalab/instruments/driverquery.py: arch_here)."""

from __future__ import annotations

import os
import stat
import sys
import threading
import time

import pytest

from cudalab import build
from cudalab.execute.local.engine import LocalPool
from cudalab.instruments import driverquery
from cudalab.tuning import buildpool
from cudalab.tuning.drive import plan, proposer
from cudalab.tuning.options import TuneOptions
from cudalab.tuning.prepare import first_requests
from cudalab.tuning.runs import precheck


def _campaign(**kw):
    return plan(TuneOptions(family="matmul", variant="warptile", strategy="random", seed=7, race=0, trials=30, **kw))


def _built(monkeypatch, p, arch="sm_90", on_build=lambda *a, **k: None):
    """The (source, defines, arch) of every build the campaign's head start asks for, in the order asked (nvcc never
    runs): its first requests handed to this host's engine's prebuild before any worker opened its GPU."""
    asked, lock = [], threading.Lock()

    def fake_build(source, defines, arch):
        on_build(source, defines, arch)
        with lock:
            asked.append((source.name, dict(defines), arch))

    monkeypatch.setattr(build, "build", fake_build)
    monkeypatch.setattr(driverquery, "arch_here", lambda: arch)
    pool = LocalPool((0,), builds=lambda: buildpool.BuildPool(p.opts.build_ahead), build_of=buildpool.build_of)
    for req in first_requests(p, proposer(p), pool.ahead()):
        pool.prebuild(precheck(req))
    for fut in list(pool._here._early.values()):
        fut.result(timeout=30)
    pool.stop_builds()
    return pool, asked


def test_the_first_trials_of_a_walk_are_built_in_its_order_default_first(monkeypatch):
    p = _campaign(build_ahead=4)
    pool, asked = _built(monkeypatch, p)
    walk = proposer(p)
    first = [walk.next_walk(()) for _ in range(4)]
    assert first[0] == walk.first  # every strategy's first trial: the family's own configuration
    want = [{k: v for k, v in pt.items() if k.startswith("WT_")} for pt in first]
    assert sorted(map(str, [{k: d[k] for k in want[0]} for _, d, _ in asked])) == sorted(map(str, want))
    assert {(src, arch) for src, _, arch in asked} == {("matmul_warptile.cu", "sm_90")}


def test_the_first_trial_s_build_is_the_urgent_one_and_the_others_start_their_nvcc_low(monkeypatch):
    from cudalab.build.priority import lowered

    low, lock = [], threading.Lock()

    def spy(*a, **k):
        with lock:
            low.append(lowered())

    _, asked = _built(monkeypatch, _campaign(build_ahead=3), on_build=spy)
    assert len(asked) == 3 and sorted(low) == [False, True, True]


def test_no_more_are_built_than_the_campaign_has_trials(monkeypatch):
    _, asked = _built(monkeypatch, plan(TuneOptions(family="matmul", variant="warptile", strategy="random", seed=7,
                                                    race=0, trials=2, build_ahead=4)))
    assert len(asked) == 2


def test_a_model_strategy_builds_its_first_trial_only(monkeypatch):
    pytest.importorskip("optuna")
    p = plan(TuneOptions(family="matmul", variant="warptile", strategy="tpe", seed=7, race=0, trials=30, build_ahead=4))
    _, asked = _built(monkeypatch, p)
    assert len(asked) == 1 and asked[0][1]["WT_BM"] == "128" and asked[0][1]["WT_BN"] == "256"


def test_no_arch_or_no_build_threads_build_nothing(monkeypatch):
    _, asked = _built(monkeypatch, _campaign(build_ahead=4), arch=None)
    assert asked == []
    pool, asked = _built(monkeypatch, _campaign(build_ahead=0))
    assert pool.ahead() == 0 and asked == []


class _NVML:
    def __init__(self, caps):
        self.caps = caps

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return len(self.caps)

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self.caps[h]


def test_arch_here_is_the_one_compute_capability_of_every_gpu(monkeypatch):
    for caps, want in (([(9, 0)], "sm_90"), ([(9, 0), (9, 0)], "sm_90"), ([(9, 0), (8, 0)], None), ([], None)):
        monkeypatch.setitem(sys.modules, "pynvml", _NVML(caps))
        assert driverquery.arch_here() == want, caps
    broken = _NVML([(9, 0)])
    broken.nvmlInit = lambda: (_ for _ in ()).throw(RuntimeError("NVML Shared Library Not Found"))
    monkeypatch.setitem(sys.modules, "pynvml", broken)
    assert driverquery.arch_here() is None


def test_arch_here_asks_nvidia_smi_without_nvml(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    smi = tmp_path / "nvidia-smi"
    monkeypatch.setenv("PATH", str(tmp_path))
    for out, want in (("9.0\n9.0\n", "sm_90"), ("10.0\n", "sm_100"), ("9.0\n8.6\n", None), ("", None)):
        smi.write_text(f"#!/bin/sh\nprintf '{out}'\n")
        smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
        assert driverquery.arch_here() == want, out
    smi.unlink()
    assert driverquery.arch_here() is None


@pytest.mark.parametrize("guess", ["sm_90", None])
def test_a_campaign_builds_its_first_trials_while_its_gpu_worker_opens(fake_workers, tmp_path, monkeypatch, invoke,
                                                                      guess):
    """A GPU worker that takes 2 s to open: the first trials' builds (1 s of 'nvcc' each, the build cache and its
    locks real) are done by then, and the campaign waits for none of them; without an arch to build for (no NVML,
    no nvidia-smi) the first trial waits for its build after the worker opened, as before."""
    pytest.importorskip("optuna")
    import json

    fake_workers({"_ms": "1 + abs(UNROLL - 5) / 10", "_open_s": 2.0})
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "nvcc_version", lambda: "fake")
    compiled = []

    def slow_compile(source, text, defines, arch, version, key):
        compiled.append(key)
        time.sleep(1.0)
        b = build.Build(source=source, arch=arch, defines=(), cubin=b"CUBIN", kernels=(), log="", cached=False,
                        nvcc_version=version, key=key)
        build._store(b)
        return b

    monkeypatch.setattr(build, "_compile", slow_compile)
    monkeypatch.setattr(driverquery, "arch_here", lambda: guess)
    monkeypatch.chdir(tmp_path)
    res = invoke("tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8", "--block", "256",
                 "--trials", "2", "--seed", "2", "--strategy", "random", "--build-ahead", "2", "--race", "0",
                 "--json", "t.json")
    assert res.exit_code == 0, res.output
    waited = json.loads((tmp_path / "t.json").read_text())["tune"]["time"]["builds"]
    assert len(compiled) == len(set(compiled)) == 2  # each trial's kernel compiled once, whoever asked first
    assert waited < 0.3 if guess else waited > 0.5, waited
