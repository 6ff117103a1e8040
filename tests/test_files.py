"""Output files (CPU): bad --json/--csv/--export/--log paths refused in one line before any GPU
work (so no measured result is lost), and atomic writes that keep the replaced file's mode."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cudalab import files, report
from cudalab.errors import UsageError


@pytest.fixture
def no_gpu(fake_workers, tmp_path, monkeypatch):
    """Fake workers that log what they are asked: a test reads ``ops()`` to see whether any GPU work
    was sent (a worker is started early by design; it must be given nothing to run)."""
    log = tmp_path / "ops.log"
    monkeypatch.setenv("FAKE_WORKER_LOG", str(log))
    fake_workers({})
    return lambda: log.read_text().split() if log.exists() else []


# --- output paths ---------------------------------------------------------------------------------------

def _bad_paths(tmp_path: Path) -> list[tuple[str, str]]:
    (tmp_path / "dir").mkdir(exist_ok=True)
    (tmp_path / "file").write_text("x")
    return [
        (str(tmp_path / "dir"), "is a folder"),
        ("/no/such/dir/x.json", "folder /no/such/dir does not exist"),
        (str(tmp_path / "file" / "x.json"), "is not a folder"),
        ("", "needs a file name"),
    ]


@pytest.mark.parametrize("option", ["--json", "--csv"])
def test_family_output_paths_are_refused_before_the_gpu(invoke, one_line_exit_2, option, tmp_path, no_gpu):
    for path, fragment in _bad_paths(tmp_path):
        one_line_exit_2(invoke("transpose", "--variant", "naive", "--n", "64", option, path),
                               f"{option} ")
        assert fragment in invoke("transpose", option, path).output
    assert "point" not in no_gpu()


def test_a_good_output_path_gets_to_the_gpu(invoke, tmp_path, no_gpu):
    res = invoke("transpose", "--variant", "naive", "--n", "64", "--json", str(tmp_path / "new.json"),
                 "--csv", str(tmp_path / "new.csv"))
    assert res.exit_code == 0, res.output
    assert "point" in no_gpu()


def test_ncu_export_is_refused_before_profiling(invoke, one_line_exit_2, tmp_path, monkeypatch):
    from cudalab import ncu

    monkeypatch.setattr(ncu, "profile", lambda *a, **k: pytest.fail("profiled before checking --export"))
    for path, fragment in _bad_paths(tmp_path):
        one_line_exit_2(invoke("ncu", "transpose", "--export", path), fragment)


def test_sanitize_outputs_are_refused_before_running(invoke, one_line_exit_2, tmp_path, monkeypatch):
    from cudalab import sanitize

    monkeypatch.setattr(sanitize, "sanitize", lambda *a, **k: pytest.fail("ran before checking the outputs"))
    for path, fragment in _bad_paths(tmp_path):
        one_line_exit_2(invoke("sanitize", "transpose", "--json", path), fragment)
    one_line_exit_2(invoke("sanitize", "transpose", "--log", "/no/such/dir/logs"),
                           "--log /no/such/dir/logs: folder /no/such/dir does not exist")


def test_check_output_path_accepts_new_and_existing_files(tmp_path):
    assert files.check_output_path(tmp_path / "new.json", "--json") == tmp_path / "new.json"
    (tmp_path / "old.csv").write_text("x")
    assert files.check_output_path(str(tmp_path / "old.csv"), "--csv") == tmp_path / "old.csv"
    assert files.check_output_dir(tmp_path / "logs", "--log") == tmp_path / "logs"
    assert files.check_output_dir(tmp_path, "--log") == tmp_path
    with pytest.raises(UsageError, match="is a file, not a folder"):
        files.check_output_dir(tmp_path / "old.csv", "--log")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_check_output_path_refuses_what_cannot_be_written(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "x.json").write_text("{}")
    ro.chmod(0o555)
    try:
        with pytest.raises(UsageError, match="cannot write in folder"):
            files.check_output_path(ro / "x.json", "--json")
    finally:
        ro.chmod(0o755)
    (tmp_path / "locked.json").write_text("{}")
    (tmp_path / "locked.json").chmod(0o444)
    with pytest.raises(UsageError, match=r"read-only \(mode 0444\)"):  # for root too, who could replace it
        files.check_output_path(tmp_path / "locked.json", "--json")


# --- atomic_write -------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o755, 0o664])
def test_atomic_write_keeps_the_mode_of_the_file_it_replaces(tmp_path, mode):
    path = tmp_path / "run.json"
    path.write_text("old")
    path.chmod(mode)
    files.atomic_write(path, "new")
    assert path.read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_atomic_write_gives_a_new_file_the_usual_mode(tmp_path, umask):
    old = os.umask(umask)
    try:
        files.atomic_write(tmp_path / "new.csv", "a,b\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o666 & ~umask


def test_report_atomic_write_is_the_files_one():
    assert report.atomic_write is files.atomic_write


def test_write_json_replacing_a_file_keeps_its_mode(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("{}")
    path.chmod(0o644)
    report.write_json(path, {"a": 1})
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 and '"a": 1' in path.read_text()


# --- targets a rename would wrongly replace ------------------------------------------------------------

def test_a_read_only_or_hard_linked_target_is_refused_at_the_write_too_and_kept(tmp_path):
    ro = tmp_path / "ro.png"
    ro.write_text("keep")
    ro.chmod(0o444)
    with pytest.raises(files.WriteError, match=r"read-only \(mode 0444\)"):
        files.write_bytes(ro, b"new", "--plot")
    assert ro.read_text() == "keep"
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    a.write_text("shared")
    os.link(a, b)
    with pytest.raises(UsageError, match="2 hard links"):
        files.check_output_path(b, "--plot")
    with pytest.raises(files.WriteError, match="2 hard links"):
        files.write_bytes(b, b"new", "--plot")
    assert a.read_text() == b.read_text() == "shared" and a.stat().st_ino == b.stat().st_ino  # not split


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_plot_target_that_is_the_runs_own_input_is_refused(tmp_path, invoke, one_line_exit_2, link):
    run = tmp_path / "run.json"
    run.write_bytes((Path(__file__).parent / "data" / "runs" / "nvidia-h200-transpose.json").read_bytes())
    before = run.read_bytes()
    target = tmp_path / "plot.png"
    target.symlink_to(run) if link == "symlink" else os.link(run, target)
    one_line_exit_2(invoke("report", str(run), "--plot", str(target)), "which this command also reads")
    one_line_exit_2(invoke("compare", str(run), str(run), "--plot", str(target)), "which this command also reads")
    assert run.read_bytes() == before
