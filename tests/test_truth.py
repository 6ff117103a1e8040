"""Measurement truth on the CPU: the stopping rule, batching, the two-poison check, row padding,
exact sums, shared memory from the compiled defines."""

from __future__ import annotations

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import bench, catalog
from cudalab.worker import sampling
from cudalab.bench import Protocol
from cudalab.families import Check, load
from cudalab.families.model import Case
from cudalab.worker.gpu import EventTime
from cudalab.worker.sampling import time_case
from cudalab.worker.verify import POISONS, count_differing, padding_damage, verified_launches

# --- stopping rule ---------------------------------------------------------------------------------


def test_median_ci_is_order_statistics_and_shrinks_with_n():
    assert bench.median_ci([1.0] * 5) == float("inf")  # too few for the interval
    rng = np.random.default_rng(1)
    small = bench.median_ci(1.0 + 0.03 * rng.standard_normal(20))
    large = bench.median_ci(1.0 + 0.03 * rng.standard_normal(2000))
    assert large < small
    # sigma 3% → half-width ≈ 1.96 · 1.2533 · 0.03 / sqrt(2000) ≈ 0.16%
    assert 0.0008 < large < 0.003


def test_noisy_samples_stop_on_the_ci_within_budget_and_keep_raw_samples():
    # 3% IQR never meets the 1% IQR target; the median's interval reaches ±1% after ~25 samples.
    rng = np.random.default_rng(2)
    values = iter(0.05 * (1 + 0.022 * rng.standard_normal(5000)))
    clock = iter(np.arange(0, 100, 1e-4))
    m = bench.measure_until(lambda: float(next(values)), Protocol(warmup=0), clock=lambda: float(next(clock)))
    assert m.stop == "ci"
    assert m.stats.rel_iqr > 0.01 and m.stats.rel_ci <= 0.01
    assert 10 < m.stats.n < 1000 and len(m.stats.samples) == m.stats.n


def test_stop_reasons():
    p = Protocol(min_samples=3, max_samples=10, budget_s=1.0, target_rel_ci=0.0)
    assert bench.stop_reason([1.0, 1.0], p, 5.0) == ""          # below min_samples
    assert bench.stop_reason([1.0, 1.0, 1.0], p, 0.0) == "iqr"
    assert bench.stop_reason([1.0, 2.0, 3.0], p, 2.0) == "budget"
    assert bench.stop_reason([1.0, 2.0] * 5, p, 0.0) == "max"


def test_batch_size_arithmetic():
    p = Protocol()  # below 20 µs, batches of ≥ 200 µs, at most 1000
    assert bench.batch_size(0.03, p) == 1
    assert bench.batch_size(0.02, p) == 1
    assert bench.batch_size(0.004, p) == 50
    assert bench.batch_size(0.003, p) == 67           # ceil(0.2 / 0.003)
    assert bench.batch_size(0.0001, p) == 1000        # capped
    assert bench.batch_size(0.0199, p) == 11
    assert bench.batch_size(0.0, p) == 1000
    assert bench.batch_size(0.001, Protocol(max_batch=1)) == 1


# --- batching with a fake device -------------------------------------------------------------------


class FakeDevice:
    """Events time what was enqueued: each launch takes ``per_ms`` plus ``overhead_ms`` per event pair
    (what a lone launch measures on a real GPU: launch latency and event resolution)."""

    def __init__(self, per_ms: float, overhead_ms: float = 0.004):
        self.per_ms, self.overhead_ms = per_ms, overhead_ms
        self.flushes = 0
        self.spins: list[float] = []
        self.launches = 0
        self.launch_log = None

    def flush_l2(self):
        self.flushes += 1

    def spin(self, ms):
        self.spins.append(ms)
        return True

    def synchronize(self):
        pass

    def time_ms(self, enqueue):
        before = self.launches
        enqueue()
        return EventTime((self.launches - before) * self.per_ms + self.overhead_ms, True)


