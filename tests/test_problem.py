"""The public problem contract on the CPU: a Problem becomes a Family the real runner drives on a fake
device (poison, exact and tolerance checks, work, libraries), and a user's mistakes are one line
naming the file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import cudalab
from cudalab import plan as planning
from cudalab.worker import executor as runner
from cudalab.errors import CatalogError
from cudalab.problems import Output, Problem, ProblemFamily, Scratch, Tolerance, Work
from test_runcore import FAST, FakeDevice

TOML = """\
[family]
name = "{name}"
description = "y = 2x"
dtypes = ["float32"]

[[variant]]
name = "good"
source = "k.cu"
kernel = "dbl_good"

[[variant]]
name = "bad"
source = "k.cu"
kernel = "dbl_bad"
{more}"""
CU = 'extern "C" __global__ void dbl_good(float *y, const float *x, int n) {}\n' \
     'extern "C" __global__ void dbl_bad(float *y, const float *x, int n) {}\n'
MODULE = """\
import numpy as np
from cudalab import Library, Output, Problem, Tolerance, Work

def twice(size, arrays):
    return 2 * np.arange(size.n, dtype=np.float32)

PROBLEM = Problem(
    dims=("n",), default=1000,
    inputs=lambda s, rng: {{"x": np.arange(s.n, dtype=np.float32)}},
    outputs=(Output("y", lambda s: (s.n,)),),
    args=("y", "x", "n"),
    reference={reference},
    check={check},
    work={work},
    libraries=(Library("lib", twice),),
)
"""


def make_family(root: Path, name: str = "dbl", reference: str = "lambda s, i: 2 * i['x']", check: str = "'exact'",
                work: str = "lambda s: Work(bytes=8 * s.n)", more: str = "", module: str | None = None) -> Path:
    """A problem folder ``root/name`` (family.toml, k.cu, NAME.py)."""
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "family.toml").write_text(TOML.format(name=name, more=more))
    (folder / "k.cu").write_text(CU)
    text = module if module is not None else MODULE.format(reference=reference, check=check, work=work)
    (folder / f"{name.replace('-', '_')}.py").write_text(textwrap.dedent(text))
    return folder


def good(y, x, n):
    y.data[...] = 2 * x.data


def drops_last(y, x, n):
    y.data[:-1] = 2 * x.data[:-1]


def off_by_a_little(y, x, n):
    y.data[...] = 2 * x.data * (1 + 1e-6)


def rows(family="dbl", kernels=None, **kw):
    dev = FakeDevice(kernels or {"dbl_good": good, "dbl_bad": drops_last})
    req = planning.RunRequest(family=family, protocol=FAST, seed=1, roofline=False, **kw)
    return {r.variant: r for r in runner.FamilyRun(planning.precheck(req), dev).run()}


@pytest.fixture
def path(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDALAB_PATH", str(tmp_path))
    return tmp_path


def test_an_outside_problem_runs_verified_and_rated(path):
    make_family(path, more='\n[[variant]]\nname = "lib"\nkind = "library"\n')
    got = rows()
    assert got["good"].status == "passed" and got["good"].gbs == pytest.approx(8000 / 1e-3 / 1e9)
    assert got["bad"].status == "incorrect" and "unwritten" in got["bad"].reason
    assert got["lib"].status == "passed"


def test_a_tolerance_check_passes_rounding_and_catches_more(path):
    make_family(path, check="Tolerance(rtol=1e-5)")
    got = rows(kernels={"dbl_good": off_by_a_little, "dbl_bad": drops_last})
    assert got["good"].status == "passed"
    assert got["bad"].status == "incorrect"
    make_family(path, name="dbl2", check="Tolerance(rtol=1e-8)")
    got = rows("dbl2", kernels={"dbl_good": off_by_a_little, "dbl_bad": good})
    assert got["good"].status == "incorrect" and "beyond atol" in got["good"].reason
    assert got["good"].reason.startswith("max |got - expected| / (atol + rtol |expected|) ")  # not "max error", read as absolute


def test_a_custom_check_gets_size_result_and_reference(path):
    make_family(path, check="lambda s, r, ref: (bool(np.all(r == ref)), 'not equal')")
    got = rows()
    assert got["good"].status == "passed" and got["bad"].status == "incorrect"
    assert "not equal" in got["bad"].reason


@pytest.mark.parametrize("reference, fragment", [
    ("lambda s, i: np.zeros(3, np.float32)", "reference gave shape (3,), output 'y' has (1000,)"),
    ("lambda s, i: np.zeros(s.n, np.int32)", "reference gave dtype int32, output 'y' is float32"),
    ("lambda s, i: 1 / 0", "reference raised ZeroDivisionError"),
])
def test_a_bad_reference_refuses_the_point_naming_the_file(path, reference, fragment):
    folder = make_family(path, reference=reference)
    fam = cudalab.families.load(cudalab.family("dbl").module)
    prob = fam.problem(None, None, "float32", {})
    with pytest.raises(CatalogError) as err:
        fam.reference(prob, fam.make_inputs(prob, np.random.default_rng(0)))
    assert fragment in str(err.value) and str(folder / "dbl.py") in str(err.value)


@pytest.mark.parametrize("work, fragment", [
    ("lambda s: Work(bytes=-4)", "work gave bytes=-4: an int >= 0"),
    ("lambda s: 12", "work gave int"),
    ("lambda s: (1.5, 0)", "bytes=1.5"),
])
def test_a_bad_work_figure_is_one_line_naming_the_file(path, work, fragment):
    folder = make_family(path, work=work)
    fam = cudalab.families.load(cudalab.family("dbl").module)
    with pytest.raises(CatalogError) as err:
        fam.work(fam.problem("64", None, "float32", {}))
    assert fragment in str(err.value) and str(folder / "dbl.py") in str(err.value)


def test_the_signature_is_written_from_args():
    p = Problem(dims=("n",), inputs=lambda s, r: {}, outputs=(Output("bins", lambda s: (256,), "uint32"),),
                scratch=(Scratch("flags", lambda s, l: (1,), "uint64"),), reference=lambda s, i: None,
                args=("bins", "data", "flags", "n"), work=lambda s: Work(), input_dtypes={"data": "uint8"})
    sig = p.signature()
    assert "void KERNEL(unsigned int *bins," in sig and "const unsigned char *data," in sig
    assert "unsigned long long *flags," in sig and "int n)" in sig
    from cudalab.catalog.user import prototype_sizes

    assert prototype_sizes(sig) == (8, 8, 8, 4)


def test_size_reads_dims_and_options_by_name():
    s = cudalab.Size(("rows", "cols"), (3, 5), "float32", (("bins", 7),))
    assert (s.rows, s["cols"], s.bins, s.elements) == (3, 5, 7, 15)
    with pytest.raises(AttributeError, match="sizes: rows, cols"):
        _ = s.depth


def test_sizes_parse_as_the_family_commands_do():
    fam = ProblemFamily(Problem(dims=("rows", "cols"), default=(8, 4), inputs=lambda s, r: {},
                                outputs=(Output("y", lambda s: (s.rows,)),), reference=lambda s, i: None,
                                args=(), work=lambda s: Work(), check=Tolerance()))
    assert fam.problem(None, None, "float32", {}).dims == (8, 4)
    assert fam.problem("16", None, "float32", {}).dims == (16, 16)
    assert fam.problem(None, "3x5", "float32", {}).dims == (3, 5)
    with pytest.raises(cudalab.UsageError):
        fam.problem("4", "3x5", "float32", {})


def test_the_examples_load_and_their_references_agree_with_numpy(monkeypatch):
    monkeypatch.setenv("CUDALAB_PATH", str(Path(__file__).parent.parent / "examples"))
    rng = np.random.default_rng(1)
    for name, n, shape in (("softmax", None, "5x33"), ("scan", "1000", None), ("histogram", "1001", None)):
        spec = cudalab.family(name)
        fam = cudalab.families.load(spec.module)
        prob = fam.problem(n, shape, spec.default_dtype, {})
        ref = fam.reference(prob, fam.make_inputs(prob, rng))
        assert fam.work(prob).bytes > 0 and ref.size > 0
        assert {v.kind for v in spec.variants} >= {"kernel"} and any(v.name.startswith("wrong") for v in spec.variants)


def test_an_argument_that_names_nothing_is_refused_when_the_family_loads_naming_the_file(path, invoke,
                                                                                           one_line_exit_2):
    folder = make_family(path, module=MODULE.format(reference="lambda s, i: 2 * i['x']", check="'exact'",
                                                    work="lambda s: Work(bytes=8 * s.n)").replace('"y", "x", "n"', '"y", "z", "n"'))
    one_line_exit_2(invoke("list", "dbl"), f"{folder / 'dbl.py'}: args names 'z', which is no input (x)")


def test_an_option_is_a_command_line_flag_and_a_size_field(path, invoke):
    module = MODULE.format(reference="lambda s, i: s.scale * i['x']", check="'exact'",
                           work="lambda s: Work(bytes=8 * s.n)").replace(
        "libraries=(Library(\"lib\", twice),),", "options=(Option('scale', int, 2, 'the factor'),),").replace(
        "from cudalab import Library,", "from cudalab import Option, Library,")
    make_family(path, module=module)
    assert "--scale" in invoke("dbl", "--help").output
    fam = cudalab.families.load(cudalab.family("dbl").module)
    prob = fam.problem("8", None, "float32", {"scale": 3})
    assert fam.size(prob).scale == 3 and dict(prob.options) == {"scale": 3}
    assert rows(kernels={"dbl_good": good, "dbl_bad": good}, variants="good")["good"].status == "passed"


def test_a_host_row_times_the_numpy_reference(path):
    make_family(path, more='\n[[variant]]\nname = "numpy"\nkind = "host"\n')
    row = rows(variants="numpy")["numpy"]
    assert row.status == "passed" and row.extra["reference"] == "NumPy on the CPU"


def test_the_advanced_family_of_the_docs_runs_as_written(path):
    """docs/family-contract.md's Family example, verbatim: verified, rated, and SkipRow a skipped row."""
    text = (Path(__file__).parent.parent / "docs" / "family-contract.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    folder = path / "scale"
    folder.mkdir()
    (folder / "scale.py").write_text(code)
    (folder / "k.cu").write_text('extern "C" __global__ void scale(float *y, const float *x, int n) {}\n')
    (folder / "family.toml").write_text(
        '[family]\nname = "scale"\ndescription = "y = 2x"\ndtypes = ["float32"]\n\n'
        '[[variant]]\nname = "good"\nsource = "k.cu"\nkernel = "scale"\n\n'
        '[[variant]]\nname = "square"\nsource = "k.cu"\nkernel = "scale"\nblock = "16x16"\n')
    got = rows("scale", kernels={"scale": good}, n="4096")
    assert got["good"].status == "passed" and got["good"].gbs == pytest.approx(2 * 4096 * 4 / 1e-3 / 1e9)
    assert got["square"].status == "skipped" and got["square"].reason == "square is one-dimensional"
