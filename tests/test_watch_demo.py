"""scripts/watch_demo.py, the driver of the documented watch session, on the fake GPU: in a pseudo-terminal
rendered by pyte, and in tmux where it is installed. Each capture must show what its step is about."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_demo_drives_watch_through_three_edits_and_ctrl_c(tmp_path):
    """Both terminals at once: each demo spends most of its ~4 s waiting for its screen. One that cannot run
    here (no pyte, no tmux) makes the test a skip naming it, after the other passed."""
    missing = {"pyte": importlib.util.find_spec("pyte") is None, "tmux": shutil.which("tmux") is None}
    terminals = [t for t, gone in missing.items() if not gone]
    if not terminals:
        pytest.skip("neither pyte nor tmux")
    fake = f"{sys.executable} {ROOT / 'tests' / 'fake_watch.py'}"
    demos = {}
    for terminal in terminals:
        (tmp_path / terminal).mkdir()
        demos[terminal] = subprocess.Popen(
            [sys.executable, str(ROOT / "scripts" / "watch_demo.py"), str(tmp_path / terminal), "--cudalab", fake,
             "--n", "64", "--terminal", terminal, "--timeout", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    outputs = {terminal: proc.communicate(timeout=300)[0] for terminal, proc in demos.items()}
    for terminal, proc in demos.items():
        assert proc.returncode == 0, f"{terminal}: {outputs[terminal]}"
        folder = tmp_path / terminal
        caps = {p.name: p.read_text() for p in sorted(folder.glob("watch-*.txt"))}
        assert list(caps) == ["watch-1-first.txt", "watch-2-faster.txt", "watch-3-wrong.txt",
                              "watch-4-nvcc-error.txt", "watch-5-ctrl-c.txt"], terminal
        assert all(terminal in text.splitlines()[1] for text in caps.values()), terminal
        assert "cudalab watch · v1" in caps["watch-1-first.txt"]
        assert "faster 0.40× vs v1" in caps["watch-2-faster.txt"] and "kept v1" in caps["watch-2-faster.txt"]
        assert "incorrect" in caps["watch-3-wrong.txt"]
        assert 'error: expected a ";"' in caps["watch-4-nvcc-error.txt"]
        assert "watch ended after 4 versions" in caps["watch-5-ctrl-c.txt"]
        assert (folder / "watch-session.json").is_file()
    if len(terminals) < 2:
        pytest.skip(f"the {terminals[0]} demo passed; no {'tmux' if missing['tmux'] else 'pyte'} for the other")
