"""The build ships the kernels (fast checks of pyproject.toml; .ci/run builds and runs the real wheel)."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_the_kernel_folder_ships_as_cudalab_kernels():
    assert SETUPTOOLS["package-dir"] == {"cudalab.kernels": "cuda_src"}
    assert "cudalab.kernels" in SETUPTOOLS["packages"]


def test_package_data_covers_every_kernel_file():
    """Every file of a family folder matches a package-data pattern, so none is left out of the wheel."""
    patterns = SETUPTOOLS["package-data"]["cudalab.kernels"]
    src = ROOT / "cuda_src"
    shipped = {p for pattern in patterns for p in src.glob(pattern) if p.is_file()}
    tracked = subprocess.run(["git", "ls-files", "cuda_src"], cwd=ROOT, capture_output=True, text=True)
    every = ({ROOT / line for line in tracked.stdout.split()} if tracked.returncode == 0 and tracked.stdout
             else {p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts})
    missing = sorted(str(p.relative_to(src)) for p in every - shipped)
    assert not missing, f"add a package-data pattern in pyproject.toml for {missing}"


def test_every_subpackage_is_listed():
    """The package list is explicit (a mapped package cannot be mixed with 'find'): a new
    subpackage of cudalab must be added there, or the wheel would lack it."""
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "cudalab").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    missing = sorted(found - set(SETUPTOOLS["packages"]))
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"


def test_every_kernel_folder_python_could_import_is_listed():
    """setuptools prints ~35 lines of warning for each folder under a package that Python could import as one
    and that ``packages`` does not name (about 370 lines on every install): each is named."""
    folders = {d.name for d in (ROOT / "cuda_src").iterdir() if d.is_dir() and d.name.isidentifier()
               and d.name != "__pycache__"}
    listed = {p.removeprefix("cudalab.kernels.") for p in SETUPTOOLS["packages"] if p.startswith("cudalab.kernels.")}
    assert folders == listed, f"name in pyproject.toml's packages: {sorted(folders - listed)}"
