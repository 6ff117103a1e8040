"""A family's launch rules hold wherever a grid is written (issue 57, round four's regression): ``sm:K`` is at
least one block an SM, whether K is a number, a constant expression, an expression over the launch's names
(checked when the point is planned) or an ``--add`` kernel's."""

from __future__ import annotations

import os

import pytest


def _variant(tree, grid: str, extra: str = "") -> None:
    toml = tree / "copy" / "family.toml"
    toml.write_text(toml.read_text() + f'\n[[variant]]\nname = "bad"\nsource = "copy.cu"\nkernel = "copy_vec4"\n'
                                       f'block = "256"\ngrid = "{grid}"\n{extra}')


@pytest.mark.parametrize("grid", ["sm:-1", "sm:0", "sm:(1 - 2)", "sm:-4 * 2"])
def test_a_family_toml_grid_of_fewer_than_one_block_an_sm_is_refused(invoke, family_tree, grid):
    tree = family_tree("copy")
    _variant(tree, grid)
    res = invoke(["list"])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "K blocks an SM must be at least 1" in res.output


def test_an_sm_grid_over_the_defines_is_refused_when_planned(invoke, family_tree, one_line_exit_2, no_gpu):
    tree = family_tree("copy")
    _variant(tree, "sm:K - 3", 'defines = { K = "2" }\n')
    one_line_exit_2(invoke(["copy", "--variant", "bad", "--n", "1k"]), "K blocks an SM must be at least 1 (got -1)")


@pytest.mark.parametrize("grid", ["sm:0", "sm:00"])
def test_an_added_kernels_sm_grid_below_one_is_refused(invoke, one_line_exit_2, tmp_path, grid, no_gpu):
    cu = tmp_path / "k.cu"
    cu.write_text('extern "C" __global__ void k(float *a) {}\n')
    one_line_exit_2(invoke(["copy", "--variant", "none", "--add", f"{cu}:k@grid={grid}"]), "grid=")


def test_many_missing_family_path_folders_are_one_line(invoke, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_PATH", os.pathsep.join(str(tmp_path / f"gone{i}") for i in range(199)))
    res = invoke(["list"])
    said = [x for x in res.output.splitlines() if "not found" in x]
    assert res.exit_code == 2 and len(said) == 1 and "and 196 more" in said[0], res.output


@pytest.mark.parametrize("kind", ["fifo", "devzero", "dangling"])
def test_a_family_toml_that_is_no_file_is_a_broken_family_said_so(invoke, tmp_path, monkeypatch, kind):
    fam = tmp_path / "fams" / "odd"
    fam.mkdir(parents=True)
    toml = fam / "family.toml"
    if kind == "fifo":
        os.mkfifo(toml)
    elif kind == "devzero":
        toml.symlink_to("/dev/zero")
    else:
        toml.symlink_to(tmp_path / "nowhere.toml")
    monkeypatch.setenv("CUDALAB_PATH", str(tmp_path / "fams"))
    res = invoke(["list"])
    assert res.exit_code == 2 and "broken family odd" in res.output and "Traceback" not in res.output, res.output
