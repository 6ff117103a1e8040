"""Links and the cache (issue 57): the cache's root is the user's (``CUDALAB_CACHE`` may name a link to another
disk), but a link *inside* it was planted: cudalab never writes through one (:func:`cudalab.build.cachefiles.
own_folder`). The hostile pass found ``compile`` writing its builds through ``$CUDALAB_CACHE/build`` -> elsewhere."""

from __future__ import annotations

import pytest

from cudalab import build
from cudalab.build import cachefiles
from cudalab.errors import UsageError


@pytest.fixture
def outside(tmp_path, monkeypatch):
    """A cache at tmp/cache and a folder outside it, tmp/outside, that planted links point at."""
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path / "outside"


@pytest.mark.parametrize("folder", ["build", "noise", "calibrate", "locks"])
def test_a_folder_of_the_cache_that_is_a_link_is_not_written_through(outside, folder):
    link = build.cache_dir().parent / folder
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(UsageError, match=f"{link} is a symbolic link in cudalab's cache"):
        cachefiles.own_folder(link / "sub")
    if folder == "build":
        with pytest.raises(UsageError, match="symbolic link"):  # every build checks the cache first
            build.check_cache()
    if folder == "locks":
        with build._locked("ab" * 32):  # no lock rather than a lock file outside
            pass
    assert list(outside.iterdir()) == []


def test_compile_with_a_planted_build_link_is_one_line_and_writes_nothing_outside(outside, invoke, one_line_exit_2):
    (build.cache_dir().parent / "build").symlink_to(outside, target_is_directory=True)
    one_line_exit_2(invoke("compile", "copy", "--variant", "vec4"), "is a symbolic link in cudalab's cache")
    assert list(outside.iterdir()) == []


def test_a_cache_root_that_is_a_link_is_the_users_choice(tmp_path, monkeypatch):
    (tmp_path / "big-disk").mkdir()
    (tmp_path / "cache").symlink_to(tmp_path / "big-disk", target_is_directory=True)
    monkeypatch.setenv("CUDALAB_CACHE", str(tmp_path / "cache"))
    build.check_cache()
    cachefiles.write(build.cache_dir().parent / "noise" / "g.json", "{}\n")
    assert (tmp_path / "big-disk" / "noise" / "g.json").read_text() == "{}\n"
