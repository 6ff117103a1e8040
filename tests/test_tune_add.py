"""``cudalab tune FAMILY --add FILE.cu:KERNEL@...``: your own kernel as the search space (issue 56), on the CPU
with fake GPU workers: every way a configuration can fail is one infeasible trial, bad input is one line before
any build, the winner's rerun line is a plain ``cudalab FAMILY --add`` run, and a changed kernel starts afresh."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

import cudalab
from cudalab.catalog import user
from cudalab.errors import UsageError

pytest.importorskip("optuna")

SGEMM = Path(__file__).parents[1] / "docs" / "examples" / "tune" / "my_sgemm.cu"
TILE = "tile=block_x*TX x block_y*TY"


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "my_sgemm.cu"
    dst.write_text(SGEMM.read_text())
    return dst


def tune(src: Path, db: Path, add: str = TILE, **kw):
    args = dict(n="256", block="16x8", defines={"TX": "1,2,4,8", "TY": "1,2"}, strategy="grid", build_ahead=0,
                race=0, seed=1, storage=f"sqlite:///{db}", timeout=3)
    args.update(kw)
    return cudalab.tune("matmul", add=f"{src}:my_sgemm@{add}", **args)


def test_every_way_a_configuration_fails_is_one_infeasible_trial_and_the_rest_goes_on(fake_workers, tmp_path):
    # TY=1's grid (128 rows of tiles block_y*TY = 8 high) covers 1024 of 256..: refused before any build at
    # n=2048; here at 256 the y grid of 16 covers 16*8 = 128 < 256 rows for TY=1 and 256 for TY=2
    src = _copy(tmp_path)
    fake_workers({"_ms": "1 + 1 / TX", "+my_sgemm#TX=2": "die", "+my_sgemm#TX=4": "incorrect",
                  "+my_sgemm#TX=8": "hang"})
    res = tune(src, tmp_path / "a.db", add=f"{TILE},grid=extent_x/(block_x*TX) x 16")
    by = {(m.point["TX"], m.point["TY"]): m for m in res.trials}
    assert all(by[(tx, "1")].status == "refused" and "covers" in by[(tx, "1")].reason for tx in "1248")
    assert by[("1", "2")].status == "passed", [(m.point, m.status, m.reason) for m in res.trials]
    assert by[("2", "2")].status == "failed" and "died" in by[("2", "2")].reason
    assert by[("4", "2")].status == "incorrect"
    assert by[("8", "2")].status == "timeout"
    assert res.winner == "TX=1 TY=2 block=16x8" or res.winner.startswith("TX=1 TY=2")
    # the winner's rerun is a plain family run of the user's kernel with the tuned defines in its --add
    argv = shlex.split(res.command)
    assert argv[:2] == ["cudalab", "matmul"] and "--variant" not in argv
    add = argv[argv.index("--add") + 1]
    assert add.startswith(f"{src}:my_sgemm@") and "-DTX=1" in add and "-DTY=2" in add
    assert user.parse_add(add).tile == ("block_x*TX", "block_y*TY")  # the text parses back as it was given


def test_a_campaign_resumes_and_a_changed_kernel_starts_afresh(fake_workers, tmp_path):
    src, db = _copy(tmp_path), tmp_path / "b.db"
    rows = tmp_path / "rows.log"
    fake_workers({"_ms": "1 + 1 / TX"})
    import os

    os.environ["FAKE_WORKER_ROWS"] = str(rows)
    try:
        first = tune(src, db, trials=3)
        assert len(first.trials) == 3
        again = tune(src, db)  # the same command continues: the 3 measured are not run again
        assert len([m for m in again.trials if m.status == "passed"]) == 8
        assert rows.read_text().split().count("+my_sgemm") == 8
        src.write_text(src.read_text() + "\n// fixed\n")  # the kernel changed: its old trials measured another build
        fresh = tune(src, db, trials=2)
        assert fresh.name != again.name and fresh.name.startswith(again.name + "@")
        assert len(fresh.trials) == 2
    finally:
        del os.environ["FAKE_WORKER_ROWS"]


@pytest.mark.parametrize("add, kw, fragment", [
    (f"{TILE.replace('TX', 'TZ', 1)}", {}, "names 'TZ'"),                        # an unknown parameter
    ("tile=block_x*TX/64 x block_y*TY", {}, "is 0x8 at"),                         # a tile of 0
    (TILE, {"require": ["TX > 8"]}, "the space is empty"),                        # emptied by the constraints
    ("tile=block_x*TX x", {}, "tile="),                                           # a tile that is no expression
])
def test_bad_input_is_one_line_before_any_build(tmp_path, monkeypatch, add, kw, fragment):
    from cudalab import build

    monkeypatch.setattr(build, "build", lambda *a, **k: pytest.fail("a build ran before the input was checked"))
    with pytest.raises(UsageError) as exc:
        tune(_copy(tmp_path), tmp_path / "c.db", add=add, **kw)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_a_kernel_not_in_the_file_is_one_line_exit_2_before_any_build(tmp_path, invoke):
    src = _copy(tmp_path)
    res = invoke(["tune", "matmul", "--add", f"{src}:my_sgem", "-D", "TX=1,2"])
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [f"cudalab: --add '{src}:my_sgem': {src} has no kernel my_sgem "
                                               "(its kernels: my_sgemm)"]


def test_variant_and_add_together_is_refused(tmp_path, invoke):
    res = invoke(["tune", "matmul", "--variant", "tiled", "--add", f"{_copy(tmp_path)}:my_sgemm", "-D", "TX=1,2"])
    assert res.exit_code == 2 and "a campaign tunes one kernel" in res.output


def test_a_family_variant_and_an_add_kernel_compile_with_the_same_launch_macros(tmp_path):
    # the trap: a kernel written for --add (BLOCK_X, BLOCK_Y) failed to compile as a family variant
    from cudalab import catalog
    from cudalab.families import load
    from cudalab.plan import plan_launch

    spec = catalog.family("matmul")
    fam = load(spec.module)
    problem = fam.problem("256", None, "float32", {})
    own = user.variants((user.parse_add(f"{_copy(tmp_path)}:my_sgemm@block=16x8,{TILE},-DTX=2,-DTY=2"),), spec)[0]
    builtin = spec.variant("tiled")
    macros = {k for k, _ in user.LAUNCH_DEFINES}
    for v in (own, builtin):
        got = dict(plan_launch(v, fam, problem).defines)
        assert macros <= set(got), v.name
    assert dict(plan_launch(own, fam, problem).defines)["TILE_X"] == "32"  # block_x * TX
