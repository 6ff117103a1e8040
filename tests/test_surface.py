"""The package's public surface and what a saved run says about the command (CPU only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import cudalab
from cudalab.records.results import RunRecord
from cudalab.report import saved_lines


def test_dir_lists_a_useful_public_namespace_without_importing_it():
    code = ("import sys, cudalab; names = dir(cudalab); "
            "assert {'run', 'load_record', 'RunRecord', 'compare_runs', 'Family', '__version__'} <= set(names), names; "
            "assert 'importlib' not in names and 'Any' not in names; "
            "assert not {'pycuda', 'rich', 'numpy', 'cudalab.api'} & set(sys.modules); "
            "cudalab.load_record; cudalab.compare_runs; assert 'pycuda' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
    assert cudalab.RunRecord is RunRecord and cudalab.__all__[0] == "__version__"
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        cudalab.nosuch  # noqa: B018


@pytest.mark.parametrize("argv0", ["/usr/lib/python3/site-packages/cudalab/__main__.py", "/home/u/.local/bin/cudalab"])
def test_the_command_is_recorded_as_the_user_typed_it(monkeypatch, argv0, tmp_path):
    from cudalab import cli

    run = Path(__file__).parent / "data" / "runs" / "nvidia-h200-transpose.json"
    monkeypatch.setattr(sys, "argv", [argv0, "report", str(run)])
    with pytest.raises(SystemExit) as exc:
        cli.main()
    assert exc.value.code == 0 and sys.argv[0] == "cudalab"  # what sweep.record saves as the command


def test_a_saved_command_is_shown_quoted_as_a_shell_would_take_it():
    rec = RunRecord(cudalab="x", command=("cudalab", "transpose", "--add", "my file.cu:k"), started=0.0,
                    device={}, points=())
    assert "command: cudalab transpose --add 'my file.cu:k'" in saved_lines(rec, "r.json")


def test_records_from_before_show_the_command_as_typed_too():
    rec = RunRecord(cudalab="x", command=("/work/cudalab/__main__.py", "transpose", "--n", "16384"), started=0.0,
                    device={}, points=())
    assert "command: cudalab transpose --n 16384" in saved_lines(rec, "r.json")


@pytest.mark.parametrize("family, shown", [("reduce", None), ("smem-square", None), ("transpose", "ROWSxCOLS"),
                                           ("gemm", "MxKxN"), ("gemv", "MxN")])
def test_shape_help_shows_the_form_each_family_takes(invoke, family, shown):
    text = invoke(family, "--help").output
    if shown is None:  # a length only: the option is hidden (and refused in one line)
        assert "--shape" not in text
    else:
        assert f"--shape {shown}" in " ".join(text.split())