def counting_case(dev: FakeDevice, **kw) -> Case:
    def run():
        dev.launches += 1
    return Case(run=run, result=lambda: np.zeros(1), **kw)


def test_short_kernel_is_batched_and_divided_per_launch():
    dev = FakeDevice(per_ms=0.002)
    t = time_case(dev, counting_case(dev), Protocol(budget_s=0.05))
    # the probe (6 µs a lone launch) gives 34; one batch of 34 measures 2.1 µs a launch: 95
    assert t.batch == bench.batch_size(0.002 + 0.004 / 34, Protocol()) == 95
    assert t.batch * t.stats.median >= 0.19                  # a batch lasts about 200 µs
    assert t.stats.median == pytest.approx(0.002 + 0.004 / t.batch)  # overhead shrinks N-fold
    assert t.single_ms == pytest.approx(0.006)
    assert t.spin and dev.spins
    # one flush per batch (plus the one-launch probes and warm-up), not one per launch
    assert dev.flushes == t.stats.n + 1 + 5 + Protocol().warmup
    assert t.launches == dev.launches


def test_long_kernel_is_not_batched():
    dev = FakeDevice(per_ms=0.05)
    t = time_case(dev, counting_case(dev), Protocol(budget_s=0.05))
    assert t.batch == 1 and t.single_ms is None
    assert t.stats.median == pytest.approx(0.054)


def test_case_with_a_reset_is_not_batched_unless_declared_repeatable():
    dev = FakeDevice(per_ms=0.002)
    t = time_case(dev, counting_case(dev, reset=lambda: None), Protocol(budget_s=0.05))
    assert t.batch == 1
    t = time_case(dev, counting_case(dev, reset=lambda: None, repeatable=True), Protocol(budget_s=0.05))
    assert t.batch > 1


def test_host_case_uses_the_host_clock():
    dev = FakeDevice(per_ms=0.002)
    t = time_case(dev, counting_case(dev, timer="host"), Protocol(budget_s=0.01))
    assert t.batch == 1 and dev.flushes == 0 and t.stats.n >= 3


# --- two poisons, padding, extra checks ------------------------------------------------------------


class PoisonedOutput:
    """A device output whose element ``hole`` a broken kernel never writes: it keeps the poison."""

    def __init__(self, ref: np.ndarray, hole: int | None):
        self.ref, self.hole = ref, hole
        self.data = np.empty_like(ref)

    def poison(self, byte: int = 0xFF):
        self.data.view(np.uint8)[:] = byte

    def run(self):
        keep = self.data.copy()
        self.data[:] = self.ref
        if self.hole is not None:
            self.data.flat[self.hole] = keep.flat[self.hole]

    def result(self):
        return self.data.copy()


def int_check(ref):
    def check(out):
        ok = np.array_equal(out, ref)
        return Check(ok, 0.0 if ok else 1.0, 0.0)
    return check


def test_double_poison_finds_an_unwritten_element_that_one_poison_misses():
    ref = np.arange(10, dtype=np.int32)
    ref[7] = -1  # the right value is what 0xFF bytes read as: one poison alone passes
    out = PoisonedOutput(ref, hole=7)
    case = Case(run=out.run, result=out.result, poison=out.poison)
    one = verified_launches(case, case.run, int_check(ref), twice=False)
    assert one.ok  # the hole that motivated two poisons
    two = verified_launches(case, case.run, int_check(ref), twice=True)
    assert not two.ok and two.unwritten == 1
    assert "1 elements unwritten (differ between two poisons)" in two.reason


def test_double_poison_passes_a_kernel_that_writes_everything():
    ref = np.linspace(-1, 1, 33).astype(np.float32)
    out = PoisonedOutput(ref, hole=None)
    case = Case(run=out.run, result=out.result, poison=out.poison)
    v = verified_launches(case, case.run, int_check(ref))
    assert v.ok and v.unwritten == 0 and v.reason == ""


