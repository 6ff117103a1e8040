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
from cudalab.judging import verdict as V
from cudalab.worker.gpu import EventTime
from fake_watch import WatchGpu
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
    assert len(fig["fresh_ms"]) == len(fig["repeat_ms"]) == judgeprobe.PAIRS
    assert len(fig["idle_after_stop_ms"]) == judgeprobe.ROUNDS * judgeprobe.REPEATS
    assert fig["alternated"] is True and fig["refill"] == "device copy"


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


def recorded_run():
    """A judged candidate that records the input every launch saw: (those inputs, device, run, context), unrun."""
    from cudalab.worker.context import Context

    seen = []

    def k(out, src, rows, cols, pitch):
        seen.append(src.data.copy())
        out.data[...] = src.data
    dev = FakeDevice({"cand": k})
    run = runner.FamilyRun(planning.precheck(request(n="64", judge=True)), dev)
    return seen, dev, run, Context(dev, run.rng)


def test_the_first_set_is_back_in_the_buffers_after_the_probe():
    seen, dev, run, ctx = recorded_run()
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


class Clocked(WatchGpu):
    """fake_watch's GPU (event times are what the last kernel said it took, ``last_ms``) running the kernels
    given, recording the input every timed launch saw."""

    compile = FakeDevice.compile

    def __init__(self, kernels):
        super().__init__()
        self.kernels, self.timed_inputs = kernels, []


def skips_repeated(dev):
    """Always right; 0.1 ms where its input is what it was last launch, 1 ms on new input (skip_repeated.cu)."""
    last = {}

    def k(out, src, rows, cols, pitch):
        key = src.data.tobytes()
        dev.last_ms = 0.1 if last.get("key") == key else 1.0
        last["key"] = key
        if dev.timing:
            dev.timed_inputs.append(key)
        out.data[...] = src.data
    return k


def clocked_row(make):
    dev = Clocked({})
    dev.kernels["cand"] = make(dev)
    (row,) = runner.FamilyRun(planning.precheck(request(n="64", judge=True)), dev).run()
    return row, dev


def test_a_skip_on_repeated_input_gains_nothing_in_the_reported_time_and_the_pairs_name_it():
    row, dev = clocked_row(skips_repeated)
    assert row.status.value == "passed" and row.extra["judge"]["wrong"] is None  # always right
    assert row.stats.median == 1.0 and row.stats.min == 1.0  # every timed sample saw new input
    fig = row.extra["judge"]
    paired = V.memo_from_pairs(fig["fresh_ms"], fig["repeat_ms"])
    assert paired["memo"] and paired["ratio"] == pytest.approx(10.0) and paired["fresh_slower"] == judgeprobe.PAIRS


def test_no_timed_launch_sees_the_input_of_the_launch_before_it():
    row, dev = clocked_row(skips_repeated)
    n = row.stats.n  # the row's samples come first among the timed launches (the pairs come after)
    keys = dev.timed_inputs[:n]
    assert n >= 3 and all(a != b for a, b in zip(keys, keys[1:]))
    assert row.extra["timed_by"] == "events"


def test_the_honest_kernels_pairs_cannot_tell_fresh_from_repeat():
    def honest(dev):
        def k(out, src, rows, cols, pitch):
            dev.last_ms = 1.0
            out.data[...] = src.data
        return k
    row, _ = clocked_row(honest)
    fig = row.extra["judge"]
    paired = V.memo_from_pairs(fig["fresh_ms"], fig["repeat_ms"])
    assert paired["ratio"] == 1.0 and not paired["memo"] and row.stats.median == 1.0


def test_the_pairs_really_alternate_their_order_and_fresh_means_the_other_set():
    """A fresh launch is the first on its set since the other set's; a repeat follows a launch on its own set."""
    from cudalab.families.model import SetupContext

    seen, dev, run, ctx = recorded_run()
    run.prepare()
    v = run.variants[0]
    lau = planning.plan_launch(v, run.family, run.problem, None, None, dev.limits, ())
    case = run.family.setup(SetupContext(v, lau, run.problem, run.inputs, ctx,
                                         lambda name: dev.compile("", {}, [name])[name]))
    sets = judgeprobe.prepare(run, ctx)
    order = []
    real = dev.time_ms

    def timed(enqueue):
        before = len(seen)
        t = real(enqueue)
        order.append(not np.array_equal(seen[before], seen[before - 1]))  # True: new input (fresh)
        return t
    dev.time_ms = timed
    fresh, repeat = judgeprobe.pairs(dev, case, sets, flush=True)
    assert len(fresh) == len(repeat) == judgeprobe.PAIRS
    assert len(order) == 2 * judgeprobe.PAIRS + 1  # the first launch primes: the first repeat repeats it
    assert order[1:5] == [False, True, True, False]  # repeat, fresh; then fresh, repeat
    assert sum(order[1:]) == judgeprobe.PAIRS


