"""A run's shared state in the GPU worker: the device, the random generator and the per-run cache of device
objects (uploads, buffers a family makes once) that every variant of a point shares and that is freed at once."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["Context"]


class Context:
    """A run's shared state: the device, the random generator and a per-run cache (a family's
    ``setup`` reaches it through its :class:`~cudalab.families.model.SetupContext`)."""

    def __init__(self, device: Any, rng: np.random.Generator):
        self.device = device
        self.rng = rng
        self._shared: dict[Any, Any] = {}
        self._keep: list[np.ndarray] = []

    def upload(self, host: np.ndarray, pitched: bool = False) -> Any:
        """The device copy of a host array, uploaded once per run (keyed by the array itself, so
        every variant, and the roofline copy of the same input, share it)."""
        key = ("upload", id(host), pitched)
        if key not in self._shared:
            self._keep.append(host)  # keeps id(host) unique for the life of this context
            self._shared[key] = self.device.to_device(host, pitched=pitched)
        return self._shared[key]

    def uploads_of(self, host: np.ndarray) -> list[Any]:
        """The device copies :meth:`upload` made of ``host`` (plain and pitched): the judge refills them in place."""
        return [obj for key, obj in self._shared.items() if key[:2] == ("upload", id(host))]

    def uploaded_ids(self) -> set[int]:
        """The ``id`` of every host array :meth:`upload` has copied to the device in this run."""
        return {key[1] for key in self._shared if isinstance(key, tuple) and key[:1] == ("upload",)}

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """Return the object stored under ``key``, making it once (e.g. uploaded inputs)."""
        if key not in self._shared:
            self._shared[key] = make()
        return self._shared[key]

    def release(self, keep: np.ndarray | None = None) -> None:
        """Free everything made through :meth:`shared` and :meth:`upload`, except the upload of ``keep``
        (the roofline's source: the run's peak stays that of one variant)."""
        kept = {k: v for k, v in self._shared.items() if keep is not None and k[:2] == ("upload", id(keep))}
        for key, obj in self._shared.items():
            free = getattr(obj, "free", None)
            if key not in kept and callable(free):
                free()
        self._shared = kept
        self._keep = [keep] if kept else []