def test_a_second_result_equal_to_the_first_is_not_checked_again():
    # Time to table: at 16384² the second poison's full check and element count cost ~0.3 s; a
    # result byte-identical to the first's needs neither (an unwritten element would differ).
    ref = np.linspace(-1, 1, 4099).astype(np.float32)
    out = PoisonedOutput(ref, hole=None)
    case = Case(run=out.run, result=out.result, poison=out.poison)
    checked = []
    check = int_check(ref)
    v = verified_launches(case, case.run, lambda o: checked.append(o) or check(o))
    assert v.ok and v.unwritten == 0 and len(checked) == 1
    # one element left unwritten: the results differ, so both are checked and the hole is counted
    checked.clear()
    out.hole = 4000
    v = verified_launches(case, case.run, lambda o: checked.append(o) or check(o))
    assert len(checked) == 2 and v.unwritten == 1 and not v.ok


def test_count_differing_compares_bytes():
    a = np.array([np.nan, 1.0, 2.0], dtype=np.float32)
    assert count_differing(a, a.copy()) == 0                  # NaN bytes equal themselves
    b = a.copy()
    b[2] = 3.0
    assert count_differing(a, b) == 1
    assert count_differing(a, a[:2]) == 3


def test_padding_check_finds_a_stray_write():
    raw = np.full((4, 40), 0x7F, np.uint8)
    raw[:, :32] = 0
    assert padding_damage(raw, 32, 0x7F) == 0
    raw[2, 35] = 1
    assert padding_damage(raw, 32, 0x7F) == 1
    assert padding_damage(raw, 40, 0x7F) == 0  # no padding


class PitchedOutput(PoisonedOutput):
    """Rows of 4 int32 in a pitch of 24 bytes; ``stray`` writes one byte past row 1's end."""

    row_bytes, pitch_bytes = 16, 24

    def __init__(self, ref, stray: bool):
        super().__init__(ref, None)
        self.raw = np.zeros((ref.shape[0], self.pitch_bytes), np.uint8)
        self.stray = stray

    def poison(self, byte=0xFF):
        super().poison(byte)
        self.raw[:] = byte

    def run(self):
        super().run()
        self.raw[:, :self.row_bytes] = self.data.view(np.uint8).reshape(self.raw.shape[0], -1)
        if self.stray:
            self.raw[1, self.row_bytes] = 0

    def download_padding(self):
        return self.raw[:, self.row_bytes:].copy()


@pytest.mark.parametrize("stray", [False, True])
def test_padding_of_a_pitched_output_must_keep_the_poison(stray):
    ref = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = PitchedOutput(ref, stray)
    case = Case(run=out.run, result=out.result, poison=out.poison, padded=(out,))
    v = verified_launches(case, case.run, int_check(ref))
    assert v.padding == (len(POISONS) if stray else 0)
    assert v.ok is (not stray)
    if stray:
        assert "padding bytes" in v.reason


def test_extra_check_failure_is_incorrect():
    ref = np.arange(4, dtype=np.int32)
    out = PoisonedOutput(ref, None)
    seen = []

    def extra(byte):
        seen.append(byte)
        return Check(False, 1.0, 0.0, " (exact-sum check: off by 1)")

    case = Case(run=out.run, result=out.result, poison=out.poison, extra_checks=(extra,))
    v = verified_launches(case, case.run, int_check(ref))
    assert not v.ok and "exact-sum" in v.reason and seen == list(POISONS)


# --- reduce: exact sums -----------------------------------------------------------------------------

RED = load("reduce")


