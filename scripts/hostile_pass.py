"""A hostile pass as a new user would make it: each invocation of :mod:`hostile_cases` runs in a fresh, empty
workspace of its own and is judged on what it printed and what it left on disk.

Run it from the repository root with cudalab installed::

    python scripts/hostile_pass.py [--jobs 3] [--only CLASS] [-v]

Each invocation gets a temp folder (the workspace: its cwd, HOME, XDG_CACHE_HOME, CUDALAB_CACHE and TMPDIR
all point into it) holding saved runs, files a user keeps and hostile inputs (FIFOs, links to ``/dev/zero``,
another program's SQLite database, links to a *sentinel* folder outside the workspace). It runs in its own
process group under a 60 s timeout (the whole group is killed past it) and is classified:

- traceback: ``Traceback (most recent call last)`` on stdout or stderr (no ``--debug`` is ever passed);
- hang: still running after the timeout (or, for an interrupt, after Ctrl-C);
- files changed: a file of the workspace created, changed (size, mtime, sha256) or removed that the
  invocation did not name as an output (the cache, HOME and TMPDIR may grow, but a file planted there that is
  changed counts);
- writes outside: anything in the sentinel folder changed, except through a link the invocation named as
  an output;
- not one line: a refused input (exit 2, or a case that must be refused) that did not print exactly one line
  on stderr (``warning:`` lines aside), or an exit status that is neither 0, 1 nor 2.

Prints one table per class and the totals; exits 1 on any traceback, hang or damage.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from hostile_cases import CASES, Case  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "tests" / "data" / "runs"
TIMEOUT = 60.0
#: Folders of the workspace that cudalab may grow (its own cache, HOME, temp files).
GROWS = ("cache", "home", "tmp")
KERNEL = """extern "C" __global__ void axpy(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += 2.0f * x[i];
}
"""


def _sqlite(path: Path) -> None:
    """Another program's database: a table of its own, no Optuna tables."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    con.execute("INSERT INTO contacts VALUES ('ada', '555-0100')")
    con.commit()
    con.close()


def plant(ws: Path, sent: Path) -> None:
    """The workspace every invocation starts from, and the sentinel folder outside it."""
    (sent / "secret.txt").write_text("the user's own file outside the workspace\n")
    _sqlite(sent / "other.db")
    for sub in ("home", "cache", "tmp", "dir", "fam"):
        (ws / sub).mkdir()
    shutil.copy(RUNS / "nvidia-h200-transpose.json", ws / "run.json")
    shutil.copy(RUNS / "nvidia-h200-transpose.json", ws / "run_b.json")
    shutil.copy(RUNS / "h100-transpose.json", ws / "run2.json")
    shutil.copy(ROOT / "tests" / "data" / "kt" / "axpy-cache.json", ws / "kt.json")
    (ws / "keep.txt").write_text("notes the user keeps\n")
    (ws / "k.cu").write_text(KERNEL)
    (ws / "empty.db").write_bytes(b"")
    _sqlite(ws / "other.db")
    _sqlite(ws / "ro.db")
    os.chmod(ws / "ro.db", 0o444)
    os.mkfifo(ws / "fifo")
    os.mkfifo(ws / "fifo.cu")
    os.mkfifo(ws / "fifo.json")
    links = {"link_other.db": "other.db", "link_run.svg": "run.json", "link_run.html": "run.json",
             "link_run.png": "run.json", "link_kt.json": "kt.json", "dangling.db": str(ws / "nowhere" / "x.db"),
             "dangling.json": str(ws / "nowhere.json"), "zero": "/dev/zero", "zero.cu": "/dev/zero",
             "zero.json": "/dev/zero", "full.svg": "/dev/full", "full.json": "/dev/full", "full.h": "/dev/full",
             "out_secret.txt": str(sent / "secret.txt"), "out_db": str(sent / "other.db"),
             "out_secret.svg": str(sent / "secret.txt"), "out_secret.json": str(sent / "secret.txt"),
             "out_dir": str(sent)}
    for name, target in links.items():
        os.symlink(target, ws / name)


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed, FIFOs never opened): path -> what it is."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            try:
                st = p.lstat()
            except OSError:
                continue
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_file():
                try:
                    digest = hashlib.sha256(p.read_bytes()).hexdigest()
                except OSError:
                    digest = "unreadable"
                out[rel] = ("file", st.st_size, st.st_mtime_ns, digest, st.st_mode)
            elif p.is_dir():
                out[rel] = ("dir", st.st_mode)
            else:
                out[rel] = ("other", st.st_mode)
    return out


def diff(before: dict, after: dict) -> list[str]:
    """The paths created, changed or removed between two snapshots."""
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


@dataclass
class Result:
    case: Case
    rc: int | None = None
    out: str = ""
    err: str = ""
    seconds: float = 0.0
    flags: dict[str, str] = field(default_factory=dict)


def _env(ws: Path, case: Case) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDALAB", "PYTEST", "COV_"))}
    env.update(HOME=str(ws / "home"), XDG_CACHE_HOME=str(ws / "home" / ".cache"), CUDALAB_CACHE=str(ws / "cache"),
               TMPDIR=str(ws / "tmp"), MPLCONFIGDIR=str(ws / "home" / "mpl"), COLUMNS="120",
               PYTHONDONTWRITEBYTECODE="1")
    for k, v in case.env.items():
        env[k] = v.replace("{ws}", str(ws))
    return env


