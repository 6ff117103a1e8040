"""The run core on the CPU with a fake device: poison, verify, time, failures become rows.

The fake device holds NumPy arrays and its kernels are Python functions, so the real runner and the
real copy and transpose families run unchanged; only what a GPU would do is played by NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab.worker.gpu import EventTime
from cudalab.worker import executor as runner
from cudalab.bench import Protocol
from cudalab.errors import GpuError, SkipRow, UsageError
from cudalab.families import load
from cudalab.launch import DeviceLimits
from cudalab.records.results import Status

FAST = Protocol(warmup=1, min_samples=3, max_samples=5, budget_s=0.01, flush_l2=True)


class FakeArray:
    """A device array: NumPy memory with the methods families use."""

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.data = np.zeros(self.shape, self.dtype)
        self.pitch_elems = self.shape[-1] if self.shape else 1
        self.nbytes = self.data.nbytes
        self.freed = False

    def poison(self, byte=0xFF):
        self.data.view(np.uint8)[...] = byte

    def download(self):
        return self.data.copy()

    def download_padding(self):
        return np.empty((self.shape[0], 0), np.uint8)  # NumPy rows are never padded

    def chunks(self):
        from cudalab.hostwork import RowChunks

        return RowChunks(self.shape, self.dtype, 7, lambda r0, r1: self.data[r0:r1].copy(), self.download)

    def upload(self, host):
        self.data[...] = host

    def copy_from(self, other):
        self.data[...] = other.data

    def cupy(self):
        return None  # no CuPy on a fake device: a library row is skipped, saying so

    def free(self):
        self.freed = True


class FakeKernel:
    def __init__(self, fn):
        self.fn = fn
        self.num_regs = 16

    def launch(self, grid, block, args, shared=0):
        self.fn(*args)


def good_copy(out, src, rows, cols, pitch):
    out.data[...] = src.data


def drops_last(out, src, rows, cols, pitch):
    out.data.reshape(-1)[:-1] = src.data.reshape(-1)[:-1]  # the last element is never written


def crashes(out, src, rows, cols, pitch):
    raise GpuError("the GPU reported an error: an illegal memory access was encountered")


def good_transpose(out, src, rows, cols, pin, pout):
    out.data[...] = src.data.T


class FakeDevice:
    """Plays a GPU: allocations are NumPy arrays, each sample takes 1 ms, kernels are the functions given."""

    def __init__(self, kernels):
        self.kernels = kernels
        self.limits = DeviceLimits()
        self.launch_log = None
        self.flushes = 0
        self.timed = 0

    def mem_info(self):
        return (80 << 30, 80 << 30)

    def empty(self, shape, dtype, pitched=False):
        return FakeArray(shape, dtype)

    def to_device(self, host, pitched=False):
        arr = FakeArray(host.shape, host.dtype)
        arr.upload(host)
        return arr

    def compile(self, source, defines, names):
        return {n: FakeKernel(self.kernels[n]) for n in names}

    def memcpy_dtod(self, dst, src, nbytes):
        dst.data[...] = src.data

    def synchronize(self):
        pass

    def flush_l2(self):
        self.flushes += 1

    def build_own_soon(self):  # the real one builds flush, spin and empty: a fake has its own
        return []

    def time_ms(self, enqueue):
        enqueue()
        self.timed += 1
        return EventTime(1.0, True)


def run(device, family="copy", **kw):
    req = planning.RunRequest(family=family, protocol=FAST, seed=1, **kw)
    return {r.variant: r for r in runner.FamilyRun(planning.precheck(req), device).run()}


def test_good_kernels_pass_and_are_timed_with_the_l2_flushed():
    dev = FakeDevice({"copy_naive": good_copy, "copy_shared": good_copy, "copy_vec4": good_copy})
    rows = run(dev, variants="memcpy_dtod,naive,shared,vec4", n="64", roofline=False)
    assert {r.status for r in rows.values()} == {Status.PASSED}
    naive = rows["naive"]
    assert naive.stats.median == 1.0 and naive.stats.n >= 3
    assert naive.gbs == pytest.approx(2 * 64 * 64 * 4 / 1e-3 / 1e9)
    assert dev.flushes >= dev.timed > 0  # one flush before every timed sample


def test_an_unwritten_element_is_incorrect_and_the_others_still_run():
    dev = FakeDevice({"copy_naive": drops_last, "copy_shared": good_copy, "copy_vec4": good_copy})
    rows = run(dev, variants="naive,shared", n="33", roofline=False)
    assert rows["naive"].status == Status.INCORRECT
    assert "unwritten" in rows["naive"].reason and "row 32, column 32" in rows["naive"].reason
    assert rows["shared"].status == Status.PASSED


def test_a_crashing_kernel_becomes_a_failed_row():
    dev = FakeDevice({"copy_naive": crashes, "copy_shared": good_copy, "copy_vec4": good_copy})
    rows = run(dev, variants="naive,shared", n="16", roofline=False)
    assert rows["naive"].status == Status.FAILED and "illegal memory access" in rows["naive"].reason
    assert rows["shared"].status == Status.PASSED


@pytest.mark.parametrize("error, status", [(SkipRow, Status.SKIPPED), (UsageError, Status.FAILED)])
def test_skiprow_from_setup_is_a_skipped_row_any_other_error_a_failed_one(monkeypatch, error, status):
    """"Skip this row" is its own type: a plain UsageError from setup is a family bug, not a rule."""
    copy = load("copy")
    real = copy.setup

    def setup(ctx):
        if ctx.variant.name == "naive":
            raise error("naive cannot run here")
        return real(ctx)

    monkeypatch.setattr(copy, "setup", setup)
    dev = FakeDevice({"copy_naive": good_copy, "copy_shared": good_copy})
    rows = run(dev, variants="naive,shared", n="16", roofline=False)
    assert rows["naive"].status == status and rows["naive"].reason == "naive cannot run here"
    assert rows["shared"].status == Status.PASSED


def test_the_roofline_copies_the_runs_own_input():
    dev = FakeDevice({"copy_vec4": good_copy, "transpose_naive": good_transpose})
    seen = []
    real = dev.to_device

    def to_device(host, pitched=False):
        seen.append(host)
        return real(host, pitched)

    dev.to_device = to_device
    rows = run(dev, family="transpose", variants="naive", n="48")
    assert rows["naive"].status == Status.PASSED and rows["naive"].pct_roofline == pytest.approx(100.0)
    assert len(seen) == 1  # the transpose input, uploaded once, is also what the roofline copies


def _counting_device() -> tuple["FakeDevice", list]:
    """A fake device whose copy_naive counts its launches (the profile mode's tests)."""
    calls: list = []

    def counting(out, src, rows, cols, pitch):
        calls.append(1)
        good_copy(out, src, rows, cols, pitch)

    dev = FakeDevice({"copy_naive": counting})
    dev.launch_log = []
    return dev, calls


def test_profile_mode_runs_one_verified_launch_and_logs_it():
    dev, calls = _counting_device()
    row = run(dev, variants="naive", n="16", profile=True)["naive"]
    assert row.status == Status.PASSED and row.stats is None and len(calls) == 1


def test_profile_launches_repeats_the_launch_and_logs_each():
    """cudalab truth: under ncu each variant launches profile_launches times (the verified one first), each
    matched to it by ncu's launch order and their median taken."""
    dev, calls = _counting_device()
    row = run(dev, variants="naive", n="16", profile=True, profile_launches=4)["naive"]
    assert row.status == Status.PASSED and len(calls) == 4


@pytest.mark.parametrize("family, variant", [("reduce", "neighbored"), ("sort", "radix"), ("search", "binary")])
def test_a_one_dimensional_kernel_skips_a_2d_launch(family, variant):
    """reduce, sort and search index along x only: a y or z extent is a skipped row naming what to give."""
    from cudalab import catalog
    from cudalab.errors import SkipRow
    from cudalab.families import Launch, SetupContext, load

    spec = catalog.family(family)
    fam = load(spec.module)
    v = spec.variant(variant)
    problem = fam.problem("4096", None, spec.default_dtype, {})

    class Run:  # uploads are never looked at: the launch is refused first
        device = None

        def upload(self, host, pitched=False):
            return host

        def shared(self, key, make):
            return None

    ctx = SetupContext(v, Launch(block=(32, 8, 1), grid=(4, 1, 1), tile=(32, 8, 1), shared=0, defines=()),
                       problem, fam.make_inputs(problem, np.random.default_rng(1)), Run(), kernels=lambda name: None)
    with pytest.raises(SkipRow, match=f"{variant} is one-dimensional: give --block N and --grid N "
                                      r"\(got block 32x8, grid 4\)"):
        fam.setup(ctx)


def test_the_family_check_and_the_poison_comparison_run_as_host_work(monkeypatch):
    # The watchdog hears only from waits on the GPU and from host work: a check that took longer
    # than the timeout (the sketch check of a 46340-cubed matmul) read "timeout" before.
    from contextlib import contextmanager

    from cudalab.worker import heartbeat
    from cudalab.families.copy import Copy

    inside = []
    depth = [0]

    @contextmanager
    def recording():
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1

    real_check = Copy.check

    def check(self, problem, out, ref):
        inside.append(depth[0] > 0)
        return real_check(self, problem, out, ref)

    monkeypatch.setattr(heartbeat, "host_work", recording)
    monkeypatch.setattr(Copy, "check", check)
    dev = FakeDevice({"copy_naive": good_copy, "copy_shared": drops_last})
    rows = run(dev, variants="naive,shared", n="33", roofline=False)
    assert rows["naive"].status == Status.PASSED and rows["shared"].status == Status.INCORRECT
    assert inside and all(inside)
