"""A problem's whole contract is checked when its family loads: a mistake is one line naming the file and
the field at ``cudalab list`` (and every command), not a table that looks right or a row failing minutes
into a run; a 2-D problem says what its grid covers, and ``cudalab list FAMILY`` shows the launches."""

from __future__ import annotations

import pytest

from test_problem import MODULE, make_family

ROW = 'lambda s, i: 2 * i["x"]'


def module(**edits: str) -> str:
    """The test problem's module with ``old=new`` text replacements."""
    text = MODULE.format(reference=ROW, check="'exact'", work="lambda s: Work(bytes=8 * s.n)")
    for old, new in edits.items():
        assert old.replace("_", " ") in text or old in text, old
        text = text.replace(old, new)
    return text


BAD = {  # what is wrong -> (module text, family.toml rows added, the line's fragment)
    "unknown check": (MODULE.format(reference=ROW, check="'close'", work="lambda s: Work(bytes=8 * s.n)"), "",
                      "check='close' is not a check"),
    "negative tolerance": (MODULE.format(reference=ROW, check="Tolerance(rtol=-1)", work="lambda s: Work(bytes=8 * s.n)"),
                           "", "check=Tolerance(rtol=-1): rtol must be a number >= 0"),
    "args names nothing": (MODULE.format(reference=ROW, check="'exact'", work="lambda s: Work(bytes=8 * s.n)").replace(
        '"y", "x", "n"', '"y", "x", "count"'), "", "args names 'count', which is no input (x)"),
    "args twice": (MODULE.format(reference=ROW, check="'exact'", work="lambda s: Work(bytes=8 * s.n)").replace(
        '"y", "x", "n"', '"y", "x", "x"'), "", "args names 'x' twice"),
    "bad dtype": (MODULE.format(reference=ROW, check="'exact'", work="lambda s: Work(bytes=8 * s.n)").replace(
        'Output("y", lambda s: (s.n,))', 'Output("y", lambda s: (s.n,), "float33")'), "",
        "outputs 'y' dtype 'float33' is not a NumPy dtype name"),
    "shared names nothing": (None, '\n[[variant]]\nname = "sh"\nsource = "k.cu"\nkernel = "dbl_good"\nshared = "elems * 4"\n',
                             "row 'sh': shared = 'elems * 4' names 'elems', which the launch does not know"),
    "tile names nothing": (None, '\n[[variant]]\nname = "tl"\nsource = "k.cu"\nkernel = "dbl_good"\ntile = ["blockx"]\n',
                           "row 'tl': tile = 'blockx' names 'blockx'"),
    "require names nothing": (None, '\n[[variant]]\nname = "rq"\nsource = "k.cu"\nkernel = "dbl_good"\n'
                                    'require = ["block_x % wrap == 0"]\n', "require = 'block_x % wrap == 0' names 'wrap'"),
    "library row without Library": (None, '\n[[variant]]\nname = "cublas"\nkind = "library"\n',
                                    "row 'cublas' is kind = \"library\", and libraries= has no Library('cublas', fn)"),
}


@pytest.fixture
def path(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_PATH", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("what", sorted(BAD))
def test_a_contract_mistake_is_one_line_naming_file_and_field_at_load(path, invoke, one_line_exit_2, what):
    text, more, fragment = BAD[what]
    make_family(path, name="good")
    folder = make_family(path, more=more, module=text)
    for args in (["list", "dbl"], ["compile", "dbl"], ["dbl", "--n", "64"]):
        one_line_exit_2(invoke(*args), f"{folder / 'dbl.py'}: ")
        one_line_exit_2(invoke(*args), fragment)
    res = invoke("list")
    assert res.exit_code == 2 and f"broken family dbl: {folder / 'dbl.py'}" in res.output and fragment in res.output
    assert "good " in res.output and "transpose" in res.output  # the others still list


TWO_D = '''\
import numpy as np
from cudalab import Output, Problem, Work

PROBLEM = Problem(
    dims=("rows", "cols"), default=(4096, 1024),
    inputs=lambda s, rng: {{"x": rng.standard_normal((s.rows, s.cols), dtype=np.float32)}},
    outputs=(Output("y", lambda s: (s.rows,)),),
    args=("y", "x", "rows", "cols"),
    reference=lambda s, i: i["x"].astype(np.float64).sum(axis=1),
    check=1e-4,
    work=lambda s: Work(bytes=4 * s.rows * s.cols + 4 * s.rows),
    {extent}
)
'''


def test_a_2d_problem_without_extent_is_refused_saying_what_to_write(path, invoke, one_line_exit_2):
    folder = make_family(path, module=TWO_D.format(extent=""))
    one_line_exit_2(invoke("list", "dbl"), f"{folder / 'dbl.py'}: a 2-D problem needs extent=")
    res = invoke("list", "dbl")
    assert "extent=lambda s, v: (s.cols, s.rows) for a thread an element" in res.output
    assert "extent=lambda s, v: (s.rows,) for a thread a rows entry" in res.output


def test_list_family_shows_the_planned_grid_of_each_row_at_the_default_size_without_a_gpu(path, invoke, no_gpu):
    make_family(path, module=TWO_D.format(extent="extent=lambda s, v: (s.rows,),"))
    res = invoke("list", "dbl")
    assert res.exit_code == 0, res.output
    assert "Launches at the default size 4096x1024 float32:" in res.output
    assert "good  grid 4096 × block 1 = 4,096 threads over extent 4096" in res.output  # a thread a row
