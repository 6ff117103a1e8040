"""Families from outside the package: CUDALAB_PATH / --family-path folders, where each comes from, and
a user's broken family (import error, bad family.toml, missing kernel, a built-in's name) as one line
while the others still work."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import cudalab
from cudalab import catalog
from cudalab.catalog import discovery
from test_problem import make_family

EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.fixture
def path(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_PATH", str(tmp_path))
    return tmp_path


def test_list_shows_where_each_family_comes_from(path, invoke):
    make_family(path)
    res = invoke("list")
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.strip().startswith("dbl "))
    assert str(path) in line
    assert "built-in" in next(x for x in res.output.splitlines() if x.strip().startswith("copy "))


def test_family_path_option_reaches_children_through_the_environment(tmp_path, monkeypatch, invoke):
    monkeypatch.setenv("CUDALAB_PATH", "")  # recorded, so the option's own setting is undone after the test
    make_family(tmp_path / "mine")
    res = invoke("--family-path", str(tmp_path / "mine"), "list", "dbl")
    assert res.exit_code == 0, res.output
    assert "void KERNEL(float *y," in res.output
    assert os.environ["CUDALAB_PATH"].split(os.pathsep)[0] == str(tmp_path / "mine")


def test_split_global_takes_family_paths_before_the_command():
    paths, rest = discovery.split_global(["--family-path", "a", "--family-path=b", "--debug", "scan", "--n", "4",
                                          "--family-path", "c"])
    assert paths == ["a", "b"] and rest == ["--debug", "scan", "--n", "4", "--family-path", "c"]


def test_a_folder_that_is_one_family_is_that_family(tmp_path, monkeypatch):
    folder = make_family(tmp_path)
    monkeypatch.setenv("CUDALAB_PATH", str(folder))
    assert catalog.load_catalog().origin("dbl") == str(folder)


def _broken_one_line(invoke, one_line_exit_2, name: str, fragment: str) -> None:
    """The broken family's command is one line, exit 2; list names it and still lists the others."""
    one_line_exit_2(invoke(name, "--n", "64"), fragment)
    res = invoke("list")
    assert res.exit_code == 2
    assert f"broken family {name}: " in res.output and "transpose" in res.output and "good" in res.output


