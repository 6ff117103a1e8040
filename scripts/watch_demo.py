#!/usr/bin/env python3
"""Drive ``cudalab watch`` in a real terminal and keep what the screen shows after each step.

    python scripts/watch_demo.py OUT_DIR [--cudalab CMD] [--n 8192] [--cols 120] [--rows 48]

A kernel of yours (``my_transpose.cu``, in a scratch folder) is watched beside two of the ladder's
transposes; the script saves the screen after the first run and after each of three edits (faster:
a padded shared-memory tile; wrong: the tile read back untransposed; a compile error: a missing
``;``), then presses Ctrl-C and saves the last screen: ``OUT_DIR/watch-N-STEP.txt``, each headed by
the command, the step and the terminal it ran in.

The terminal is tmux where it is installed (``tmux new-session -x COLS -y ROWS``, ``capture-pane``),
else a pseudo-terminal of this process rendered by the pure-Python terminal emulator ``pyte``; each
capture says which. ``--cudalab`` names the command (default: ``cudalab``; the tests pass
``python tests/fake_watch.py``, a fake GPU).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

STEP1 = """\
// my_transpose.cu, step 1: straight from global memory. Reads walk a row (coalesced); writes walk a
// column of the output, one row apart (each a separate 32-byte sector).
extern "C" __global__ void my_transpose(float *out, const float *in, int rows, int cols, int pitch_in,
                                        int pitch_out)
{
    int x = blockIdx.x * TILE_X + threadIdx.x;
    int y = blockIdx.y * TILE_Y + threadIdx.y;
    for (int j = 0; j < TILE_Y; j += blockDim.y)
        if (x < cols && y + j < rows)
            out[(size_t)x * pitch_out + y + j] = in[(size_t)(y + j) * pitch_in + x];
}
"""

STEP2 = """\
// my_transpose.cu, step 2: through a __shared__ tile, padded by one column, so that both the reads
// and the writes of global memory walk rows.
extern "C" __global__ void my_transpose(float *out, const float *in, int rows, int cols, int pitch_in,
                                        int pitch_out)
{
    __shared__ float tile[TILE_Y][TILE_X + 1];
    int x = blockIdx.x * TILE_X + threadIdx.x;
    int y = blockIdx.y * TILE_Y + threadIdx.y;
    for (int j = 0; j < TILE_Y; j += blockDim.y)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * pitch_in + x];
    __syncthreads();
    x = blockIdx.y * TILE_Y + threadIdx.x;
    y = blockIdx.x * TILE_X + threadIdx.y;
    for (int j = 0; j < TILE_X; j += blockDim.y)
        if (x < rows && y + j < cols)
            out[(size_t)(y + j) * pitch_out + x] = tile[threadIdx.x][threadIdx.y + j];
}
"""

STEP3 = STEP2.replace("// my_transpose.cu, step 2: through a __shared__ tile, padded by one column, so that both the reads\n"
                      "// and the writes of global memory walk rows.",
                      "// my_transpose.cu, step 3: a bug: the tile is read back as it was written (not transposed).") \
    .replace("= tile[threadIdx.x][threadIdx.y + j];", "= tile[threadIdx.y + j][threadIdx.x];")

STEP4 = STEP2.replace("// my_transpose.cu, step 2: through a __shared__ tile, padded by one column, so that both the reads\n"
                      "// and the writes of global memory walk rows.",
                      "// my_transpose.cu, step 4: the bug fixed, and a typo: a missing semicolon.") \
    .replace("    __syncthreads();\n", "    __syncthreads()\n")

STEPS = [("faster", "a padded __shared__ tile (faster)", STEP2),
         ("wrong", "the tile read back untransposed (wrong)", STEP3),
         ("nvcc-error", "a missing semicolon (nvcc error)", STEP4)]

_VERSION = re.compile(r"cudalab watch · v(\d+) at")


class Tmux:
    """The command in a detached tmux session of a fixed size."""

    def __init__(self, cmd: str, cwd: Path, cols: int, rows: int):
        self.name = f"cudalab-watch-{os.getpid()}"
        version = subprocess.run(["tmux", "-V"], capture_output=True, text=True).stdout.strip()
        self.what = f"{version or 'tmux'}, {cols}x{rows}"
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(cols), "-y", str(rows), "-c", str(cwd),
                        "bash --norc --noprofile"], check=True)
        subprocess.run(["tmux", "set-option", "-t", self.name, "remain-on-exit", "on"], capture_output=True)
        self.keys(f"clear; {cmd}; echo \"(exit $?)\"", "Enter")

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True).stdout

    def interrupt(self) -> None:
        self.keys("C-c")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


class PyteTerminal:
    """The command in a pseudo-terminal of this process, its output rendered by ``pyte``."""

    def __init__(self, cmd: str, cwd: Path, cols: int, rows: int):
        import fcntl  # noqa: PLC0415
        import pty  # noqa: PLC0415
        import struct  # noqa: PLC0415
        import termios  # noqa: PLC0415

        import pyte  # noqa: PLC0415

        self.what = f"a pseudo-terminal rendered by pyte {getattr(pyte, '__version__', '')}".rstrip() + f", {cols}x{rows} (no tmux here)"
        self.screen_ = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen_)
        self.lock = threading.Lock()
        argv = shlex.split(cmd)
        pid, fd = pty.fork()
        if pid == 0:  # the child: its terminal has the size asked for before the command starts
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            os.chdir(cwd)
            os.environ.update(TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
            try:
                os.execvp(argv[0], argv)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.stream.feed(data)

    def screen(self) -> str:
        with self.lock:
            return "\n".join(self.screen_.display)

    def interrupt(self) -> None:
        os.write(self.fd, b"\x03")  # the terminal's Ctrl-C: SIGINT to its foreground process group

    def close(self) -> None:
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


def tidy(screen: str) -> str:
    """The screen without trailing blanks, the shell's prompt after the command, and blank lines at the end."""
    lines = [line.rstrip() for line in screen.splitlines()]
    return "\n".join(ln for ln in lines if not re.fullmatch(r"bash-[\d.]+[#$]", ln)).rstrip() + "\n"


