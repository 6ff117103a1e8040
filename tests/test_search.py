"""search without a GPU: catalog, problem parsing, inputs, NumPy references, the checks against the
wrong answers they must catch, the host rows, launch plans, and nvcc builds for both dtypes."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import catalog
from cudalab import launch as L
from cudalab.errors import UsageError
from cudalab.families import load
from cudalab.families.model import SetupContext

SPEC = catalog.family("search")
MOD = importlib.import_module("cudalab.families.search")
Found = MOD.Found
DTYPES = ("int32", "float32")
POISON_INT = np.frombuffer(bytes([MOD.POISON]) * 4, dtype=np.int32)[0]


def _problem(n="1000", dtype="int32", key="present", queries=0):
    return MOD.FAMILY.problem(str(n), None, dtype, {"key": key, "queries": queries})


def _inputs(p, seed=3):
    return MOD.FAMILY.make_inputs(p, np.random.default_rng(seed))


# --- catalog ----------------------------------------------------------------------------------------

def test_catalog():
    assert SPEC.names() == ["host-linear", "linear", "host-all", "all", "host-binary", "binary"]
    assert SPEC.metric == "rate" and set(SPEC.dtypes) == set(DTYPES) and SPEC.default_dtype == "int32"
    assert load("search") is MOD.FAMILY
    for v in SPEC.variants:
        assert MOD.op_of(v) in MOD.OPS
        if v.kind == "kernel":
            assert v.kernel.startswith("search_") and v.source == "search.cu"
    ops = {v.name: MOD.op_of(v) for v in SPEC.variants}
    assert {op for name, op in ops.items() if name.startswith("host-")} == set(MOD.OPS)   # a host row per operation
    # The description (shown by `cudalab list`) says the GPU reads everything where a CPU loop stops early.
    assert "every element" in SPEC.variant("linear").description and "early" in SPEC.variant("linear").description


def test_list_shows_the_family():
    from click.testing import CliRunner

    from cudalab.cli import cli

    res = CliRunner().invoke(cli, ["list", "search"])
    assert res.exit_code == 0, res.output
    assert "linear" in res.output and "binary" in res.output


# --- problem ------------------------------------------------------------------------------------------

def test_problem_parsing():
    p = MOD.FAMILY.problem(None, None, "int32", {})
    assert p.dims == (2**24,) and p.opt("queries") == 2**24 and p.opt("key") == "present"
    p = _problem("1000003", "float32", "absent", 77)
    assert p.dims == (1000003,) and p.opt("queries") == 77 and p.opt("key") == "absent"
    assert MOD.sizes(p) == (1000003, 77)
    assert _problem("1").dims == (1,)
    with pytest.raises(UsageError, match="--n"):
        MOD.FAMILY.problem(None, "4x4", "int32", {})
    with pytest.raises(UsageError, match="out of range"):
        MOD.FAMILY.problem("2^30", None, "int32", {})
    with pytest.raises(UsageError, match="--key"):
        _problem(key="maybe")
    with pytest.raises(UsageError, match="--queries"):
        _problem(queries=-3)


def test_extent_follows_the_operation():
    p = _problem("1000", queries=5000)
    assert MOD.FAMILY.extent(p, SPEC.variant("binary")) == (5000, 1, 1)
    assert MOD.FAMILY.extent(p, SPEC.variant("linear")) == (1000, 1, 1)
    assert MOD.FAMILY.extent(p, SPEC.variant("all")) == (1000, 1, 1)


# --- inputs and references -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 2, 33, 4097, 100003])
def test_inputs_have_duplicates_and_both_kinds_of_key(dtype, n):
    for key in ("present", "absent"):
        p = _problem(n, dtype, key)
        inp = _inputs(p)
        x = inp["x"]
        assert x.dtype == np.dtype(dtype) and x.shape == (n,)
        assert np.all(x.astype(np.int64) % 2 == 0)                          # values 0, 2, 4, ...
        assert np.array_equal(inp["sorted"], np.sort(x))
        assert (inp["key"][0] in x) == (key == "present")
        if n >= 100:
            assert np.unique(x).size < n                                     # duplicates
            q = inp["queries"]
            present = np.isin(q, x)
            assert 0.2 < present.mean() < 0.8                                # queries present and absent
            assert q.min() < x.min()                                         # one below everything


def test_references_by_hand():
    x = np.array([4, 2, 4, 6, 2, 4], dtype=np.int32)
    inp = {"x": x, "sorted": np.sort(x), "key": np.array([4], np.int32),
           "queries": np.array([-1, 2, 3, 4, 7], np.int32)}
    assert MOD.host_linear(inp).tolist() == [0]
    assert MOD.host_all(inp).tolist() == [0, 2, 5]
    assert MOD.host_binary(inp).tolist() == [0, 0, 2, 2, 6]                  # lower bound; n when above all
    inp["key"] = np.array([5], np.int32)
    assert MOD.host_linear(inp).tolist() == [-1]                             # not found
    assert MOD.host_all(inp).tolist() == []
    one = {"x": np.array([0.0], np.float32), "key": np.array([0.0], np.float32)}
    assert MOD.host_linear(one).tolist() == [0]


def test_answers_are_lazy_and_cached():
    p = _problem("1000")
    ref = MOD.FAMILY.reference(p, _inputs(p))
    assert ref._cache == {}
    a = ref.get("linear")
    assert ref.get("linear") is a and set(ref._cache) == {"linear"}


# --- checks: each must catch the wrong answer it exists for ----------------------------------------------------

@pytest.fixture
def case():
    p = _problem("5000")
    inp = _inputs(p)
    return p, inp, MOD.FAMILY.reference(p, inp)


def test_check_passes_the_right_answers(case):
    p, inp, ref = case
    assert MOD.FAMILY.check(p, Found("linear", ref.get("linear")), ref).ok
    assert MOD.FAMILY.check(p, Found("all", ref.get("all"), ref.get("all").size), ref).ok
    assert MOD.FAMILY.check(p, Found("binary", ref.get("binary")), ref).ok


def test_check_catches_a_wrong_first_index(case):
    p, inp, ref = case
    all_ = ref.get("all")
    assert all_.size >= 2
    assert not MOD.FAMILY.check(p, Found("linear", all_[1:2]), ref).ok               # a later hit, not the first
    assert not MOD.FAMILY.check(p, Found("linear", np.array([-1], np.int32)), ref).ok  # 'not found' for a present key
    assert not MOD.FAMILY.check(p, Found("linear", np.array([POISON_INT])), ref).ok    # never written


def test_check_catches_found_when_absent():
    p = _problem("5000", key="absent")
    inp = _inputs(p)
    ref = MOD.FAMILY.reference(p, inp)
    assert ref.get("linear").tolist() == [-1]
    assert MOD.FAMILY.check(p, Found("linear", np.array([-1], np.int32)), ref).ok
    assert not MOD.FAMILY.check(p, Found("linear", np.array([0], np.int32)), ref).ok
    assert MOD.FAMILY.check(p, Found("all", np.array([], np.int32), 0), ref).ok
    assert not MOD.FAMILY.check(p, Found("all", np.array([], np.int32), POISON_INT), ref).ok  # count never written


def test_check_catches_a_missing_or_wrong_index_in_all(case):
    p, inp, ref = case
    good = ref.get("all")
    missing = good[:-1]
    assert not MOD.FAMILY.check(p, Found("all", missing, missing.size), ref).ok      # one hit lost, count agrees
    assert not MOD.FAMILY.check(p, Found("all", missing, good.size), ref).ok         # count right, an index lost
    shuffled = good[::-1].copy()
    assert not MOD.FAMILY.check(p, Found("all", shuffled, good.size), ref).ok        # not ascending
    hole = good.copy()
    hole[-1] = POISON_INT
    chk = MOD.FAMILY.check(p, Found("all", hole, good.size), ref)
    assert not chk.ok and "poison" in chk.detail


def test_check_catches_binary_errors(case):
    p, inp, ref = case
    good = ref.get("binary")
    upper = np.searchsorted(inp["sorted"], inp["queries"], side="right").astype(np.int32)
    assert not MOD.FAMILY.check(p, Found("binary", upper), ref).ok                   # upper bound is not lower bound
    off = good.copy()
    off[7] += 1
    chk = MOD.FAMILY.check(p, Found("binary", off), ref)
    assert not chk.ok and chk.max_error == 1.0
    unwritten = good.copy()
    unwritten[-1] = POISON_INT
    assert not MOD.FAMILY.check(p, Found("binary", unwritten), ref).ok


def test_poison_is_never_an_answer():
    assert POISON_INT < -1                                                   # -1 is linear's 'absent'
    assert np.frombuffer(bytes([MOD.NOT_FOUND_FILL]) * 4, dtype=np.int32)[0] > MOD.MAX_N


# --- host rows ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key", ["present", "absent"])
def test_host_rows_pass_and_count_items(dtype, key):
    p = _problem("3001", dtype, key, queries=500)
    inp = _inputs(p)
    ref = MOD.FAMILY.reference(p, inp)
    for name in ("host-linear", "host-all", "host-binary"):
        v = SPEC.variant(name)
        c = MOD.FAMILY.setup(SetupContext(v, None, p, inp, None))
        assert c.timer == "host"
        c.run()
        assert MOD.FAMILY.check(p, c.result(), ref).ok, name
        assert c.items == (500 if name == "host-binary" else 3001)
        if name == "host-linear":
            assert c.notes["found"] == ref.get("linear")[0]


# --- launches and builds --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 33, 2048, 3001, 2**24])
def test_launch_plans(n):
    p = _problem(n)
    lin = planning.plan_launch(SPEC.variant("linear"), MOD.FAMILY, p, None, None, L.DeviceLimits())
    assert lin.grid[0] >= 1 and lin.grid[0] * 256 <= max(n, 256) + 255
    all_ = planning.plan_launch(SPEC.variant("all"), MOD.FAMILY, p, None, None, L.DeviceLimits())
    assert all_.tile[0] == 2048 and all_.grid[0] * 2048 >= n and dict(all_.defines)["ITEMS"] == "8"
    binary = planning.plan_launch(SPEC.variant("binary"), MOD.FAMILY, p, None, None, L.DeviceLimits())
    assert binary.grid[0] * 256 >= n
    assert dict(binary.defines)["ELEM_T"] == "int"


def test_sanitize_sizes_one_multiple_of_the_chunk_one_not():
    sizes = [int(s["n"]) for s in MOD.FAMILY.SANITIZE_SIZES]
    assert any(s % 2048 == 0 for s in sizes) and any(s % 2048 for s in sizes)
    assert max(sizes) <= 8192


@pytest.mark.nvcc
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernels_compile_for_both_dtypes(dtype):
    from cudalab import build

    defines = dict(MOD.FAMILY.defines(_problem(dtype=dtype), SPEC.variant("all")), ITEMS="8")
    res = {k.name: k for k in build.build(SPEC.directory / "search.cu", defines, 'sm_90').kernels}
    assert set(res) >= {"search_linear", "search_linear_finish", "search_all_count", "search_all_scan",
                        "search_all_scatter", "search_binary"}
    assert all(r.spill_stores == 0 and r.spill_loads == 0 for r in res.values())


def test_kernels_are_extern_c_and_take_no_early_exit_before_barriers():
    src = (SPEC.directory / "search.cu").read_text()
    assert src.count('extern "C" __global__') == 6
