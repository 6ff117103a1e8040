"""The three examples through the real runner on the CPU: their kernels played by NumPy on a fake device,
so the problems' own parts (inputs, references, checks, work, scratch zeroed between launches, the
accumulating output, the three-kernel launch hook) are what is tested; the wrong twins come out ✗."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab.worker import executor as runner
from test_runcore import FAST, FakeDevice, FakeKernel

EXAMPLES = Path(__file__).parent.parent / "examples"
TILE = 256 * 8  # scan: block 256 x 8 items


def softmax(y, x, rows, cols, rescale=True):
    a = x.data.astype(np.float64)
    m = a.max(axis=1, keepdims=True) if rescale else a[:, :1]  # the twin: the first value as the max
    e = np.exp(a - m)
    y.data[...] = (e / e.sum(axis=1, keepdims=True)) if rescale else e / np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True)


def scan_reduce(x, sums, n):
    v = x.data.astype(np.int64)
    tiles = -(-int(n) // TILE)
    sums.data[:tiles] = [v[t * TILE:(t + 1) * TILE].sum() for t in range(tiles)]


def scan_sums(sums, tiles):
    s = sums.data[:int(tiles)].astype(np.int64)
    sums.data[:int(tiles)] = (np.cumsum(s) - s).astype(np.int32)


def scan_apply(y, x, sums, n):
    for t in range(-(-int(n) // TILE)):
        part = slice(t * TILE, (t + 1) * TILE)
        y.data[part] = np.cumsum(x.data[part], dtype=np.int32) + sums.data[t]


def scan_lookback(y, x, status, counter, n, carry=True):
    if counter.data[0] != 0 or status.data.any():  # not reset since the last launch: tiles numbered wrong
        y.data[...] = 0
        return
    counter.data[0] = status.data.size
    status.data[...] = 2 << 32
    if carry:
        y.data[...] = np.cumsum(x.data, dtype=np.int32)
    else:
        for t in range(status.data.size):
            part = slice(t * TILE, (t + 1) * TILE)
            y.data[part] = np.cumsum(x.data[part], dtype=np.int32)


def histogram(bins, data, n, flushed=256):
    bins.data[:flushed] += np.bincount(data.data, minlength=256).astype(np.uint32)[:flushed]


class ExampleDevice(FakeDevice):
    """Kernels by name and defines (a wrong twin is the same kernel with a macro)."""

    def __init__(self):
        super().__init__({})

    def compile(self, source, defines, names, **kw):
        table = {
            "softmax_block_row": softmax, "softmax_warp_online": softmax,
            "scan_reduce": scan_reduce, "scan_sums": scan_sums, "scan_apply": scan_apply,
            "scan_lookback": scan_lookback, "hist_global": histogram, "hist_shared": histogram,
        }
        out = {}
        for name in names:
            fn = table[name]
            if "NO_RESCALE" in defines:
                fn = lambda *a: softmax(*a, rescale=False)  # noqa: E731
            elif "NO_LOOKBACK" in defines:
                fn = lambda *a: scan_lookback(*a, carry=False)  # noqa: E731
            elif "ONE_BIN_A_THREAD" in defines:
                fn = lambda *a: histogram(*a, flushed=128)  # noqa: E731
            out[name] = FakeKernel(fn)
        return out


@pytest.mark.parametrize("family, variants, size, wrong", [
    ("softmax", "block-row,warp-online,wrong-no-rescale", {"shape": "16x100"}, "wrong-no-rescale"),
    ("scan", "reduce-then-scan,lookback,wrong-no-carry", {"n": str(3 * TILE + 17)}, "wrong-no-carry"),
    ("histogram", "global-atomics,shared-bins,wrong-short-flush", {"n": "10001"}, "wrong-short-flush"),
])
def test_each_example_passes_and_its_wrong_twin_does_not(monkeypatch, family, variants, size, wrong):
    monkeypatch.setenv("CUDALAB_PATH", str(EXAMPLES))
    req = planning.RunRequest(family=family, variants=variants, protocol=FAST, seed=3, roofline=False, **size)
    rows = {r.variant: r for r in runner.FamilyRun(planning.precheck(req), ExampleDevice()).run()}
    for name, row in rows.items():
        want = "incorrect" if name == wrong else "passed"
        assert row.status == want, (name, row.reason)
        assert row.gbs and row.gbs > 0


def test_a_library_row_without_its_library_is_skipped_saying_so(monkeypatch):
    monkeypatch.setenv("CUDALAB_PATH", str(EXAMPLES))
    pytest.importorskip("numpy")
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is installed here")
    except ImportError:
        pass
    req = planning.RunRequest(family="scan", variants="cupy", protocol=FAST, seed=3, roofline=False, n="5000")
    (row,) = runner.FamilyRun(planning.precheck(req), ExampleDevice()).run()
    assert row.status == "skipped" and "cupy" in row.reason


def test_ncu_and_sanitize_plan_an_outside_family_and_its_children_see_the_path(monkeypatch):
    from cudalab import ncu
    from cudalab import sanitize as S
    from fake_tools import FakeRun, ncu_csv, planned_rows

    monkeypatch.setenv("CUDALAB_PATH", str(EXAMPLES))
    jobs = S.plan(planning.RunRequest(family="scan"), tools=("memcheck",))
    assert {j.variant for j in jobs} >= {"lookback", "wrong-no-carry"} and not any(j.skip for j in jobs if j.variant != "cupy")
    assert {j.request.n for j in jobs} == {"4096", "1000"}
    req = planning.RunRequest(family="histogram", n="1000000")
    launches = [(r.extra["launches"][0][0], r.extra["launches"][0][1], r.extra["launches"][0][2],
                 {"gpu__time_duration.sum": ("ns", "1000")}) for r in planned_rows(req)]
    run = FakeRun(csv=ncu_csv(launches))
    rep = ncu.profile(req, metrics="gpu__time_duration.sum", ncu="/opt/ncu", run=run)
    argv, kw = run.calls[0]
    assert "hist_global|" in argv[argv.index("--kernel-name") + 1] or "hist_global" in argv[argv.index("--kernel-name") + 1]
    assert kw["env"]["CUDALAB_PATH"] == str(EXAMPLES)
    assert rep is not None