def test_exact_limit_keeps_block_partials_exact():
    p32 = RED.problem("2^24", None, "float32", {})
    p64 = RED.problem("2^24", None, "float64", {})
    from cudalab.families import reduce as R

    assert R.exact_limit(p32, 512) == 100
    assert R.exact_limit(p32, 2**24) == 1
    assert R.exact_limit(p32, 2**23) == 2
    assert R.exact_limit(p64, 2**31) == 100
    x = R.exact_inputs(p32, np.random.default_rng(0), 100)
    assert x.dtype == np.float32 and x.min() >= 1 and x.max() <= 100


def test_exact_check_catches_one_dropped_element_the_tolerance_misses():
    from cudalab.families import reduce as R

    rng = np.random.default_rng(3)
    n = 2**16
    x = rng.integers(1, 101, n).astype(np.float32)
    partials = x.reshape(-1, 256).sum(axis=1, dtype=np.float32)
    total = int(x.astype(np.int64).sum())
    assert R.check_exact(partials, total, 100).ok
    dropped = partials.copy()
    dropped[5] -= x[5 * 256 + 255]                        # the block forgot its last element
    chk = R.check_exact(dropped, total, 100)
    assert not chk.ok and "off by" in chk.detail
    poisoned = partials.copy()
    poisoned[3] = np.nan
    assert not R.check_exact(poisoned, total, 100).ok
    # the float32 tolerance at 2^24 is ~300 elements: a dropped warp of ~256 values near 1 passes it
    p = RED.problem("2^24", None, "float32", {})
    assert R.tolerance(p) * 2**24 > 256


# --- shared memory from the compiled defines -------------------------------------------------------


@pytest.mark.parametrize("fam_name,variant,default", [
    ("smem-square", "row-col-dyn-pad", (32 + 1) * 32 * 4),
    ("smem-rect", "row-col-dyn-pad", None),
])
def test_dynamic_shared_memory_follows_the_compiled_ipad(fam_name, variant, default):
    spec = catalog.family(fam_name)
    fam = load(spec.module)
    v = next(x for x in spec.variants if x.name == variant)
    problem = fam.problem(None, None, spec.default_dtype, {o.name: o.default for o in fam.OPTIONS})
    base = planning.plan_launch(v, fam, problem)
    if default is not None:
        assert base.shared == default
    bx, by, _ = base.block
    lau = planning.plan_launch(v, fam, problem, overrides=(("IPAD", "2"),))
    assert dict(lau.defines)["IPAD"] == "2"
    # -D IPAD=2: the kernel indexes up to (by - 1) * (bx + 2) + bx - 1 words; the launch gives (bx + 2) * by
    assert lau.shared == (bx + 2) * by * 4
    assert lau.shared >= ((by - 1) * (bx + 2) + bx) * 4


# --- the mutant trees parse and plan (the GPU test runs them) --------------------------------------


@pytest.mark.parametrize("family,fields", [
    ("copy", {"shape": "97x1000"}), ("transpose", {"shape": "97x1000"}), ("reduce", {"n": "2^24", "dtype": "float32"}),
    ("matmul", {"n": "200"}), ("gemv", {"n": "1000"}), ("smem-square", {"options": (("blocks", 4),)}),
])
def test_mutant_trees_plan_on_the_cpu(tmp_path, monkeypatch, family, fields):
    from mutants import build, use_tree

    names = build(tmp_path, family)
    use_tree(monkeypatch, tmp_path)
    req = planning.RunRequest(family=family, variants=",".join(names), roofline=False, **fields)
    _plan = planning.precheck(req)
    spec, fam, problem, variants = _plan.spec, _plan.family, _plan.problem, list(_plan.variants)
    assert [v.name for v in variants] == names
    for v in variants:
        lau = planning.plan_launch(v, fam, problem)
        assert ("MUTATION", str(v.defines and dict(v.defines)["MUTATION"])) in lau.defines
        assert (spec.directory / v.source).is_file()
        grid = lau.grid
        # every mutation needs a block (1, 0) and a second warp in block 0
        assert grid[0] >= 2 and lau.block[0] * lau.block[1] >= 64


