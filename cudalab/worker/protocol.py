"""The messages between cudalab and its GPU workers: one JSON object a line, in both directions.

The parent writes operations to the worker's standard input; the worker writes events to a pipe of
its own (its standard output and error stay free for what a kernel's ``printf`` or a library prints).

Operations (parent → worker), each an object with ``op``:

- ``point``: ``{"op": "point", "id": I, "plan": Plan}`` — run the planned point's variants (all of
  them but those named in ``plan.request.done``), streaming one ``row`` event per finished variant,
  then ``done``. The plan (:meth:`cudalab.plan.Plan.to_dict`) is the parent's: the worker plans nothing.
- ``roofline``: ``{"op": "roofline", "id": I, "plan": Plan}`` — measure the copy roofline on that
  point's bytes (its inputs drawn again from the plan's seed in a fresh worker), then ``roofline``.
- ``info``: ``{"op": "info", "mib": M, "bandwidth": true}`` — the GPU's facts, free memory and copy
  roofline (``cudalab info``), answered by ``info``.
- ``exit``: finish; the worker answers ``bye`` with its telemetry summary.

Events (worker → parent), each an object with ``ev``:

- ``ready`` (``device``: the GPU's facts, ``pid``) or ``error`` (``message``, ``exit_code``): once, first.
- ``stage`` (``variant``, ``stage``: ``preparing`` | ``reused`` (the last point's inputs: :mod:`cudalab.worker.kept`) |
  ``compiling`` | ``running``, ``watch``: whether the watchdog times this stage) and ``beat`` (alive between GPU waits).
- ``row`` (``row``: a :class:`~cudalab.records.results.Result` dict; ``output``: the result array with
  ``keep_outputs``), ``done`` (``id``; ``inputs`` with ``keep_outputs``), ``refused`` (``id``,
  ``message``, ``exit_code``: the point cannot run at all, e.g. its memory plan does not fit).
- ``roofline`` (``id``, ``roofline``: a :class:`~cudalab.records.results.Roofline` dict or null, ``reason``).
- ``info`` (``device``, ``free``, ``roofline`` or null, ``reason``).
- ``lost`` (``reason``): the CUDA context is broken (a sticky error); the worker exits after it.
- ``bye`` (``telemetry``).

A line that does not parse (a worker that died while writing) is not a message.

A child run under a tool (ncu, compute-sanitizer; :mod:`cudalab.worker.child`) answers once, in a file: a
:class:`ChildResult`.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass
from typing import Any

#: The largest message line read (bytes): a row with its raw samples is a few hundred kB at most.
MAX_LINE = 64 << 20


def encode(msg: dict[str, Any]) -> bytes:
    """One message as a JSON line."""
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode("utf-8")


def decode(line: bytes | str) -> dict[str, Any] | None:
    """The message of one line, or None when the line is not a whole message (half-written, garbage)."""
    if isinstance(line, bytes):
        if not line.endswith(b"\n"):
            return None
        line = line.decode("utf-8", errors="replace")
    elif not line.endswith("\n"):
        return None
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    if not isinstance(msg, dict) or not (isinstance(msg.get("ev"), str) or isinstance(msg.get("op"), str)):
        return None
    return msg


def pack_array(a: Any) -> str:
    """An array as text for a message (``np.save`` bytes in base64: dtype and shape travel with it)."""
    import numpy as np  # noqa: PLC0415  (the parent starts workers before it imports NumPy)

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def unpack_array(text: str) -> Any:
    """Read :func:`pack_array`'s output."""
    import numpy as np  # noqa: PLC0415

    return np.load(io.BytesIO(base64.b64decode(text)), allow_pickle=False)


@dataclass(frozen=True)
class ChildResult:
    """What a child run wrote back: its rows, or why it could not run."""

    rows: tuple[Any, ...] = ()  # Result rows
    error: str = ""

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return {"rows": [r.to_dict() for r in self.rows], "error": self.error}

    @classmethod
    def from_dict(cls, d: dict) -> "ChildResult":
        """Read :meth:`to_dict`'s output."""
        from cudalab.records.results import Result  # noqa: PLC0415  (NumPy: the parent starts workers before it)

        return cls(rows=tuple(Result.from_dict(r) for r in d.get("rows", ())), error=str(d.get("error", "")))
