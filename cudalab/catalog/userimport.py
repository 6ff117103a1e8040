"""Import a user's module (an outside family) so that nothing it does at import takes the command down.

In this process every exception is caught, ``SystemExit`` (``sys.exit`` at import) and
``KeyboardInterrupt`` included, and becomes one line naming the file (:func:`import_error`); an
exception whose ``__str__`` raises is named by its type. What no process survives in itself --
``os._exit``, a loop that never ends, a crash in an extension -- is met by a probe: before a version of
the module is first imported here, a child Python imports it under a time limit (:data:`TIMEOUT_S`,
``CUDALAB_IMPORT_TIMEOUT`` seconds), and only a module whose probe came back is imported in this
process. A probe that came back is remembered in the cache folder, keyed by the module's folder's
Python files (paths, sizes, modification times) and the Python running, so a command pays the probe
(~0.3 s, several in parallel) once after each edit and a stat of a few files afterwards.

Light: imports neither NumPy nor the family modules.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

#: How long a probe may import a module (seconds); ``CUDALAB_IMPORT_TIMEOUT`` sets another.
TIMEOUT_S = 20.0
#: Set in a probe's environment (to the parent's ``sys.path``): the probe imports in its own process,
#: from where the parent would, without probing again.
CHILD_ENV = "CUDALAB_IMPORT_PROBE"
_OK = "cudalab-probe: ok"
_ERROR = "cudalab-probe: error: "
#: (key, fingerprint) -> '' (imports cleanly) or the one line that says why not; for this process (an
#: edit makes a new fingerprint: ``cudalab watch`` probes the module again).
_VERDICTS: dict[tuple[str, str | None], str] = {}


def timeout_s() -> float:
    """:data:`TIMEOUT_S`, or ``CUDALAB_IMPORT_TIMEOUT`` when it is a positive number."""
    try:
        value = float(os.environ.get("CUDALAB_IMPORT_TIMEOUT", ""))
    except ValueError:
        return TIMEOUT_S
    return value if 0 < value < 1e6 else TIMEOUT_S


def line_in(exc: BaseException, path: str) -> int | None:
    """The line of the deepest traceback frame of ``exc`` in the file ``path`` (the user's), or None."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def import_error(exc: BaseException, path: str) -> str:
    """One line: the file, the line where Python gives one, and the error (never raises)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: SyntaxError: {exc.msg}"
    line = line_in(exc, path)
    name = type(exc).__name__
    try:
        text = str(exc).splitlines()[0] if str(exc) else ""
    except Exception:  # noqa: BLE001  (an exception whose __str__ raises: its type is what can be said)
        text = "(its message could not be shown: the exception's __str__ raised)"
    why = {"SystemExit": " (sys.exit at import)", "KeyboardInterrupt": " (interrupted)"}.get(name, "")
    return f"{path}{f':{line}' if line else ''}: importing it raised {name}{why}" + (f": {text}" if text else "")


def _origin(key: str) -> Path | None:
    """The module file behind a ``path:``/``entry:`` key (None: not found without importing it)."""
    if key.startswith("path:"):
        return Path(key[len("path:"):])
    import importlib.util  # noqa: PLC0415

    try:
        spec = importlib.util.find_spec(key[len("entry:"):])
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin else None


def fingerprint(key: str) -> str | None:
    """A digest of what the import of ``key`` reads of the user's: the Python files beside its module
    (paths, sizes, modification times) and this Python; None when they cannot be listed."""
    origin = _origin(key)
    if origin is None:
        return None
    h = hashlib.sha256(f"{key}\0{sys.executable}\0{sys.version}\0".encode())
    try:
        for p in sorted(origin.parent.glob("*.py")) + sorted(origin.parent.glob("*.pkl")):
            st = p.stat()
            h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    except OSError:
        return None
    return h.hexdigest()[:32]


def _cache(fp: str) -> Path:
    from cudalab import build  # noqa: PLC0415  (its cache folder; light)

    return build.cache_dir().parent / "imports" / f"{fp}.ok"


def _remember(fp: str | None) -> None:
    if fp is None:
        return
    try:
        path = _cache(fp)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:  # no cache: the next command probes again
        pass


def _known_good(fp: str | None) -> bool:
    return fp is not None and _cache(fp).is_file()


def check(keys: Sequence[str], where: dict[str, str] | None = None) -> dict[str, str]:
    """Probe every key not known to import cleanly, in parallel children; ``{key: ''}`` or why not.

    Args:
        keys: ``path:FILE`` / ``entry:MODULE`` keys of outside families.
        where: how messages name each key's module (default: its file).
    """
    if os.environ.get(CHILD_ENV):  # in a probe: it is the time-limited import itself
        return {k: "" for k in keys}
    todo: dict[str, tuple[str | None, subprocess.Popen]] = {}
    prints = {key: fingerprint(key) for key in dict.fromkeys(keys)}
    for key, fp in prints.items():
        if (key, fp) in _VERDICTS:
            continue
        if _known_good(fp):
            _VERDICTS[key, fp] = ""
            continue
        env = {**os.environ, CHILD_ENV: json.dumps(sys.path)}  # the probe imports from where this process would
        todo[key] = (fp, subprocess.Popen([sys.executable, "-m", "cudalab.catalog.probe", key], env=env,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          text=True, start_new_session=True))
    limit = timeout_s()
    deadline = time.monotonic() + limit
    for key, (fp, proc) in todo.items():
        _VERDICTS[key, fp] = _verdict(key, fp, proc, deadline, limit, (where or {}).get(key))
    return {k: _VERDICTS.get((k, prints[k]), "") for k in keys}


def _verdict(key: str, fp: str | None, proc: subprocess.Popen, deadline: float, limit: float,
             shown: str | None) -> str:
    """What one probe says: '' (it imported; remembered in the cache) or the line that says why not."""
    shown = shown or str(_origin(key) or key[key.index(":") + 1:])
    try:
        out, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill(proc)
        return (f"{shown}: importing it did not finish within {limit:g} s (a loop at import?); "
                "CUDALAB_IMPORT_TIMEOUT=SECONDS allows more")
    lines = out.splitlines()
    if _OK in lines:
        _remember(fp)
        return ""
    if any(ln.startswith(_ERROR) for ln in lines):
        return next(ln for ln in lines if ln.startswith(_ERROR))[len(_ERROR):]
    if proc.returncode < 0:
        return f"{shown}: importing it killed the process ({_signal_name(-proc.returncode)})"
    return f"{shown}: importing it ended the process (exit code {proc.returncode}: os._exit or a crash at import?)"


def _kill(proc: subprocess.Popen) -> None:
    """End a probe and whatever it started (its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"