def _launch(argv: list[str], ws: Path, env: dict[str, str]) -> subprocess.Popen:
    # its own process group: a hang is killed whole, and Ctrl-C goes to the group as a terminal sends it
    return subprocess.Popen(argv, cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[int | None, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err


def run_case(case: Case) -> Result:
    """Run one case in a fresh workspace and classify it."""
    res = Result(case)
    with tempfile.TemporaryDirectory(prefix="hostile-ws-") as w, tempfile.TemporaryDirectory(prefix="hostile-s-") as s:
        ws, sent = Path(w), Path(s)
        plant(ws, sent)
        if case.setup:
            case.setup(ws, sent)
        before, sbefore = snapshot(ws), snapshot(sent)
        env = _env(ws, case)
        argv = case.argv(ws, sent)
        t0 = time.monotonic()
        procs = [_launch(argv, ws, env) for _ in range(case.copies)]
        if case.interrupt is not None:
            time.sleep(case.interrupt)
            for p in procs:
                try:
                    os.killpg(p.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
        got = [_wait(p, TIMEOUT) for p in procs]
        res.seconds = time.monotonic() - t0
        res.rc = got[0][0]
        res.out = "\n".join(g[1] for g in got)
        res.err = "\n".join(g[2] for g in got)
        after, safter = snapshot(ws), snapshot(sent)
        os.chmod(ws / "ro.db", 0o644) if (ws / "ro.db").exists() and not (ws / "ro.db").is_symlink() else None
        _classify(res, [g[0] for g in got], ws, sent, before, after, sbefore, safter)
        for p in ws.rglob("*"):  # a read-only folder the command made must not stop the clean-up
            if p.is_dir() and not p.is_symlink():
                os.chmod(p, 0o755)
    return res


def _classify(res: Result, rcs: list, ws: Path, sent: Path, before: dict, after: dict, sbefore: dict,
              safter: dict) -> None:
    case = res.case
    text = res.out + res.err
    if "Traceback (most recent call last)" in text:
        res.flags["traceback"] = text[text.index("Traceback"):][-400:].strip().splitlines()[-1]
    if any(rc is None for rc in rcs):
        res.flags["hang"] = f"still running after {TIMEOUT:.0f}s"
    outputs = {o.replace("{ws}", str(ws)).replace("{sent}", str(sent)) for o in case.outputs}
    named = {str(Path(o).relative_to(ws)) if o.startswith(str(ws)) else o for o in outputs}
    changed = []
    for k in diff(before, after):
        if k in named or k.split("/")[0] in GROWS and k not in before:
            continue
        changed.append(k)
    if changed:
        res.flags["files changed"] = ", ".join(changed[:4])
    allowed = set()
    for o in named:  # a link the user named as an output: writing through it is theirs to ask
        p = ws / o
        if p.is_symlink() and os.readlink(p).startswith(str(sent)):
            allowed.add(str(Path(os.readlink(p)).relative_to(sent)))
    outside = [k for k in diff(sbefore, safter) if k not in allowed]
    if outside:
        res.flags["writes outside"] = ", ".join(outside[:4])
    lines = [ln for ln in res.err.splitlines() if ln.strip() and not ln.startswith("warning:")]
    for rc in rcs:
        if rc is None:
            continue
        if case.interrupt is not None and rc in (0, 1, 2, 130, -2):
            continue
        if rc not in (0, 1, 2):
            res.flags["not one line"] = f"exit {rc}"
        elif case.refuse and rc != 2:
            res.flags["not one line"] = f"exit {rc}, wanted a refusal (2)"
        elif rc == 2 and len(lines) != case.copies:
            res.flags["not one line"] = f"{len(lines)} lines on stderr"
        elif case.max_err is not None and len(res.err.splitlines()) > case.max_err:
            res.flags["not one line"] = f"{len(res.err.splitlines())} lines on stderr"


def _guarded(case: Case) -> Result:
    """run_case, a failure of the harness itself said as the case's (the pass goes on)."""
    try:
        return run_case(case)
    except Exception as exc:  # noqa: BLE001 - one broken case must not hide the others' results
        res = Result(case)
        res.flags["harness"] = f"{type(exc).__name__}: {exc}"
        return res


KINDS = ("traceback", "hang", "files changed", "writes outside", "not one line")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--only", help="one class")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each failure's output")
    a = ap.parse_args()
    cases = [c for c in CASES if not a.only or c.klass == a.only]
    with cf.ThreadPoolExecutor(a.jobs) as pool:
        results = list(pool.map(_guarded, cases))
    classes = list(dict.fromkeys(c.klass for c in cases))
    totals = dict.fromkeys(KINDS, 0)
    print(f"{'class':<12} {'invocations':>11} " + " ".join(f"{k:>14}" for k in KINDS))
    for k in classes:
        rs = [r for r in results if r.case.klass == k]
        counts = [sum(1 for r in rs if kind in r.flags) for kind in KINDS]
        for kind, n in zip(KINDS, counts):
            totals[kind] += n
        print(f"{k:<12} {len(rs):>11} " + " ".join(f"{n:>14}" for n in counts))
    print(f"{'total':<12} {len(results):>11} " + " ".join(f"{totals[k]:>14}" for k in KINDS))
    bad = [r for r in results if r.flags]
    for r in bad:
        note = f" [{r.case.note}]" if r.case.note else ""
        print(f"\n[{r.case.klass}] {r.case.text}{note}  (exit {r.rc}, {r.seconds:.1f}s)")
        for kind, why in r.flags.items():
            print(f"    {kind}: {why}")
        if a.verbose:
            print("    stderr: " + "\n            ".join(r.err.strip().splitlines()[-6:]))
    return 1 if any(totals[k] for k in KINDS[:4]) else 0


if __name__ == "__main__":
    sys.exit(main())
