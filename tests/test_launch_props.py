"""Property tests over the pure launch arithmetic (launch.py and planning.plan_launch)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cudalab import plan as planning
from cudalab import launch as L
from cudalab.catalog import VariantSpec
from cudalab.errors import LaunchConfigError, SizeError, UsageError
from cudalab.families import Family, Size

dim = st.integers(min_value=1, max_value=40)
dims3 = st.tuples(dim, st.integers(1, 12), st.integers(1, 4))


def cover_counts(extent: L.Dim3, block: L.Dim3, per_thread: L.Dim3, grid: L.Dim3) -> np.ndarray:
    """How often each element is touched by the usual index mapping, with bounds checks:
    x = bx*tile_x + k*block_x + tx for k in range(per_thread_x) (the same along y and z)."""
    counts = np.zeros(extent[::-1], dtype=np.int64)  # z, y, x
    idx = []
    for axis in range(3):
        tile = block[axis] * per_thread[axis]
        b = np.arange(grid[axis])[:, None, None]
        k = np.arange(per_thread[axis])[None, :, None]
        t = np.arange(block[axis])[None, None, :]
        coords = (b * tile + k * block[axis] + t).ravel()
        idx.append(coords[coords < extent[axis]])  # the kernel's bounds check
    x, y, z = idx
    np.add.at(counts, np.ix_(z, y, x), 1)
    return counts


@settings(max_examples=300, deadline=None)
@given(extent=dims3, block=st.tuples(st.integers(1, 9), st.integers(1, 5), st.integers(1, 3)),
       per_thread=st.tuples(st.integers(1, 4), st.integers(1, 3), st.just(1)))
def test_grid_for_tiles_covers_every_element_exactly_once(extent, block, per_thread):
    tile = L.tile_of(block, per_thread)
    grid = L.grid_for_tiles(extent, tile)
    assert (cover_counts(extent, block, per_thread, grid) == 1).all()
    # and no block is wasted: one block fewer along any axis leaves elements uncovered
    for axis in range(3):
        assert (grid[axis] - 1) * tile[axis] < extent[axis]


@given(extent=dims3, tile=dims3, grid=dims3)
def test_check_covers_refuses_exactly_the_grids_that_leave_elements_uncovered(extent, tile, grid):
    covered = all(g * t >= e for g, t, e in zip(grid, tile, extent))
    counts = cover_counts(extent, tile, (1, 1, 1), grid)
    assert covered == bool((counts >= 1).all())
    if covered:
        L.check_covers(grid, tile, extent, grid_stride=False)
    else:
        with pytest.raises(LaunchConfigError) as exc:
            L.check_covers(grid, tile, extent, grid_stride=False)
        assert exc.value.limit == "coverage"
    L.check_covers(grid, tile, extent, grid_stride=True)  # a grid-stride kernel takes any grid


@given(st.lists(st.integers(1, 4096), min_size=1, max_size=3))
def test_parse_dims_fmt_dims_round_trip(parts):
    d = L.parse_dims("x".join(map(str, parts)))
    assert len(d) == 3 and list(d[:len(parts)]) == parts and all(v == 1 for v in d[len(parts):])
    assert L.parse_dims(L.fmt_dims(d)) == d
    assert L.threads(d) == math.prod(parts)


@given(st.tuples(st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 4096)))
def test_fmt_dims_drops_only_trailing_ones(d):
    text = L.fmt_dims(d)
    assert L.parse_dims(text) == d
    assert not text.endswith("x1") or text == "1"


@given(st.text(alphabet="0123456789x-. ak", max_size=10))
def test_parse_dims_never_crashes(text):
    try:
        d = L.parse_dims(text)
    except UsageError:
        return
    assert all(v >= 1 for v in d)


@given(st.integers(1, 10**6), st.sampled_from(["", "k", "K", "m", "M", "g"]))
def test_parse_size_suffixes(n, suffix):
    mult = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[suffix.lower()]
    assert L.parse_size(f"{n}{suffix}") == n * mult


@given(st.integers(2, 10), st.integers(0, 30))
def test_parse_size_powers(base, exp):
    assume(base**exp > 0)
    assert L.parse_size(f"{base}^{exp}") == base**exp


@given(st.integers(-10**6, 0))
def test_parse_size_refuses_zero_and_negative(n):
    with pytest.raises(UsageError, match="must be positive"):
        L.parse_size(str(n))


@given(st.text(max_size=8))
def test_parse_size_never_crashes(text):
    try:
        assert L.parse_size(text) > 0
    except UsageError:
        pass


# --- plan_launch over a synthetic family module ------------------------------------------------

class Flat(Family):
    """A minimal family: a 2-D extent (cols, rows); every other hook is the contract's default."""

    def extent(self, problem, variant):
        return (problem.dims[1], problem.dims[0], 1)


FlatModule = Flat()


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 300), cols=st.integers(1, 300),
       block=st.tuples(st.sampled_from([1, 2, 8, 16, 32, 64]), st.sampled_from([1, 2, 4, 8, 16])),
       per_thread=st.tuples(st.integers(1, 4), st.integers(1, 4)), divisible=st.booleans())
def test_plan_launch_grid_covers_or_refuses(rows, cols, block, per_thread, divisible):
    v = VariantSpec(name="v", source="x.cu", kernel="k", block=(block[0], block[1], 1),
                    per_thread=(per_thread[0], per_thread[1], 1), divisible=divisible)
    problem = Size(dims=(rows, cols), dtype="float32")
    tile = (block[0] * per_thread[0], block[1] * per_thread[1], 1)
    fits = cols % tile[0] == 0 and rows % tile[1] == 0
    try:
        lau = planning.plan_launch(v, FlatModule, problem, None, None, L.DeviceLimits())
    except SizeError as exc:
        assert divisible and not fits
        assert "multiples of its tile" in str(exc)
        return
    assert not divisible or fits
    assert lau.tile == tile
    assert (cover_counts((cols, rows, 1), lau.block, v.per_thread, lau.grid) == 1).all()


@given(rows=st.integers(1, 5000), cols=st.integers(1, 5000), gx=st.integers(1, 200), gy=st.integers(1, 200))
def test_plan_launch_grid_override_is_checked(rows, cols, gx, gy):
    v = VariantSpec(name="v", source="x.cu", kernel="k", block=(32, 8, 1))
    problem = Size(dims=(rows, cols), dtype="float32")
    ok = gx * 32 >= cols and gy * 8 >= rows
    try:
        lau = planning.plan_launch(v, FlatModule, problem, None, f"{gx}x{gy}", L.DeviceLimits())
    except LaunchConfigError:
        assert not ok
        return
    assert ok and lau.grid == (gx, gy, 1)


@given(block=st.tuples(st.integers(1, 2048), st.integers(1, 2048), st.integers(1, 128)))
def test_check_launch_refuses_exactly_the_blocks_over_the_limits(block):
    lim = L.DeviceLimits()
    ok = L.threads(block) <= lim.max_threads_per_block and all(b <= m for b, m in zip(block, lim.max_block))
    try:
        L.check_launch(block, (1, 1, 1), 0, lim)
    except LaunchConfigError as exc:
        assert not ok and exc.limit
        return
    assert ok
