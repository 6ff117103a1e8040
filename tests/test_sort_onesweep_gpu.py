"""sort's onesweep variant on a real GPU: both dtypes and all four inputs at sizes that are and are not
multiples of its 6144-key tile (1 to 2^24 + 12345), other blocks (tiles of 9216 to 24576 keys), the
key types' extremes and keys that differ in one byte only (stability a keys-only check can see),
repeated runs on one input (a look-back race shows as a moving answer), the compiled mutants (a
look-back that drops the predecessor's inclusive prefix, a dropped tail tile, an unstable rank) coming
out incorrect beside a passing control, and compute-sanitizer's four tools (marked sanitizer)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from cudalab import plan as planning
from cudalab import catalog
from cudalab.worker import executor as runner
from cudalab import sanitize as S
from cudalab.plan import RunRequest
from gpu_util import FAST, assert_all_passed, run_rows
from mutants import SRC, use_tree
from test_sort_gpu import EXTREMES

SEED = 97531
DTYPES = ("int32", "float32")
INPUTS = ("random", "dups", "sorted", "reverse")
SIZES = (1, 255, 6143, 6144, 6145, 3 * 6144 + 1, 100003, 2**20)
MUTATIONS = {"control": 0, "lookback-drops-prefix": 1, "drops-tail-tile": 2, "unstable-rank": 3}


def _rows(device, n, dtype="int32", kind="random", variants="onesweep", **kw):
    return run_rows(device, "sort", n=str(n), dtype=dtype, options=(("input", kind),), seed=SEED,
                    variants=variants, **kw)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_onesweep_sorts(device, n, dtype, kind):
    rows = _rows(device, n, dtype, kind)
    assert_all_passed(rows)
    assert rows["onesweep"].extra["passes"] == 6 and rows["onesweep"].extra["rate"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_sizes_beside_radix(device, dtype):
    for n, kind in ((2**24 + 12345, "random"), (6144 * 2731, "dups"), (2**24 - 1, "reverse")):
        assert_all_passed(_rows(device, n, dtype, kind, variants="radix,onesweep"))


@pytest.mark.gpu
@pytest.mark.parametrize("block", ["384", "512", "1024"])
def test_other_blocks(device, block):
    for n, kind in ((100003, "dups"), (2**20 + 7, "random")):
        rows = _rows(device, n, "float32", kind, block=block)
        assert_all_passed(rows)
        assert rows["onesweep"].block == block


def _onesweep_on(device, x, **kw):
    req = RunRequest(family="sort", variants="onesweep", n=str(x.size), dtype=x.dtype.name, roofline=False,
                     protocol=FAST, seed=SEED, keep_outputs=True, **kw)
    fr = runner.FamilyRun(planning.precheck(req), device, inputs={"x": x})
    rows = fr.run()
    assert rows[0].status == runner.PASSED, rows[0].reason
    return fr.outputs["onesweep"].keys


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 15, 6144 * 3 + 17, 100003])
@pytest.mark.parametrize("dtype", DTYPES)
def test_extremes(device, dtype, n):
    rng = np.random.default_rng(n)
    special = EXTREMES[dtype]
    wide = (rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)).astype(np.float32) if dtype == "float32" \
        else rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(np.int32)
    x = np.where(rng.random(n) < 0.3, rng.choice(special, n), wide).astype(dtype)
    keys = _onesweep_on(device, x)
    if dtype == "float32":                              # -0.0 sorts just before +0.0 (NumPy treats them as equal)
        zeros = keys[keys == 0]
        assert np.all(np.signbit(zeros[:np.count_nonzero(np.signbit(zeros))]))


@pytest.mark.gpu
@pytest.mark.parametrize("byte", range(4))
def test_keys_that_differ_in_one_byte(device, byte):
    # Every pass but one puts all keys in one digit: the passes after the deciding one must keep the
    # order they are given, and within one digit the look-back chains over every tile.
    rng = np.random.default_rng(byte)
    n = 6144 * 37 + 123
    x = ((rng.integers(0, 256, n, dtype=np.int64) << (8 * byte)) ^ 0x5A5A5A5A).astype(np.uint32).view(np.int32)
    _onesweep_on(device, x)
    _onesweep_on(device, (np.arange(n) % 3 << (8 * byte)).astype(np.uint32).view(np.int32), block="512")


@pytest.mark.gpu
def test_repeated_runs_give_one_answer(device):
    # Timing relaunches the case back to back without a reset: the init launch makes every run start
    # from zeroed counters and status words. Several verified runs on one input must all pass.
    rng = np.random.default_rng(5)
    x = rng.integers(-2**31, 2**31, 2**22 + 5, dtype=np.int64).astype(np.int32)
    for _ in range(3):
        _onesweep_on(device, x)


def _mutant_tree(root):
    """cuda_src/sort plus one onesweep variant per mutation (sort_onesweep.cu's MUTATION hooks)."""
    dest = root / "sort"
    shutil.copytree(SRC / "sort", dest)
    v = catalog.family("sort").variant("onesweep")
    text = (dest / "family.toml").read_text()
    for name, number in MUTATIONS.items():
        text += (f'\n[[variant]]\nname = "mutant-{name}"\nsource = "{v.source}"\nkernel = "{v.kernel}"\n'
                 f'block = "{v.block[0]}"\nper_thread = "{v.per_thread[0]}"\nrequire = {list(v.require)!r}\n'.replace("'", '"')
                 + "defines = { " + ", ".join(f'{k} = "{x}"' for k, x in v.defines) + f', MUTATION = "{number}" }}\n'
                 f'shared = "{v.shared}"\nparams = {{ onesweep = true }}\ndescription = "mutation {number}: {name}"\n')
    (dest / "family.toml").write_text(text)
    return [f"mutant-{name}" for name in MUTATIONS]


@pytest.mark.gpu
@pytest.mark.parametrize("n", [100003, 2**20 + 6144 + 1])
def test_every_mutant_is_incorrect_and_the_control_passes(device, tmp_path, monkeypatch, n):
    names = _mutant_tree(tmp_path)
    use_tree(monkeypatch, tmp_path)
    rows = run_rows(device, "sort", variants=",".join(names), n=str(n), seed=SEED)
    control = rows.pop("mutant-control")
    assert control.status == runner.PASSED, control.reason
    missed = {k: f"{r.status}: {r.reason}" for k, r in rows.items() if r.status != runner.INCORRECT}
    assert not missed, f"mutants the check let through: {missed}"


@pytest.mark.sanitizer
def test_clean_under_every_sanitizer_tool(tmp_path):
    rows = S.sanitize(RunRequest(family="sort", variants="onesweep"), tools=S.TOOLS, log_dir=tmp_path, timeout_s=300)
    bad = [f"{r.variant} {r.tool} {r.size}: {r.status} {r.findings} {r.first or r.reason} [{r.log}]"
           for r in S.failing(rows)]
    assert not bad, "\n".join(bad)
    assert {r.tool for r in rows} == set(S.TOOLS) and len({r.size for r in rows}) == 2
    assert all(r.status == S.PASSED for r in rows), [(r.tool, r.size, r.status, r.reason) for r in rows]
