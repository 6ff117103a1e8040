"""A worker's first point, planned while its GPU comes up.

The parent sends a point as soon as it has one, without waiting for the worker's ``ready``
(:meth:`cudalab.execute.local.drive.Session._point`). A worker whose GPU is still starting in the background
(:mod:`cudalab.worker.warm`: the driver, the context, a pinned buffer; about 0.3 s) reads that first operation
meanwhile and, for a point, reads its plan and draws its inputs: at 16384² that is 0.12 s of host work
the worker would otherwise do after ``ready``. The run's random generator is consumed in the same order
either way, so the inputs are the ones the point would have drawn anyway.

Nothing is sent before ``ready``: a point that cannot be prepared here is read again once the GPU is
open, and says what is wrong then.
"""

from __future__ import annotations

import select
import threading
from typing import Any, Callable, TextIO

from cudalab.worker.protocol import decode

#: How often the GPU's start is looked at while no operation has come.
POLL_S = 0.01

_importing: list[threading.Thread] = []


def first_point(inp: TextIO, opening: Callable[[], bool], poll_s: float = POLL_S) -> tuple[str, Any] | None:
    """The parent's first operation if it comes while ``opening()`` holds, with the run of a point read
    and its inputs drawn (None in its place when it is no point or cannot be planned); None when the GPU
    was up before any operation came, or ``inp`` cannot be waited on."""
    try:
        fd = inp.fileno()
    except (AttributeError, OSError, ValueError):  # not a pipe (a test's StringIO): no waiting on it
        return None
    while True:
        ready, _, _ = select.select([fd], [], [], poll_s)
        if ready:
            line = inp.readline()
            return (line, _plan(line)) if line else None
        if not opening():
            return None


def _plan(line: str) -> Any:
    msg = decode(line)
    if msg is None or msg.get("op") != "point":
        return None
    from cudalab import memplan  # noqa: PLC0415  (the worker imports these while its GPU starts)
    from cudalab.plan import Plan  # noqa: PLC0415  (likewise)
    from cudalab.worker.executor import FamilyRun  # noqa: PLC0415  (likewise)

    try:
        run = FamilyRun(Plan.from_dict(msg["plan"]), None)
        # this host must hold the inputs before any is drawn (the parent checked its own host)
        if not memplan.plan(run.family, run.problem, None, memplan.host_available()).host_fits:
            return None
        if any(v.kind == "library" for v in run.variants):
            _start_import("cupy")
        if run.variants:
            run.prepare()
    except Exception:  # read again with the GPU open, where its error becomes the point's answer
        return None
    return run


def _start_import(name: str) -> None:
    """Import ``name`` in a thread: CuPy's import (0.2-0.4 s) then runs while the inputs are drawn and the
    GPU opens, not at its row. Every row waits for it (:func:`settle`): an import beside a row's host
    clock stretched a NumPy sum from 20 ms to 53."""
    def run() -> None:
        try:
            __import__(name)
        except Exception:  # its row imports it again and says what is wrong
            pass

    t = threading.Thread(target=run, name=f"cudalab-import-{name}", daemon=True)
    t.start()
    _importing.append(t)


def settle() -> None:
    """Wait for the imports the first point started (before any row runs)."""
    while _importing:
        _importing.pop().join()
