"""The judge's second look (cudalab.worker.judgeprobe) on the CPU with test_runcore's fake device.

The fake device's kernels are Python functions, so a kernel that remembers its answer by its input's
address (the array object), by its first values, or that skips when its output already holds an answer,
is played exactly; each must be caught (a wrong answer on the second set, or repeats faster than fresh
launches), and the honest copy must not.
"""

from __future__ import annotations

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab.worker import executor as runner
from cudalab.worker import judgeprobe
from test_runcore import FAST, FakeDevice, good_copy


@pytest.fixture(autouse=True)
def _candidate_file(tmp_path, monkeypatch):
    """The candidate is an --add kernel (only those get the second look): its file exists, its signature is
    taken as given (the fake device runs a Python function in its place)."""
    from cudalab.catalog import user

    (tmp_path / "cand.cu").write_text('extern "C" __global__ void cand() {}\n')
    monkeypatch.setattr(user, "check_signature", lambda *a, **k: None)
    monkeypatch.setattr(user, "precheck_signature", lambda *a, **k: None)
    monkeypatch.chdir(tmp_path)


def request(family="copy", **kw):
    from cudalab.catalog import user

    return planning.RunRequest(family=family, variants="none", protocol=FAST, seed=3, roofline=False,
                               add=user.parse_adds(("cand.cu:cand@block=32x8",)), **kw)


def judged(kernel, judge=True):
    dev = FakeDevice({"cand": kernel})
    rows = runner.FamilyRun(planning.precheck(request(n="64", judge=judge)), dev).run()
    return rows[0]


def pointer_memo():
    seen = {}

    def k(out, src, rows, cols, pitch):
        if id(src) in seen:
            out.data[...] = seen[id(src)]  # the answer it remembered for this address
        else:
            out.data[...] = src.data
            seen[id(src)] = src.data.copy()
    return k


def content_memo():
    seen = {}

    def k(out, src, rows, cols, pitch):
        key = src.data.reshape(-1)[:8].tobytes()  # keyed on the first values only
        if key not in seen:
            seen[key] = src.data.copy()
        out.data[...] = seen[key]
    return k


def skips_when_written(out, src, rows, cols, pitch):
    if not np.isnan(out.data).any() and not (out.data.view(np.uint8) == 0x7F).all():
        return  # the output holds an answer already (not a poison): nothing to do
    out.data[...] = src.data


def test_the_honest_kernel_is_probed_and_passes():
    row = judged(good_copy)
    fig = row.extra["judge"]
    assert fig["second_set"] == "ran" and fig["answers_differ"] and fig["wrong"] is None
    assert len(fig["fresh_ms"]) == judgeprobe.ROUNDS
    assert len(fig["repeat_ms"]) == judgeprobe.ROUNDS * (judgeprobe.REPEATS - 1)
    assert len(fig["idle_after_stop_ms"]) == judgeprobe.ROUNDS * judgeprobe.REPEATS


def test_a_pointer_memo_is_wrong_on_the_second_set():
    row = judged(pointer_memo())
    assert row.status.value == "passed"  # the verified launches alone do not see it
    assert row.extra["judge"]["wrong"]["set"] == "second"


def test_a_memo_keyed_on_the_first_values_is_wrong_on_the_second_set():
    row = judged(content_memo())
    assert row.extra["judge"]["wrong"]["set"] == "second"


def test_a_kernel_that_skips_a_written_output_is_wrong_on_the_second_set():
    row = judged(skips_when_written)
    assert row.extra["judge"]["wrong"] is not None


def test_the_second_set_shares_its_edges_and_differs_inside():
    a = {"a": np.arange(1000, dtype=np.float32)}
    b = judgeprobe.second_inputs(a, lambda rng: {"a": rng.random(1000, dtype=np.float32)}, 1)
    assert (b["a"][:judgeprobe.EDGE] == a["a"][:judgeprobe.EDGE]).all()
    assert (b["a"][-judgeprobe.EDGE:] == a["a"][-judgeprobe.EDGE:]).all()
    assert (b["a"][judgeprobe.EDGE:-judgeprobe.EDGE] != a["a"][judgeprobe.EDGE:-judgeprobe.EDGE]).any()


