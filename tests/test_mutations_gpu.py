"""Mutation tests: a check is judged by the wrong kernels it catches.

For each family, kernels broken on purpose (tests/data/mutants: drop the last element, one warp,
one block, write one element or one partial wrong, write into a pitched row's padding) run through
the real runner beside a correct control built from the same source; every mutant must come out
INCORRECT, the control PASSED. The trees are built in a temporary CUDALAB_SRC (tests/mutants.py).
"""

from __future__ import annotations

import pytest
from gpu_util import run_rows
from mutants import build, use_tree

from cudalab.worker import executor as runner

pytestmark = pytest.mark.gpu

# (family, request fields): small problems, with a ragged edge where the family allows one, pitched
# rows with padding for copy and transpose (97 x 1000 floats: 4,000-byte rows, pitch 4,096).
CASES = [
    ("copy", {"shape": "97x1000"}),
    ("transpose", {"shape": "97x1000"}),
    ("reduce", {"n": "2^24", "dtype": "float32"}),
    ("reduce", {"n": "2^20", "dtype": "float64"}),
    ("reduce", {"n": "2^20", "dtype": "int32"}),
    ("matmul", {"n": "200"}),
    ("gemv", {"n": "1000"}),
    ("smem-square", {"options": (("blocks", 4),)}),
]


@pytest.mark.parametrize("family,fields", CASES, ids=[f"{f}-{d.get('dtype', '')}" for f, d in CASES])
def test_every_mutant_is_incorrect_and_the_control_passes(device, tmp_path, monkeypatch, family, fields):
    names = build(tmp_path, family)
    use_tree(monkeypatch, tmp_path)
    rows = run_rows(device, family, variants=",".join(names), **fields)
    control = rows.pop("mutant-control")
    assert control.status == runner.PASSED, control.reason
    missed = {n: f"{r.status}: {r.reason}" for n, r in rows.items() if r.status != runner.INCORRECT}
    assert not missed, f"{family} {fields}: mutants the check let through: {missed}"
    if "mutant-padding-write" in rows:
        pad = rows["mutant-padding-write"]
        assert pad.extra.get("pitch", 0) > 0 and "padding bytes" in pad.reason, pad.reason


def test_float32_sum_needs_the_exact_check(device, tmp_path, monkeypatch):
    # At 2^24 the float32 tolerance is ~300 elements' worth: a dropped warp (32 elements) and a
    # partial off by one pass it; only the exact-sum launch on integer inputs catches them.
    build(tmp_path, "reduce")
    use_tree(monkeypatch, tmp_path)
    rows = run_rows(device, "reduce", variants="mutant-drop-warp,mutant-wrong-element", n="2^24", dtype="float32")
    for r in rows.values():
        assert r.status == runner.INCORRECT and "exact-sum" in r.reason, r.reason


def test_smem_ipad_override_gets_the_shared_memory_it_indexes(device):
    # -D IPAD=2: the dynamic tile is (32 + 2) x 32 ints; sized from the compiled define it passes
    # (before, 4,224 bytes were given for 4,344 indexed).
    rows = run_rows(device, "smem-square", variants="row-col-dyn-pad", defines=(("IPAD", "2"),))
    r = rows["row-col-dyn-pad"]
    assert r.shared == 34 * 32 * 4
    assert r.status == runner.PASSED, r.reason
