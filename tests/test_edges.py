"""Extension edges (CPU): broken families beside good ones, a bad CUDALAB_SRC, empty or repeated
--variant lists; each a one-line error with exit 2, never 'No such command' or a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cudalab import catalog
from cudalab.worker import gpu
from cudalab.errors import CatalogError, UsageError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_gpu(monkeypatch):
    """Opening the GPU fails the test: what it guards must be refused before."""

    def opened(*_a, **_k):
        raise AssertionError("the GPU was opened before the bad input was refused")

    monkeypatch.setattr(gpu, "Device", opened)


# --- the kernel folder ------------------------------------------------------------------------------

def test_src_root_defaults_to_the_checkout_and_is_read_when_needed(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDALAB_SRC", raising=False)
    assert catalog.src_root() == ROOT / "cuda_src"
    assert catalog.SRC_ROOT == ROOT / "cuda_src"  # the old name still reads, evaluated now
    monkeypatch.setenv("CUDALAB_SRC", str(tmp_path))
    assert catalog.src_root() == tmp_path  # set after import, still honoured


def test_src_root_prefers_the_packaged_kernels(tmp_path, monkeypatch):
    """An installed cudalab (cudalab/kernels beside catalog.py) uses them, not a cuda_src nearby."""
    monkeypatch.delenv("CUDALAB_SRC", raising=False)
    monkeypatch.setattr(catalog, "PACKAGED_ROOT", tmp_path)
    assert catalog.src_root() == tmp_path
    monkeypatch.setattr(catalog, "PACKAGED_ROOT", tmp_path / "missing")
    monkeypatch.setattr(catalog, "CHECKOUT_ROOT", tmp_path / "missing-too")
    with pytest.raises(CatalogError, match="kernel folder not found.*CUDALAB_SRC"):
        catalog.src_root()


def _bad_src_values(tmp_path: Path) -> list[tuple[str, str]]:
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    shutil.copytree(ROOT / "cuda_src" / "copy", tmp_path / "one" / "copy")
    return [
        ("", "CUDALAB_SRC is set but empty"),
        ("   ", "CUDALAB_SRC is set but empty"),
        ("/nowhere/at/all", "CUDALAB_SRC=/nowhere/at/all: no such folder"),
        (str(tmp_path / "file.txt"), "is a file, not a folder of families"),
        (str(tmp_path / "empty"), "holds no family"),
        (str(tmp_path / "one" / "copy"), "it is one family's folder, point at its parent"),
    ]


@pytest.mark.parametrize("args", [
    ["list"], ["list", "transpose"], ["transpose"], ["transpose", "--n", "64", "--variant", "naive"],
    ["transpose", "--help"], ["compile", "transpose"], ["ncu", "transpose", "--import", __file__],
    ["sanitize", "transpose"],
], ids=lambda a: " ".join(Path(x).name for x in a))
def test_bad_cudalab_src_is_one_line(invoke, one_line_exit_2, args, tmp_path, monkeypatch, no_gpu):
    for value, fragment in _bad_src_values(tmp_path):
        monkeypatch.setenv("CUDALAB_SRC", value)
        one_line_exit_2(invoke(*args), fragment)


def test_help_still_works_with_a_bad_cudalab_src(invoke, monkeypatch):
    monkeypatch.setenv("CUDALAB_SRC", "/nowhere")
    res = invoke("--help")
    assert res.exit_code == 0 and "  list" in res.output and "  compile" in res.output


# --- broken families ----------------------------------------------------------------------------------

@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of cuda_src with gemm's family.toml broken and a family that has no module."""
    root = tmp_path / "cuda_src"
    shutil.copytree(ROOT / "cuda_src", root)
    (root / "gemm" / "family.toml").write_text("[family\n")
    shutil.copytree(root / "copy", root / "orphan")
    toml = root / "orphan" / "family.toml"
    toml.write_text(toml.read_text().replace('name = "copy"', 'name = "orphan"'))
    monkeypatch.setenv("CUDALAB_SRC", str(root))
    return root


def test_catalog_keeps_the_good_families_and_records_the_broken(tree):
    cat = catalog.load_catalog()
    assert "gemm" not in cat and "orphan" not in cat
    assert {"copy", "transpose", "reduce"} <= set(cat)
    assert [b.name for b in cat.broken] == ["gemm", "orphan"]
    (folder, reason), _ = cat.broken  # (folder, reason) pairs
    assert folder == tree / "gemm" and "family.toml" in reason and "\n" not in reason
    assert "no module cudalab.families.orphan" in cat.broken_reason("orphan")
    assert cat.broken_reason("copy") is None