def wait_for(term, done, what: str, timeout: float) -> str:
    """Poll the screen until ``done(screen)``; the screen (raises after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = term.screen()
        if done(text):
            time.sleep(0.5)  # let the last lines land
            return term.screen()
        time.sleep(0.25)
    raise SystemExit(f"watch_demo: no {what} within {timeout:.0f} s; the screen was:\n{term.screen()}")


def shown_version(screen: str) -> int:
    found = _VERSION.findall(screen)
    return int(found[-1]) if found and "Ctrl-C ends" in screen else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="folder for the captures (and the session's JSON)")
    ap.add_argument("--cudalab", default="cudalab", help="the command that runs cudalab")
    ap.add_argument("--n", default="8192", help="the transpose size")
    ap.add_argument("--cols", type=int, default=120)
    ap.add_argument("--rows", type=int, default=48)
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds to wait for each version")
    ap.add_argument("--terminal", choices=["auto", "tmux", "pyte"], default="auto")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cudalab-watch-demo-"))
    kernel = work / "my_transpose.cu"
    kernel.write_text(STEP1)
    session = args.out.resolve() / "watch-session.json"
    shown = (f"cudalab watch transpose --n {args.n} --variant naive,tiled-32x8 "
             f"--add my_transpose.cu:my_transpose@block=32x8,tile=32x32 --json watch-session.json")
    cmd = f"{args.cudalab} {shown.split(' ', 1)[1]}".replace("watch-session.json", shlex.quote(str(session)))
    use_tmux = args.terminal == "tmux" or (args.terminal == "auto" and shutil.which("tmux"))
    term = Tmux(cmd, work, args.cols, args.rows) if use_tmux else PyteTerminal(cmd, work, args.cols, args.rows)
    print(f"watch_demo: {shown}\n  in {term.what}; kernel {kernel}", flush=True)

    def keep(index: int, name: str, step: str, screen: str) -> None:
        path = args.out / f"watch-{index}-{name}.txt"
        head = f"$ {shown}\n# {step} · captured in {term.what}\n"
        path.write_text(head + tidy(screen))
        print(f"watch_demo: {path.name}: {step}", flush=True)

    try:
        screen = wait_for(term, lambda s: shown_version(s) >= 1, "first table", args.timeout)
        keep(1, "first", "the first run", screen)
        for i, (name, what, text) in enumerate(STEPS, 2):
            tmp = kernel.with_name(kernel.name + ".new")  # saved as an editor saves: a new file renamed over it
            tmp.write_text(text)
            os.replace(tmp, kernel)
            screen = wait_for(term, lambda s, v=i: shown_version(s) >= v, f"version {i}", args.timeout)
            keep(i, name, f"edit {i - 1}: {what}", screen)
        term.interrupt()
        screen = wait_for(term, lambda s: "watch ended" in s, "end after Ctrl-C", 30)
        keep(len(STEPS) + 2, "ctrl-c", "Ctrl-C", screen)
    finally:
        term.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