def test_the_first_set_is_back_in_the_buffers_after_the_probe():
    seen = []

    def k(out, src, rows, cols, pitch):
        seen.append(src.data.copy())
        out.data[...] = src.data
    dev = FakeDevice({"cand": k})
    run = runner.FamilyRun(planning.precheck(request(n="64", judge=True)), dev)
    from cudalab.worker.context import Context
    ctx = Context(dev, run.rng)
    run.run_variants(ctx)
    (arr,) = ctx.uploads_of(run.inputs["a"] if "a" in run.inputs else next(iter(run.inputs.values())))
    assert (arr.data == next(iter(run.inputs.values()))).all()
    assert any(not (s == seen[0]).all() for s in seen)  # the second set did reach the kernel


def test_without_judge_no_probe_runs_and_built_in_rows_never_get_one():
    assert "judge" not in judged(good_copy, judge=False).extra
    dev = FakeDevice({"copy_naive": good_copy})
    req = planning.RunRequest(family="copy", variants="naive", n="64", roofline=False, protocol=FAST, seed=3,
                              judge=True)
    (row,) = runner.FamilyRun(planning.precheck(req), dev).run()
    assert row.status.value == "passed" and "judge" not in row.extra  # the family's own rows are trusted


def test_no_answer_is_ever_on_the_device_for_either_set():
    """Every host array that reaches the fake GPU (allocations filled from the host, in-place refills) is
    recorded through a transpose row's verified, timed and probed launches: none holds either set's answer
    (transpose's answer is its input transposed, so an input is never mistaken for it)."""
    from test_runcore import FakeArray, good_transpose

    given = []

    class Recording(FakeDevice):
        def to_device(self, host, pitched=False):
            given.append(np.array(host, copy=True))
            return super().to_device(host, pitched)

    real = FakeArray.upload

    def upload(self, host):
        given.append(np.array(host, copy=True))
        real(self, host)

    dev = Recording({"cand": good_transpose})
    run = runner.FamilyRun(planning.precheck(request("transpose", shape="48x80", judge=True)), dev)
    FakeArray.upload, saved = upload, FakeArray.upload
    try:
        (row,) = run.run()
    finally:
        FakeArray.upload = saved
    assert row.extra["judge"]["second_set"] == "ran" and row.extra["judge"]["wrong"] is None
    answers = [np.asarray(run.reference), np.asarray(run.second[1])]
    assert len(given) >= 5  # the first upload and the probe's refills
    for arr in given:
        for ans in answers:
            assert not (arr.shape == ans.shape and np.array_equal(arr, ans)), "an answer reached the device"


def test_the_probe_stands_aside_where_it_cannot_refill_everything(monkeypatch):
    """A family that uploads an array derived from its inputs would see it stale on the second set: an honest
    kernel would read as a memo. The probe says why it did not run instead."""
    from cudalab.families import copy as copy_family

    fam_cls = next(c for c in vars(copy_family).values() if isinstance(c, type) and hasattr(c, "setup")
                   and c.__module__ == copy_family.__name__)
    real = fam_cls.setup

    def setup(self, ctx):
        ctx.upload(np.zeros(4, np.float32))  # derived data of its own
        return real(self, ctx)
    monkeypatch.setattr(fam_cls, "setup", setup)
    row = judged(good_copy)
    assert row.extra["judge"]["second_set"] == "not run: the family uploads arrays derived from its inputs"


def test_a_kernel_that_faults_on_the_second_set_is_a_failed_row():
    from cudalab.errors import GpuError

    first = []

    def k(out, src, rows, cols, pitch):
        first.append(src.data.copy()) if not first else None
        if not np.array_equal(src.data, first[0]):  # only the second set (the second look) makes it fault
            raise GpuError("the GPU reported an error: an illegal memory access was encountered")
        out.data[...] = src.data
    row = judged(k)
    assert row.status.value == "failed" and "illegal memory access" in row.reason
