"""A variant's tile, grid, shared and require expressions may name the integer defines in effect (the
family's defines and the -D overrides): a tuned WT_BM x WT_BN gets the grid it needs, and every built-in
variant's planned launch is what it was before (tests/data/launches/builtin.json, written by the planner
before the change: ``python tests/test_plan_defines.py --write``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cudalab import catalog
from cudalab import launch as L
from cudalab.errors import CudalabError, SkipRow
from cudalab.catalog import VariantSpec, user
from cudalab.families import load
from cudalab.plan import plan_launch

SNAPSHOT = Path(__file__).parent / "data" / "launches" / "builtin.json"
SIZES = (None, "1024", "4096", "3000")
BLOCKS = (None, "128", "256", "32x8")
#: The launch's own macros every kernel gets (issue 56): derived from the block and tile the snapshot holds.
LAUNCH = {k for k, _ in user.LAUNCH_DEFINES}


def planned_launches() -> dict[str, str]:
    """Every built-in kernel variant's launch (or the class of its refusal) at a few sizes and blocks."""
    out = {}
    for name in sorted(catalog.load_catalog()):
        spec = catalog.family(name)
        fam = load(spec.module)
        for v in spec.variants:
            if v.kind != "kernel":
                continue
            for n in SIZES:
                try:
                    problem = fam.problem(n, None, spec.default_dtype, {})
                except CudalabError:
                    continue
                for block in BLOCKS:
                    key = f"{name}/{v.name} n={n} block={block}"
                    try:
                        lau = plan_launch(v, fam, problem, block)
                    except CudalabError as exc:
                        out[key] = type(exc).__name__
                        continue
                    out[key] = (f"grid {L.fmt_dims(lau.grid)} block {L.fmt_dims(lau.block)} tile {L.fmt_dims(lau.tile)} "
                                f"shared {lau.shared} defines {' '.join(f'{k}={v}' for k, v in lau.defines if k not in LAUNCH)}")
    return out


def test_every_builtin_launch_is_unchanged():
    want = json.loads(SNAPSHOT.read_text())
    got = planned_launches()
    assert set(got) == set(want)
    changed = {k: (want[k], got[k]) for k in want if want[k] != got[k]}
    assert not changed


def _planned(family: str, variant: str, n: str, defines: dict[str, str] | None = None, block: str | None = None):
    spec = catalog.family(family)
    fam = load(spec.module)
    problem = fam.problem(n, None, spec.default_dtype, {})
    return plan_launch(spec.variant(variant), fam, problem, block, overrides=tuple((defines or {}).items()))


def test_a_tuned_block_tile_gets_its_own_grid_and_shared_memory():
    got = _planned("matmul", "warptile", "4096", {"WT_BM": "64", "WT_BN": "128", "WT_WM": "32", "WT_WN": "32"})
    assert got.tile == (128, 64, 1) and got.grid == (32, 64, 1) and got.block == (256, 1, 1)
    assert got.shared == 3 * (16 * (64 + 4) + 16 * 128) * 4
    small = _planned("matmul", "warptile", "4096", {"WT_BM": "64", "WT_BN": "128", "WT_WM": "32", "WT_MI": "1"}, block="128")
    assert small.block == (128, 1, 1) and small.grid == (32, 64, 1)
    default = _planned("matmul", "warptile", "4096")
    assert default.tile == (256, 128, 1) and default.grid == (16, 32, 1)


def test_the_threads_must_be_the_ones_the_defines_compile():
    with pytest.raises(SkipRow, match="WT_BM / WT_WM"):  # 64 x 256 in 64 x 64 warp tiles is 4 warps, not 8
        _planned("matmul", "warptile", "4096", {"WT_BM": "64"})
    with pytest.raises(SkipRow):
        _planned("gemm", "warptile", "4096", block="32x8")  # 256 threads, but not one row of them


def test_gemm_warptile_shared_memory_follows_its_stages():
    assert _planned("gemm", "warptile", "4096", {"WT_STAGES": "4"}).shared == 4 * (16 * (128 + 4) + 16 * 256) * 4


def test_onesweep_tile_follows_its_items():
    got = _planned("sort", "onesweep", "1000000", {"ITEMS": "16"})
    assert got.tile[0] == 16 * 256 and got.grid[0] == -(-1000000 // (16 * 256))
    assert got.shared == 4 * 16 * 256 + 1024 * 8


def _variant(**kw) -> VariantSpec:
    return VariantSpec(name="probe", source="x.cu", kernel="k", block=(128, 1, 1), **kw)


def test_sm_grid_and_require_may_name_defines():
    spec = catalog.family("copy")
    fam = load(spec.module)
    problem = fam.problem("4096", None, spec.default_dtype, {})
    v = _variant(grid="sm:PER", grid_stride=True, defines=(("PER", "2"),), require=("PER <= 8",))
    limits = L.DeviceLimits()
    assert plan_launch(v, fam, problem).grid == (2 * limits.sm_count, 1, 1)
    assert plan_launch(v, fam, problem, overrides=(("PER", "3"),)).grid == (3 * limits.sm_count, 1, 1)
    with pytest.raises(SkipRow, match="PER <= 8"):
        plan_launch(v, fam, problem, overrides=(("PER", "16"),))


def test_a_define_that_names_the_tile_gets_the_tile_it_names():
    spec = catalog.family("copy")
    fam = load(spec.module)
    problem = fam.problem("4096", None, spec.default_dtype, {})
    v = _variant(tile=("4 * W", "1"), defines=(("W", "block_x"), ("TILE_X", "tile_x")))
    got = plan_launch(v, fam, problem)
    assert got.tile == (512, 1, 1) and dict(got.defines) == {"BLOCK_X": "128", "BLOCK_Y": "1", "BLOCK_Z": "1",
                                                             "TILE_Y": "1", "TILE_Z": "1", "W": "128", "TILE_X": "512"}


def test_a_family_variant_gets_the_launch_macros_an_add_kernel_gets():
    # a kernel written for --add (BLOCK_X, TILE_Y...) compiles as a family's variant too
    got = dict(_planned("matmul", "tiled", "4096").defines)
    assert {k: got[k] for k in LAUNCH} == {"BLOCK_X": "32", "BLOCK_Y": "32", "BLOCK_Z": "1", "TILE_X": "32",
                                           "TILE_Y": "32", "TILE_Z": "1"}


@pytest.mark.parametrize("grid, ok", [("sm:PER", True), ("sm:2 * PER", True), ("sm:4", True), ("sm:", False),
                                       ("sm:PER; rm", False)])
def test_family_toml_takes_an_sm_expression(tmp_path, grid, ok):
    from cudalab.catalog.family_toml import validated
    (tmp_path / "k.cu").write_text("")
    data = {"family": {"name": tmp_path.name}, "variant": [{"name": "k", "source": "k.cu", "kernel": "k", "grid": grid}]}
    if ok:
        assert validated(tmp_path, tmp_path / "family.toml", data).variants[0].grid == grid
    else:
        with pytest.raises(CudalabError, match="grid"):
            validated(tmp_path, tmp_path / "family.toml", data)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    SNAPSHOT.write_text(json.dumps(planned_launches(), indent=1, sort_keys=True) + "\n")