@pytest.mark.parametrize("fresh,repeat,memo", [
    ([1.0] * 16, [1.0] * 16, False),                                  # cannot tell them apart
    ([1.0, 1.02] * 8, [1.02, 1.0] * 8, False),                        # jitter both ways
    ([0.08] * 16, [0.02] * 16, True),                                 # 4x faster on repeats
    ([0.0040] * 16, [0.0030] * 16, False),                            # 1.33x but 1 µs: the events' jitter
    ([1.2] * 12 + [0.9] * 4, [1.0] * 16, False),                      # slower in only 12 of 16 pairs
    ([1.15] * 16, [1.0] * 16, True),                                  # skip_repeated at reduce 2^25, 256x8
    ([1.08] * 16, [1.0] * 16, False),                                 # under the ratio
    ([], [], False),
])
def test_the_memo_rule_on_pairs(fresh, repeat, memo):
    assert V.memo_from_pairs(fresh, repeat)["memo"] is memo


def test_where_the_stash_does_not_fit_refills_upload_and_the_probe_still_runs():
    from cudalab.errors import OutOfMemoryError

    class Full(FakeDevice):
        uploads = 0

        def to_device(self, host, pitched=False):
            Full.uploads += 1
            if Full.uploads > 1:  # the point's own input fits; its stash does not
                raise OutOfMemoryError(host.nbytes, 0, "stash")
            return super().to_device(host, pitched)
    (row,) = runner.FamilyRun(planning.precheck(request(n="64", judge=True)), Full({"cand": good_copy})).run()
    fig = row.extra["judge"]
    assert fig["second_set"] == "ran" and fig["refill"] == "upload" and fig["alternated"] and fig["wrong"] is None


def test_the_idle_wait_is_timed_after_the_stop_event_not_over_the_kernel():
    """busy_after_stop times the host's wait for the whole context *after* a launch's stop event was reached: on an
    honest kernel longer than 0.1 ms the wait is still the API's own, and no flag is raised. The fake GPU's kernel
    runs until an event is waited on (2 ms of host time for a synchronize that catches it still running)."""
    import time as clock

    class Slow(FakeDevice):
        pending = False

        def time_ms(self, enqueue):
            enqueue()
            self.pending = False  # end.synchronize(): the kernel has finished
            self.timed += 1
            return EventTime(1.0, True)

        def synchronize(self):
            if self.pending:
                clock.sleep(0.002)
                self.pending = False

    dev = Slow({})

    def k(out, src, rows, cols, pitch):
        dev.pending = True
        out.data[...] = src.data
    dev.kernels["cand"] = k
    (row,) = runner.FamilyRun(planning.precheck(request(n="64", judge=True)), dev).run()
    idle = row.extra["judge"]["idle_after_stop_ms"]
    assert len(idle) == judgeprobe.ROUNDS * judgeprobe.REPEATS and max(idle) < 1.0
    obj = V.verdict(row, None, None, metric="bandwidth", roofline=None, ceiling=None, floor=0.02, scan={})
    assert "busy_after_stop" not in obj["flags"]


def test_under_cupti_every_launch_of_the_candidate_sees_the_other_set(monkeypatch):
    """CUPTI times short kernels launch by launch (``--launch auto`` where it loads): the alternating case cannot
    repeat, so it is reset, and its set switched, before each launch, outside the launch's own span. A kernel
    that skips on the input the launch before saw takes 1 µs there and 5 µs on new input: its row reads 5 µs,
    where the same case timed as it is reads 1 µs."""
    from cudalab.bench import Protocol
    from cudalab.families.model import Case
    from cudalab.worker.sampling import time_case
    from fake_cupti import CuptiGpu, install

    gpu = CuptiGpu()
    install(monkeypatch, gpu)

    class Buf:
        def __init__(self, v):
            self.v = v

        def copy_from(self, other):
            self.v = other.v
            gpu.memset(ns=20_000)  # the refill: a device copy, outside the launch's span

    buf, last = Buf("a"), {"v": None}

    def run():
        ns = 1_000 if last["v"] == buf.v else 5_000
        last["v"] = buf.v
        gpu.kernel(ns=ns, cold_ns=ns)

    proto = Protocol(warmup=1, min_samples=5, max_samples=8, budget_s=10.0, launch="cupti")
    case = Case(run=run, result=lambda: None, repeatable=True)  # it only reads its input (reduce's not-in-place rows)
    plain = time_case(gpu, case, proto)
    assert plain.method == "cupti" and plain.stats.median == pytest.approx(0.001)
    sets = judgeprobe.Sets([(buf, None, None)], [(Buf("a"), Buf("b"))])
    t = judgeprobe.time_judged(gpu, case, proto, sets, time_case)
    assert t.method == "cupti" and t.batch > 1 and t.stats.samples == pytest.approx([0.005] * t.stats.n)
    assert buf.v == "a" and not sets.second  # the first set back in the buffers