def test_help_lists_a_broken_family_in_one_line_and_the_others_work(invoke, tree):
    res = invoke("--help")
    assert res.exit_code == 0, res.output
    assert "broken family gemm:" in res.output and "broken family orphan:" in res.output
    for name in ("copy", "transpose", "reduce", "matmul"):
        assert f"  {name} " in res.output
    res = invoke("copy", "--help")
    assert res.exit_code == 0 and "--variant" in res.output


@pytest.mark.parametrize("args", [["gemm"], ["gemm", "--n", "64"], ["gemm", "--help"], ["list", "gemm"],
                                  ["compile", "gemm"]], ids=" ".join)
def test_a_broken_family_command_gives_its_reason(invoke, one_line_exit_2, tree, args, no_gpu):
    one_line_exit_2(invoke(*args), "broken family gemm: ")


def test_missing_module_is_named(invoke, one_line_exit_2, tree, no_gpu):
    one_line_exit_2(invoke("orphan"), "no module cudalab.families.orphan")


def test_list_shows_the_good_families_and_a_line_per_broken_one(invoke, tree):
    res = invoke("list")
    assert res.exit_code == 2
    assert "transpose" in res.output and "copy" in res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("cudalab: ")]
    assert [ln.split(":")[1].strip() for ln in lines] == ["broken family gemm", "broken family orphan"]
    assert invoke("list", "copy").exit_code == 0


@pytest.mark.parametrize("text,fragment", [
    ('variant = 5\n[family]\nname = "copy"\n', "'variant' must be an array of tables"),
    ('family = "copy"\n', "'family' must be a table"),
    ('[family]\ndtypes = "float32"\n', "'dtypes' must be a non-empty list"),
    ('[family]\ndefault_dtype = "float64"\n', "default_dtype 'float64' is not one of"),
    ('[family]\nmodule = "../evil"\n', "must be a Python module name"),
    ('+[family]\nmodule = "nope"\n', "no module cudalab.families.nope"),  # +: into copy's own family.toml
], ids=lambda x: x[:20])
def test_wrong_shapes_make_one_family_broken_not_a_crash(tree, text, fragment):
    toml = tree / "copy" / "family.toml"
    toml.write_text(toml.read_text().replace("[family]\n", text[1:], 1) if text.startswith("+") else text)
    cat = catalog.load_catalog()
    assert fragment in (cat.broken_reason("copy") or ""), cat.broken
    assert "transpose" in cat


def test_the_module_check_imports_nothing_heavy():
    code = ("import sys; from cudalab import catalog; assert catalog.module_exists('transpose'); "
            "assert not catalog.module_exists('nope'); catalog.load_catalog(); "
            "print(sorted(m for m in ('numpy', 'cudalab.families', 'cudalab.families.transpose') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("CUDALAB_SRC", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# --- --variant ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("names,fragment", [
    ("", "names no variant"), (" , ", "names no variant"), (",", "names no variant"),
    ("naive,,block", "has an empty entry"), ("naive,naive", "names 'naive' twice"),
    ("naive, block ,naive", "names 'naive' twice"),
])
def test_select_refuses_empty_and_repeated_names(names, fragment):
    with pytest.raises(UsageError, match=fragment):
        catalog.family("transpose").select(names)


def test_select_none_and_all_mean_every_variant():
    spec = catalog.family("transpose")
    assert spec.select(None) == spec.select("all") == spec.select(" all ") == list(spec.variants)
    assert [v.name for v in spec.select(" block,naive ")] == ["block", "naive"]


@pytest.mark.parametrize("value,fragment", [("", "names no variant"), (" , ", "names no variant"),
                                            ("naive,naive", "names 'naive' twice")])
@pytest.mark.parametrize("command", [["transpose"], ["compile", "transpose"], ["sanitize", "transpose"]], ids=" ".join)
def test_variant_option_refuses_empty_and_repeated(invoke, one_line_exit_2, command, value, fragment, no_gpu):
    one_line_exit_2(invoke(*command, "--variant", value, *(["--n", "64"] if command == ["transpose"] else [])),
                           fragment)
