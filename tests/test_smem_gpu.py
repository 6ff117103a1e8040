"""smem-square and smem-rect on a real GPU: every variant's out against the NumPy model of its index
math (out poisoned before the verified launch), one block and many, every padding."""

from __future__ import annotations

from cudalab import plan as planning
import pytest
from gpu_util import assert_all_passed, run_rows

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("blocks", [1, 7, 4096])
def test_square(device, blocks):
    rows = run_rows(device, "smem-square", options=(("blocks", blocks),))
    assert_all_passed(rows)
    assert len(rows) == 6
    assert rows["row-col"].grid == f"{blocks}" and rows["row-col"].block == "32x32"
    assert rows["row-col"].extra["smem_expect"] == "32/1"


@pytest.mark.parametrize("ipad", [0, 1, 2, 3])
@pytest.mark.parametrize("blocks", [1, 1000])
def test_rect(device, ipad, blocks):
    rows = run_rows(device, "smem-rect", options=(("blocks", blocks), ("ipad", ipad)))
    assert_all_passed(rows)
    assert rows["row-col-dyn-pad"].shared == (32 + ipad) * 16 * 4
    assert rows["row-col-pad"].extra["smem_expect"] == {0: "16/1", 1: "2/1", 2: "1/1", 3: "2/1"}[ipad]


def test_n_is_the_number_of_blocks(device):
    rows = run_rows(device, "smem-square", n="3", variants="row-col-dyn-pad")
    assert_all_passed(rows)
    assert rows["row-col-dyn-pad"].grid == "3"


def test_profile_mode_verifies_without_timing(device):
    from gpu_util import FAST

    from cudalab.worker import executor as runner

    req = planning.RunRequest(family="smem-rect", roofline=False, protocol=FAST, profile=True)
    rows = runner.FamilyRun(planning.precheck(req), device).run()
    assert all(r.status == runner.PASSED and r.stats is None for r in rows)
