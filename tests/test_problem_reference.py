"""docs/problem-reference.md: its complete 2-D example is examples/rowsum as it is (the doc cannot drift
from the files), and that problem loads, lists its launches without a GPU (a thread a row: rows threads,
not rows x cols), and its reference is NumPy's row sum; the README links the page."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cudalab

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "problem-reference.md"
ROWSUM = ROOT / "examples" / "rowsum"


@pytest.mark.parametrize("name", ["family.toml", "rowsum.py", "rowsum.cu"])
def test_the_docs_example_is_the_example_folder_verbatim(name):
    assert (ROWSUM / name).read_text() in DOC.read_text()


def test_the_readme_links_the_reference_and_every_simple_field_is_documented():
    assert "(docs/problem-reference.md)" in (ROOT / "README.md").read_text()
    doc = DOC.read_text()
    for field in ("dims", "default", "inputs", "outputs", "reference", "args", "work", "check", "extent", "scratch",
                  "scalars", "options", "libraries", "validate", "size_help", "input_dtypes", "dtypes", "launch",
                  "kernels", "Output(", "Scratch(", "Scalar(", "Option(", "Tolerance(", "Library(", "Work(", "Kernel("):
        assert f"`{field}" in doc, field
    for field in cudalab.Problem.__dataclass_fields__:  # a field added later is documented too
        assert f"`{field}`" in doc, field


def test_rowsum_lists_its_launches_a_thread_a_row_without_a_gpu(monkeypatch, invoke, no_gpu):
    monkeypatch.setenv("CUDALAB_PATH", str(ROOT / "examples"))
    res = invoke("list", "rowsum")
    assert res.exit_code == 0, res.output
    assert "Launches at the default size 16384x1024 float32:" in res.output
    assert "thread-a-row      grid 64 × block 256 = 16,384 threads over extent 16384" in res.output
    assert "warp-a-row        grid 1x2048 × block 32x8 = 524,288 threads over extent 32x16384" in res.output
    res = invoke("rowsum", "--shape", "4x2000000")
    assert res.exit_code == 2 and "cols up to 1,118,481" in res.output


def test_rowsum_reference_is_numpys_row_sum_and_exact(monkeypatch):
    monkeypatch.setenv("CUDALAB_PATH", str(ROOT / "examples"))
    spec = cudalab.family("rowsum")
    fam = cudalab.families.load(spec.module)
    prob = fam.problem(None, "5x33", "float32", {})
    x = fam.make_inputs(prob, np.random.default_rng(2))["x"]
    ref = fam.reference(prob, {"x": x})
    assert ref.shape == (5,) and np.array_equal(ref, x.astype(np.float64).sum(axis=1))
    assert np.array_equal(ref, x.sum(axis=1, dtype=np.float32))  # exact in float32 too: the check can be "exact"
    assert {v.name for v in spec.variants} >= {"thread-a-row", "warp-a-row", "wrong-skips-last", "cupy", "numpy"}
