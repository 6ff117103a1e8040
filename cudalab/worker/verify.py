"""The verified launches: two poisons, the element check, unwritten elements, row padding, extra checks.

A kernel that leaves an element unwritten returns whatever the poison put there. One poison can
happen to be a legal value (0xFF bytes are -1 in int32, a valid partial sum), so the verified
launch runs twice, with two byte patterns: an element that differs between the two results was
never written, whatever the tolerance. A pitched output's row padding is poisoned too; a byte of it
that no longer holds the pattern after the launch is a stray write the element check cannot see.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from cudalab.families.model import Case, Check
from cudalab import hostwork
from cudalab.worker import heartbeat
from cudalab.hostwork import RowChunks

#: The two poison byte patterns: 0xFF (NaN for floats, -1 for ints) and 0x7F (3.4e38 in float32,
#: 1.4e306 in float64, 2139062143 in int32): no element value is both.
POISONS = (0xFF, 0x7F)


@dataclass(frozen=True)
class Verdict:
    """The outcome of the verified launches.

    Attributes:
        check: the element check that decides (the first failing one, else the first launch's).
        output: the first verified launch's result (kept for ``--show``).
        unwritten: elements that differ between the two poisons (never written).
        padding: padding bytes of pitched outputs that lost the poison (stray writes).
    """

    check: Check
    output: Any
    unwritten: int = 0
    padding: int = 0

    @property
    def ok(self) -> bool:
        """Every test passed."""
        return self.check.ok and not self.unwritten and not self.padding

    @property
    def reason(self) -> str:
        """One line for the row ('' when ok)."""
        parts = []
        if not self.check.ok:
            parts.append(f"{self.check.what} {self.check.max_error:.3g} > {self.check.tolerance:.3g}{self.check.detail}")
        if self.unwritten:
            parts.append(f"{self.unwritten} elements unwritten (differ between two poisons)")
        if self.padding:
            parts.append(f"{self.padding} padding bytes of a pitched output overwritten")
        return "; ".join(parts)


def count_differing(a: Any, b: Any) -> int:
    """Elements whose bytes differ between two results (NaN equals NaN here: same bytes).

    Results of different shape or dtype count as entirely different.
    """
    a = np.ascontiguousarray(np.asarray(a))
    b = np.ascontiguousarray(np.asarray(b))
    if a.shape != b.shape or a.dtype != b.dtype:
        return max(a.size, b.size, 1)
    if a.size == 0:
        return 0
    if a.dtype.hasobject:
        return int(np.count_nonzero(a.ravel() != b.ravel()))
    ab = a.reshape(-1).view(np.uint8).reshape(a.size, -1)
    bb = b.reshape(-1).view(np.uint8).reshape(b.size, -1)
    return int(np.count_nonzero((ab != bb).any(axis=1)))


def same_bytes(a: Any, b: Any) -> bool:
    """Whether two results are plain arrays of one shape and dtype holding the same bytes (False
    when that cannot be told cheaply: a chunked or object result, or no parallel memcmp)."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.dtype.hasobject:
        return False
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(hostwork.bytes_equal(a, b))


def padding_damage(raw: np.ndarray, row_bytes: int, byte: int) -> int:
    """Bytes of the row padding (columns ``row_bytes`` and beyond of ``raw``) that are not ``byte``.

    Args:
        raw: uint8 rows of the allocation, shape (rows, bytes) (``DeviceArray.download_padding``
            gives only the padding: ``row_bytes`` 0).
        row_bytes: bytes of data in a row.
        byte: the poison pattern the padding was filled with.
    """
    raw = np.asarray(raw, dtype=np.uint8)
    if raw.ndim != 2 or raw.shape[1] <= row_bytes:  # no padding
        return 0
    return int(np.count_nonzero(raw[:, row_bytes:] != np.uint8(byte)))


def verified_launches(case: Case, launch: Callable[[], None], check: Callable[[Any], Check],
                      twice: bool = True, extra: bool = True) -> Verdict:
    """Run the verified launch once per poison pattern and judge the results.

    Args:
        case: the variant's case (``reset``, ``poison``, ``result``, ``padded``, ``extra_checks``).
        launch: runs ``case.run`` and waits for it (synchronises).
        check: the family's element check of one result.
        twice: False runs one poison only (rows whose poison is a no-op, host rows, runs under a
            tool, where each launch is profiled).
        extra: run ``case.extra_checks`` too (not under a tool: their launches would be profiled
            as if they were the variant's).
    """
    patterns: tuple[int, ...] = POISONS if twice else POISONS[:1]
    outputs = []
    first_bad: Check | None = None
    first: Check | None = None
    padding = 0
    for byte in patterns:
        case.reset()
        case.poison(byte)
        launch()
        out = case.result()
        for arr in case.padded:  # only the padding bytes travel, however large the array
            padding += padding_damage(arr.download_padding(), 0, byte)
        with heartbeat.host_work():
            same = bool(outputs) and same_bytes(outputs[0], out)
        if same:
            # The second poison's result is the first's, byte for byte: it was written everywhere
            # (an unwritten element would hold the other poison) and its check is the first's.
            # At 16384² that saves a second full check and the element-wise count on the host.
            break
        outputs.append(out)
        chk = check(out)
        first = first or chk
        if not chk.ok and first_bad is None:
            first_bad = chk
        if isinstance(out, RowChunks):
            # A chunked result is checked bit for bit, as it downloads, against a finite reference: the
            # 0xFF poison (NaN) can never pass for a written value, so one poison is proof enough,
            # and the host never has to hold two full results to compare them.
            break
    for more in case.extra_checks if extra else ():
        for byte in patterns:
            chk = more(byte)
            if not chk.ok and first_bad is None:
                first_bad = chk
    with heartbeat.host_work():  # seconds at the largest sizes, with no kernel to wait for
        unwritten = count_differing(outputs[0], outputs[1]) if len(outputs) == 2 else 0
    return Verdict(check=first_bad or first, output=outputs[0], unwritten=unwritten, padding=padding)