@pytest.mark.parametrize("module, fragment", [
    ("import numpy\nx = 1\nraise RuntimeError('boom')\n", "bad.py:3: importing it raised RuntimeError: boom"),
    ("def f(:\n", "bad.py:1: SyntaxError"),
    ("X = 1\n", "defines no PROBLEM"),
    ("PROBLEM = 3\n", "PROBLEM is a int"),
    # what no in-process try survives: each is one line, the command and the other families go on
    ("import sys\nsys.exit(0)\n", "bad.py:2: importing it raised SystemExit (sys.exit at import)"),
    ("raise KeyboardInterrupt\n", "bad.py:1: importing it raised KeyboardInterrupt"),
    ("import os\nos._exit(3)\n", "bad.py: importing it ended the process (exit code 3"),
    ("while True:\n    pass\n", "bad.py: importing it did not finish within 3 s"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", "bad.py: importing it killed the process (SIGSEGV)"),
    ("class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise E()\n",
     "bad.py:4: importing it raised E: (its message could not be shown"),
])
def test_a_module_that_fails_is_one_line_naming_its_file(path, invoke, one_line_exit_2, module, fragment, monkeypatch):
    monkeypatch.setenv("CUDALAB_IMPORT_TIMEOUT", "3")
    make_family(path, name="good")
    make_family(path, name="bad", module=module)
    _broken_one_line(invoke, one_line_exit_2, "bad", fragment)
    assert invoke("compile", "good", "--variant", "nothing").exit_code == 2  # good still resolves (bad variant)
    assert cudalab.family("good").name == "good"


def test_a_kernel_missing_from_its_source_is_broken(path, invoke, one_line_exit_2):
    make_family(path, name="good")
    folder = make_family(path, name="bad")
    (folder / "k.cu").write_text('extern "C" __global__ void dbl_good(float *y) {}\n')
    _broken_one_line(invoke, one_line_exit_2, "bad", "kernel 'dbl_bad' is not defined in k.cu")


def test_a_bad_family_toml_is_broken_naming_the_file_and_line(path, invoke, one_line_exit_2):
    make_family(path, name="good")
    folder = make_family(path, name="bad")
    (folder / "family.toml").write_text("[family]\nname = 'bad'\nmetric = = 3\n")
    _broken_one_line(invoke, one_line_exit_2, "bad", f"{folder / 'family.toml'}: ")
    assert "line 3" in invoke("bad").output


def test_a_missing_module_file_is_broken(path, invoke, one_line_exit_2):
    make_family(path, name="good")
    folder = make_family(path, name="bad")
    (folder / "bad.py").unlink()
    _broken_one_line(invoke, one_line_exit_2, "bad", "no module bad.py beside it")


def test_a_built_in_name_is_refused_and_the_built_in_stays(path, invoke, one_line_exit_2):
    make_family(path, name="good")
    make_family(path, name="copy")
    cat = catalog.load_catalog()
    assert cat.origin("copy") == "built-in" and "a built-in family's" in cat.broken_reason("copy")
    res = invoke("list")
    assert res.exit_code == 2 and "broken family copy: " in res.output


def test_a_missing_path_folder_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_PATH", os.pathsep.join([str(tmp_path / "nope"), str(EXAMPLES)]))
    cat = catalog.load_catalog()
    assert "softmax" in cat and "not found" in cat.broken_reason("nope")


def test_entry_points_are_families(tmp_path, monkeypatch):
    pkg = tmp_path / "site" / "mypkg"
    make_family(tmp_path / "site", name="mypkg")  # the package folder holds family.toml and kernels
    (pkg / "__init__.py").write_text((pkg / "mypkg.py").read_text())
    dist = tmp_path / "site" / "mypkg-1.0.dist-info"  # installed as pip would: its metadata declares the entry point
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mypkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{discovery.GROUP}]\nmypkg = mypkg\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delenv("CUDALAB_PATH", raising=False)
    assert discovery._may_declare(discovery.GROUP)
    discovery.entry_point_values.cache_clear()
    try:
        cat = catalog.load_catalog()
    finally:
        discovery.entry_point_values.cache_clear()
    assert cat.origin("mypkg") == "entry point mypkg"
    assert cudalab.families.load(cat["mypkg"].module).SIGNATURE.startswith("void KERNEL(")


def test_entry_points_are_not_looked_up_where_no_package_declares_the_group(tmp_path, monkeypatch):
    # importlib.metadata costs a command 20-40 ms: it is skipped where no entry_points.txt names the group
    site = tmp_path / "site"
    (site / "other-1.0.dist-info").mkdir(parents=True)
    (site / "other-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\nother = other:main\n")
    monkeypatch.setattr(sys, "path", [str(site), str(tmp_path / "missing")])
    import importlib.machinery

    # Only the path's finder: a package imported by an earlier test in this process (Dask's) may have added
    # a finder of distributions, which rightly makes discovery ask importlib.metadata.
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not hasattr(f, "find_distributions")
                                           or f is importlib.machinery.PathFinder])
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: pytest.fail("importlib.metadata was asked"))
    discovery.entry_point_values.cache_clear()
    try:
        assert discovery.entry_point_values() == ()
        (site / "other-1.0.dist-info" / "entry_points.txt").write_text(f"[{discovery.GROUP}]\nx = x\n")
        assert discovery._may_declare(discovery.GROUP)
        (site / "other-1.0.dist-info" / "entry_points.txt").unlink()
        (tmp_path / "a.zip").write_bytes(b"")  # a zip on the path is read another way: ask importlib.metadata
        sys.path.append(str(tmp_path / "a.zip"))
        assert discovery._may_declare(discovery.GROUP)
    finally:
        discovery.entry_point_values.cache_clear()


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["softmax", "scan", "histogram", "rowsum"])
def test_the_examples_compile_without_a_gpu(name, monkeypatch, invoke, no_gpu):
    monkeypatch.setenv("CUDALAB_PATH", str(EXAMPLES))
    res = invoke("compile", name)
    assert res.exit_code == 0, res.output
    assert "wrong" in res.output


def test_examples_copy_runs_as_a_new_users_folder(tmp_path, monkeypatch, invoke):
    shutil.copytree(EXAMPLES / "scan", tmp_path / "scan")
    monkeypatch.setenv("CUDALAB_PATH", str(tmp_path))
    res = invoke("list", "scan")
    assert res.exit_code == 0 and "unsigned long long *status" in res.output