def test_under_a_tool_one_poison_and_no_extra_launches():
    ref = np.arange(4, dtype=np.int32)
    out = PoisonedOutput(ref, None)
    launches = []

    def run():
        launches.append(1)
        out.run()

    case = Case(run=run, result=out.result, poison=out.poison,
                extra_checks=(lambda byte: launches.append(2) or Check(True, 0.0, 0.0),))
    v = verified_launches(case, case.run, int_check(ref), twice=False, extra=False)
    assert v.ok and launches == [1]


def test_every_one_launch_sample_is_enqueued_behind_a_spin():
    # The GPU must not reach the start event before the launch is queued: host latency would be timed.
    dev = FakeDevice(per_ms=0.05)
    t = time_case(dev, counting_case(dev), Protocol(budget_s=0.05))
    assert t.batch == 1 and t.spin
    assert len(dev.spins) == dev.flushes          # one spin per sample, warm-up and probes included
    assert all(0 < ms <= sampling.SPIN_SINGLE_MAX_MS for ms in dev.spins)


class LateHostDevice(FakeDevice):
    """The host needs ``host_ms[i]`` to queue sample i's launches (the last value repeats); a spin
    shorter than that lets the GPU reach the start event first and wait inside the window, as under
    ncu, whose launch interception is slow and uneven."""

    def __init__(self, host_ms: list[float], per_ms: float = 0.7):
        super().__init__(per_ms=per_ms, overhead_ms=0.0)
        self.host_ms, self.calls = host_ms, 0

    def time_ms(self, enqueue):
        host = self.host_ms[min(self.calls, len(self.host_ms) - 1)]
        self.calls += 1
        t = super().time_ms(enqueue)
        spun = self.spins[-1] if self.spins else 0.0
        return EventTime(t.ms + max(0.0, host - spun), ahead=spun > host)


def test_a_sample_the_gpu_overtook_is_redone_behind_a_longer_spin():
    # samples 2 and 5 meet a slow host (0.3 ms against a ~0.1 ms spin): redone, the median stays clean
    dev = LateHostDevice([0.01, 0.01, 0.3, 0.01, 0.01, 0.3] + [0.01] * 40)
    t = time_case(dev, counting_case(dev), Protocol(budget_s=0.05, warmup=1, max_batch=1))
    assert t.retimed >= 1 and t.host_gaps == 0
    assert max(t.stats.samples) == pytest.approx(0.7)           # no timed host latency kept
    over = [i for i, h in enumerate(dev.host_ms[:dev.calls]) if h == 0.3]
    assert dev.spins[over[0] + 1] >= 1.9 * dev.spins[over[0]] > 0  # the retry spun ~twice as long
    assert t.extra()["retimed"] == t.retimed


@pytest.mark.parametrize("warmup", [0, 2])
def test_a_gpu_that_always_overtakes_is_counted_once_retries_run_out(warmup):
    # a call that waits for the GPU inside the launch: no spin can help; retried once, then counted
    dev = LateHostDevice([10.0])
    t = time_case(dev, counting_case(dev), Protocol(budget_s=0.05, warmup=warmup, max_batch=1, min_samples=10))
    assert t.retimed == (sampling.RETIME_MAX if not warmup else 0)  # warm-ups' retries are not counted
    assert t.host_gaps == t.stats.n                              # every timed sample is flagged, no more
    assert dev.calls == warmup + t.stats.n + sampling.RETIME_MAX  # retries cost one sample's worth
    assert t.extra()["host_gaps"] == t.stats.n


def test_without_a_spin_nothing_is_redone():
    dev = LateHostDevice([0.3])
    dev.spin = lambda ms: False
    t = time_case(dev, counting_case(dev), Protocol(budget_s=0.05, warmup=0, max_batch=1, min_samples=10))
    assert t.retimed == 0 and t.host_gaps == 0 and dev.calls == t.stats.n and not t.spin
