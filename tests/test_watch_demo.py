"""scripts/watch_demo.py, the driver of the documented watch session, on the fake GPU: in a pseudo-terminal
rendered by pyte, and in tmux where it is installed. Each capture must show what its step is about."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("terminal", ["pyte", "tmux"])
def test_the_demo_drives_watch_through_three_edits_and_ctrl_c(tmp_path, terminal):
    if terminal == "pyte":
        pytest.importorskip("pyte")
    elif not shutil.which("tmux"):
        pytest.skip("no tmux")
    fake = f"{sys.executable} {ROOT / 'tests' / 'fake_watch.py'}"
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "watch_demo.py"), str(tmp_path), "--cudalab", fake,
                          "--n", "64", "--terminal", terminal, "--timeout", "60"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    caps = {p.name: p.read_text() for p in sorted(tmp_path.glob("watch-*.txt"))}
    assert list(caps) == ["watch-1-first.txt", "watch-2-faster.txt", "watch-3-wrong.txt", "watch-4-nvcc-error.txt",
                          "watch-5-ctrl-c.txt"]
    where = "tmux" if terminal == "tmux" else "pyte"
    assert all(where in text.splitlines()[1] for text in caps.values())
    assert "cudalab watch · v1" in caps["watch-1-first.txt"]
    assert "faster 0.40× vs v1" in caps["watch-2-faster.txt"] and "kept v1" in caps["watch-2-faster.txt"]
    assert "incorrect" in caps["watch-3-wrong.txt"]
    assert 'error: expected a ";"' in caps["watch-4-nvcc-error.txt"]
    assert "watch ended after 4 versions" in caps["watch-5-ctrl-c.txt"]
    assert (tmp_path / "watch-session.json").is_file()
