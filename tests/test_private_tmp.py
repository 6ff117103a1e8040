"""The per-user folders in the temporary folder (``cudalab-add-<uid>``: ``--add`` preludes,
``cudalab-cells-<uid>``: notebook cells): another local user who makes one first cannot plant a symlink
there and have a run overwrite a file of ours; a file or a foreign folder at that name is one line."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import pytest

from cudalab import magic, private
from cudalab.catalog import user
from cudalab.catalog import VariantSpec
from cudalab.errors import UsageError

CELL = 'extern "C" __global__ void k(float *x) { x[0] = 1; }\n'
NOBODY = 65534
root_only = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                               reason="making a folder owned by another user needs root")


@pytest.fixture
def tmpdir_(tmp_path, monkeypatch) -> Path:
    """A fresh $TMPDIR (tempfile caches the first one it finds)."""
    t = tmp_path / "tmp"
    t.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    return t


def _prelude_name(src: Path) -> str:
    """The prelude's file name compile_source picks (what an attacker can predict)."""
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    text = f'// cudalab --add prelude; source sha256 {digest}\n#include "{src}"\n'
    return hashlib.sha256(text.encode()).hexdigest()[:24] + ".cu"


def _variant(src: Path) -> VariantSpec:
    return VariantSpec(name="+k", kind="kernel", description="", source=str(src), kernel="k")


def _plant(folder: Path, name: str, victim: Path) -> None:
    """Another user's folder (world-writable, theirs), with a symlink at the next file's name."""
    folder.mkdir()
    (folder / name).symlink_to(victim)
    os.chmod(folder, 0o777)
    os.chown(folder, NOBODY, NOBODY)


@root_only
def test_a_symlink_planted_in_another_users_add_folder_is_never_followed(tmpdir_, tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("mine")
    src = tmp_path / "k.cu"
    src.write_text(CELL)
    _plant(tmpdir_ / f"cudalab-add-{os.getuid()}", _prelude_name(src), victim)
    with pytest.raises(UsageError, match="belongs to another user"):
        user.compile_source(_variant(src))
    assert victim.read_text() == "mine"


@root_only
def test_a_symlink_planted_in_another_users_cells_folder_is_never_followed(tmpdir_, tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("mine")
    name = f"k-{hashlib.sha256(CELL.encode()).hexdigest()[:10]}.cu"
    _plant(tmpdir_ / f"cudalab-cells-{os.getuid()}", name, victim)
    with pytest.raises(UsageError, match="belongs to another user"):
        magic.cell_file(CELL)
    assert victim.read_text() == "mine"


def test_a_folder_others_can_write_is_refused(tmpdir_, tmp_path):
    folder = tmpdir_ / f"cudalab-add-{os.getuid()}"
    folder.mkdir()
    os.chmod(folder, 0o777)
    src = tmp_path / "k.cu"
    src.write_text(CELL)
    with pytest.raises(UsageError, match=r"writable by other users \(mode 0777\)"):
        user.compile_source(_variant(src))


def test_a_symlink_or_a_file_at_the_folders_name_is_one_line(tmpdir_, tmp_path):
    (tmpdir_ / f"cudalab-cells-{os.getuid()}").write_text("not a folder")
    with pytest.raises(UsageError, match="is a file, not the private folder"):
        magic.cell_file(CELL)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (tmpdir_ / f"cudalab-add-{os.getuid()}").symlink_to(elsewhere)
    with pytest.raises(UsageError, match="is a symlink"):
        private.private_folder("cudalab-add")


def test_a_symlink_inside_our_own_folder_is_replaced_not_followed(tmpdir_, tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("mine")
    src = tmp_path / "k.cu"
    src.write_text(CELL)
    folder = private.private_folder("cudalab-add")
    assert oct(os.stat(folder).st_mode & 0o777) == oct(0o700)
    (folder / _prelude_name(src)).symlink_to(victim)
    out = user.compile_source(_variant(src))
    assert victim.read_text() == "mine"
    assert not out.is_symlink() and f'#include "{src}"' in out.read_text()
    again = user.compile_source(_variant(src))  # the same text: kept, not rewritten
    assert again == out and again.stat().st_ino == out.stat().st_ino


def test_a_plain_file_at_the_folders_name_is_one_line_exit_2_on_the_command_line(tmpdir_, tmp_path, monkeypatch,
                                                                                 one_line_exit_2, invoke):
    (tmpdir_ / f"cudalab-add-{os.getuid()}").write_text("not a folder")
    src = tmp_path / "k.cu"
    src.write_text('extern "C" __global__ void k(float *out, const float *in, int rows, int cols, int pin, int pout) {}\n')
    from cudalab.execute.local import drive

    monkeypatch.setattr(drive.Session, "start", lambda self: self)  # refused before any GPU work
    one_line_exit_2(invoke("transpose", "--n", "64", "--variant", "none", "--add", f"{src}:k"),
                    "is a file, not the private folder")
