"""Connecting to a Dask scheduler within a bounded time (``--cluster tcp://HOST:PORT``): something that is not a
scheduler answers in one line, and a client Dask half made is not left to wait at exit."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

__all__ = ["connect", "one_line"]


def one_line(exc: BaseException) -> str:
    """An error's first line (at most 200 characters), or its type's name when it says nothing."""
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]


def connect(client: Any, address: str, timeout: float) -> Any:
    """A Dask client of the scheduler at ``address``, within ``timeout`` seconds and a little: something that
    accepts the connection and never speaks Dask (an HTTP server, a silent listener) holds Dask's own
    handshake past its timeout, so the wait is bounded here (the thread left behind is a daemon).

    Raises:
        TimeoutError: no scheduler answered in time. ConnectionError: what Dask raised, in words.
    """
    box: dict[str, Any] = {}

    def connect() -> None:
        try:
            box["client"] = client(address, timeout=timeout, set_as_default=False)
        except BaseException as exc:  # noqa: BLE001  (handed to the caller's thread)
            box["error"] = f"{type(exc).__name__}: {one_line(exc)}"
            _forget_half_made(exc, client)

    t = threading.Thread(target=connect, name="cudalab-dask-connect", daemon=True)
    t.start()
    t.join(timeout + 2.0)
    if t.is_alive():
        raise TimeoutError(f"nothing answered as a Dask scheduler within {timeout + 2.0:.0f} s")
    if "error" in box:
        raise ConnectionError(box["error"])
    return box["client"]


def _forget_half_made(exc: BaseException, client: type) -> None:
    """Mark closed the client whose constructor raised ``exc``: its ``__del__`` would close it at exit, waiting
    twice the connect timeout on a loop that never connected (the user saw one line, then 20 s of nothing)."""
    tb = exc.__traceback__
    while tb is not None:
        half = tb.tb_frame.f_locals.get("self")
        if isinstance(half, client):
            with contextlib.suppress(Exception):
                half.status = "closed"
                half._loop_runner.stop()
        tb = tb.tb_next
