"""``--devices``: which GPUs a run spreads its points over."""

from __future__ import annotations

from cudalab.errors import UsageError
from cudalab.execute.local.drive import Session

__all__ = ["parse_devices", "device_list"]


def parse_devices(text: str | None, default: int) -> list[int] | None:
    """``--devices``: a list of GPU indices, None for ``all``, ``[default]`` when not given.

    Raises:
        UsageError: not ``all`` nor a comma list of distinct whole numbers >= 0.
    """
    if text is None:
        return [default]
    if text.strip().lower() == "all":
        return None
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--devices {text!r} is not 'all' nor a list of GPU indices (example: --devices 0,1)") from None
    if not out or any(d < 0 for d in out) or len(set(out)) != len(out):
        raise UsageError(f"--devices {text!r} must name distinct GPU indices >= 0 (example: --devices 0,1)")
    return out


def device_list(text: str | None, default: int) -> list[int]:
    """``--devices`` as GPU indices, asking a worker how many there are for ``all``.

    Raises:
        UsageError: a bad list.
        WorkerError: ``all`` and no worker could open a GPU.
    """
    devices = parse_devices(text, default)
    if devices is not None:
        return devices
    session = Session([default])
    try:
        return list(range(session.count()))
    finally:
        session.close()
