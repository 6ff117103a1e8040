"""The one writer and the one bounded reader (cudalab.files): what a failed write leaves, what a
symlink or a special file becomes, and what a hostile input file costs (CPU only)."""

from __future__ import annotations

import errno
import io
import json
import os
from pathlib import Path

import pytest

from cudalab import files
from cudalab.errors import UsageError
from cudalab.files import WriteError

RUNS = Path(__file__).parent / "data" / "runs"
H100 = RUNS / "nvidia-h100-80gb-hbm3-transpose.json"
H200 = RUNS / "nvidia-h200-transpose.json"


@pytest.fixture
def full_disk(monkeypatch):
    """Every write through the atomic writer fails half-way, as on a full disk (ENOSPC)."""
    real = os.fdopen

    class Full(io.RawIOBase):
        def __init__(self, fd):
            self.f = real(fd, "wb")

        def write(self, data):
            self.f.write(bytes(data[: len(data) // 2]))  # half of it reaches the disk
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            self.f.close()
            super().close()

    monkeypatch.setattr(files.os, "fdopen", lambda fd, *a, **k: Full(fd))


# --- writing --------------------------------------------------------------------------------------------

def test_a_full_disk_keeps_the_old_file_and_leaves_no_temporary(tmp_path, full_disk):
    keep = tmp_path / "keep.json"
    keep.write_text("old")
    with pytest.raises(WriteError, match="No space left on device") as exc:
        files.atomic_write(keep, "new" * 1000, "--json")
    assert isinstance(exc.value, OSError) and "Errno" not in str(exc.value)
    assert keep.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]


@pytest.mark.parametrize("command", ["compare", "report"])
def test_a_plot_on_a_full_disk_is_one_line_and_keeps_the_old_plot(invoke, tmp_path, full_disk, command):
    pytest.importorskip("matplotlib")
    keep = tmp_path / "keep.png"
    keep.write_bytes(b"the old plot")
    args = [command, str(H100), str(H200)] if command == "compare" else [command, str(H200)]
    res = invoke(*args, "--plot", str(keep))
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    errors = [ln for ln in res.output.splitlines() if ln.startswith("cudalab: ")]
    assert errors == [f"cudalab: cannot write --plot {keep}: No space left on device (the old file is unchanged)"]
    assert keep.read_bytes() == b"the old plot" and [p.name for p in tmp_path.iterdir()] == ["keep.png"]


def test_a_plot_replaces_through_the_writer_keeping_the_mode(invoke, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "run.svg"
    out.write_text("old")
    out.chmod(0o640)
    assert invoke("report", str(H200), "--plot", str(out)).exit_code == 0
    assert out.read_text().startswith("<?xml") and (out.stat().st_mode & 0o777) == 0o640


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    real = tmp_path / "real" / "run.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    files.check_output_path(link, "--json")
    files.atomic_write(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(p.name for p in real.parent.iterdir()) == ["run.json"]  # the temporary went beside the target
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "real" / "made.json")
    files.atomic_write(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "real" / "made.json").read_text() == "made"


@pytest.mark.parametrize("target", ["/dev/null", "folder", "fifo"])
def test_a_target_that_is_not_a_regular_file_is_refused_never_replaced(tmp_path, target):
    if target == "folder":
        path = tmp_path / "out"
        path.mkdir()
    elif target == "fifo":
        path = tmp_path / "pipe"
        os.mkfifo(path)
    else:
        path = Path(target)
    link = tmp_path / "link"
    link.symlink_to(path)
    for p in (path, link):
        with pytest.raises(UsageError, match="folder|not a regular file"):
            files.check_output_path(p, "--json")
        with pytest.raises(UsageError, match="folder|not a regular file"):
            files.atomic_write(p, "x")
    assert os.path.exists("/dev/null") and not Path("/dev/null").is_file()


def test_dev_null_is_refused_by_every_writing_option(invoke, one_line_exit_2, tmp_path):
    pytest.importorskip("matplotlib")
    null_png = tmp_path / "null.png"
    null_png.symlink_to("/dev/null")
    one_line_exit_2(invoke("report", str(H200), "--plot", str(null_png)), "not a regular file")
    one_line_exit_2(invoke("compare", str(H200), str(H100), "--plot", str(null_png)), "not a regular file")
    for option in ("--json", "--csv", "--export"):  # what the family, ncu and sanitize commands check first
        with pytest.raises(UsageError, match="not a regular file"):
            files.check_output_path("/dev/null", option)


@pytest.mark.parametrize("command", ["report", "compare"])
def test_plot_folders_are_checked_before_the_table_is_printed(invoke, one_line_exit_2, tmp_path, command):
    pytest.importorskip("matplotlib")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    args = [command, str(H200)] + ([str(H100)] if command == "compare" else [])
    one_line_exit_2(invoke(*args, "--plot", str(tmp_path / "missing" / "x.png")), "does not exist")
    if os.geteuid() != 0:  # root writes anywhere
        one_line_exit_2(invoke(*args, "--plot", str(ro / "x.png")), "cannot write in folder")


# --- reading --------------------------------------------------------------------------------------------

def test_the_reader_refuses_devices_folders_and_large_files(tmp_path):
    with pytest.raises(UsageError, match="not a regular file"):
        files.read_bytes("/dev/zero", "--import")
    with pytest.raises(UsageError, match="is a folder"):
        files.read_bytes(tmp_path)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    with pytest.raises(UsageError, match="is 2,048 bytes; cudalab reads files up to 1,024 bytes"):
        files.read_bytes(big, limit=1024)
    assert files.read_bytes(big, limit=4096) == b" " * 2048
    with pytest.raises(UsageError, match="no such file"):
        files.read_bytes(tmp_path / "none")


def test_binary_bytes_are_named_never_printed(tmp_path):
    bad = tmp_path / "bin.csv"
    bad.write_bytes(b"ID,x\n\x00\x01\x02\xff\xfe")
    with pytest.raises(UsageError) as exc:
        files.read_text(bad)
    assert "binary" in str(exc.value) and "\x00" not in str(exc.value) and "\xff" not in str(exc.value)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"caf\xe9")
    with pytest.raises(UsageError, match="not UTF-8 text"):
        files.read_text(latin)


def test_json_depth_is_bounded_before_parsing(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(UsageError, match="nested 100000 levels deep"):
        files.load_json(deep)
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"a": ["[[[[ inside a string {{{{", {"b": [1]}]}))
    assert files.json_depth(ok.read_text()) == 4 and files.load_json(ok)["a"][1] == {"b": [1]}


@pytest.mark.parametrize("content, fragment", [
    ('{"schema_version": 2, "points": "oops"}', "'points' must be a list of objects"),
    ('{"points": "oops"}', "not a cudalab run record (no results;"),
    ('{"schema_version": "2"}', "schema_version '2' is not a version number"),
    ('{"schema_version": 3}', "schema_version 3 is newer than this cudalab reads (up to 2)"),
    ('{"schema_version": 2, "points": [{"results": 5}]}', "'results' must be a list of objects"),
    ('{"schema_version": 2, "points": [], "command": 7}', "'command' must be a list"),
    ('{"sweep": "x"}', "'sweep' must be a list of objects"),
    ("[" * 5000 + "]" * 5000, "levels deep"),
    ("\x00\x01", "binary"),
])
def test_report_on_hostile_json_is_one_line(invoke, one_line_exit_2, tmp_path, content, fragment):
    path = tmp_path / "run.json"
    path.write_text(content)
    one_line_exit_2(invoke("report", str(path)), fragment)


def test_report_on_dev_zero_ends_at_once(invoke, one_line_exit_2):
    one_line_exit_2(invoke("report", "/dev/zero"), "not a regular file")
