"""Hostile input to ``cudalab tune``, by class (CPU only, fake GPU workers): what a campaign may write, what an
interrupt may conclude, which values and options it takes. Each class's rule lives in one place; these tests
aim at the rule with inputs of their own."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest

import cudalab
from cudalab.errors import UsageError

optuna = pytest.importorskip("optuna")

from test_tune import MS, SPACE  # noqa: E402

ARGS = ["tune", "copy", "--variant", "vec4", "--n", "1k", "-D", "UNROLL=1..8", "--block", "64..1024:pow2",
        "--require", "threads * UNROLL <= 4096", "--seed", "1", "--build-ahead", "0", "--strategy", "grid"]


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder``: its kind and bytes (a link: where it points)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_file():
            out[rel] = ("file", p.read_bytes())
        else:
            out[rel] = ("other", p.stat().st_mode)
    return out


@pytest.fixture
def ws(tmp_path, monkeypatch):
    """A workspace: the current folder, holding a finished campaign and another program's database."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def finished_campaign(fake_workers, db: Path) -> None:
    fake_workers({"_ms": MS})
    cudalab.tune("copy", "vec4", **SPACE, seed=1, build_ahead=0, strategy="grid", race=0, trials=3,
                 storage=f"sqlite:///{db}")


def other_programs_db(path: Path) -> Path:
    with sqlite3.connect(path) as con:
        con.execute("create table accounts (id integer primary key, owner text)")
        con.execute("insert into accounts (owner) values ('someone')")
    return path


# --- class: a campaign's storage is written only when it is a campaign (or new), and only by a run -------------

def test_a_tune_that_cannot_open_a_gpu_changes_nothing_on_disk(fake_workers, ws, invoke):
    finished_campaign(fake_workers, ws / "kept.tune.db")
    before = snapshot(ws)
    fake_workers({"_open": "error"})
    for extra in ([], ["--storage", f"sqlite:///{ws / 'kept.tune.db'}", "--name", "another"],
                  ["--storage", f"sqlite:///{ws / 'kept.tune.db'}", "--trials", "8"]):
        res = invoke([*ARGS, *extra])
        assert res.exit_code != 0, res.output
        assert snapshot(ws) == before, extra  # no NAME.tune.db left, no study added, no trial left RUNNING


@pytest.mark.parametrize("make", ["other_db", "link", "dangling", "folder", "fifo", "text"])
def test_the_storage_is_never_a_file_that_is_not_a_campaign(fake_workers, ws, invoke, one_line_exit_2, make):
    finished_campaign(fake_workers, ws / "kept.tune.db")
    other_programs_db(ws / "app.db")
    target = {"other_db": ws / "app.db", "link": ws / "link.db", "dangling": ws / "dangling.db",
              "folder": ws / "folder.db", "fifo": ws / "fifo.db", "text": ws / "notes.db"}[make]
    if make == "link":
        target.symlink_to(ws / "kept.tune.db")
    elif make == "dangling":
        target.symlink_to(ws / "nowhere" / "made.db")
        (ws / "nowhere").mkdir()
    elif make == "folder":
        target.mkdir()
    elif make == "fifo":
        os.mkfifo(target)
    elif make == "text":
        target.write_text("my notes\n")
    before = snapshot(ws)
    fake_workers({"_ms": MS})
    one_line_exit_2(invoke([*ARGS, "--storage", f"sqlite:///{target}"]), str(target))
    assert snapshot(ws) == before
    one_line_exit_2(invoke(["tune", "--replay", str(target)]))
    assert snapshot(ws) == before


def test_a_replay_only_reads_its_campaign(fake_workers, ws, invoke):
    db = ws / "kept.tune.db"
    finished_campaign(fake_workers, db)
    os.chmod(db, 0o444)  # a file its owner keeps read-only: a replay needs no more
    before, mtime = snapshot(ws), db.stat().st_mtime_ns
    res = invoke(["tune", "--replay", str(db), "--strategy", "random", "--seeds", "2", "--trials", "2"])
    assert res.exit_code == 0, res.output
    assert snapshot(ws) == before and db.stat().st_mtime_ns == mtime


def test_two_tunes_started_at_once_on_a_new_file_both_run(fake_workers, ws):
    """The second tune finds the first's study before its attributes are written (Optuna creates a study, then
    its attributes): it waits for them rather than refusing "another space (fingerprint none)"."""
    fake_workers({"_ms": MS})
    db = ws / "new.tune.db"
    url = f"sqlite:///{db}"
    optuna.create_study(storage=url, study_name="copy-vec4")  # the first tune, between its two writes

    def first_tune_finishes_creating():
        from cudalab.tuning.drive import plan
        from cudalab.tuning.options import TuneOptions

        p = plan(TuneOptions(family="copy", variant="vec4", defines=(("UNROLL", "1..8"),), n="1k",
                             block="64..1024:pow2", require=tuple(SPACE["require"]), seed=1, strategy="grid",
                             storage=url))
        study = optuna.load_study(study_name="copy-vec4", storage=url)
        for k, v in p.meta.items():
            study.set_user_attr(k, v)

    later = threading.Timer(1.0, first_tune_finishes_creating)
    later.start()
    try:
        res = cudalab.tune("copy", "vec4", **SPACE, seed=1, build_ahead=0, strategy="grid", race=0, trials=2,
                           storage=url)
    finally:
        later.join()
    assert [m.status for m in res.trials] == ["passed", "passed"]
    with pytest.raises(UsageError, match="not written by cudalab"):  # a study no cudalab tune is creating
        optuna.create_study(storage=url, study_name="someone-elses")
        cudalab.tune("copy", "vec4", **SPACE, seed=1, build_ahead=0, strategy="grid", race=0, trials=2,
                     storage=url)
