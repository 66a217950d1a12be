"""Values read back from a store that others can write to (a shared Redis, an SQLite file), checked as they come.

Anything another program, an older release or a hand edit left under our keys becomes a
:class:`~contextfold.errors.CorruptRecord` (a ``StoreError``) naming where it is stored, never a ValueError,
OverflowError or UnicodeDecodeError from deep inside a fleet worker, the proxy or a retrieval tool call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import CorruptRecord

__all__ = ["MAX_STORED_DIGITS", "stored_bytes", "stored_count", "stored_score", "stored_text"]

# Digits of a stored count (a version, a size, an access order): 10^20 is past any session's saves or any output's
# bytes; a longer number, like text or a fraction, was not written by contextfold.
MAX_STORED_DIGITS = 20


def stored_count(raw: object, where: str, what: str) -> int:
    """The whole number >= 0 stored as ``raw`` (an int, or its digits as text or bytes), else a StoreError.

    Args:
        raw: The stored value.
        where: The key, file or table it was read from, named in the error.
        what: What it counts (``version``, ``size``), named in the error.
    """
    if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw < 10**MAX_STORED_DIGITS:
        return raw
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
    if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= MAX_STORED_DIGITS:
        return int(text)
    raise CorruptRecord(f"{where}: the stored {what} {raw!r:.60} is no whole number >= 0 (not written by contextfold)")


def stored_text(raw: object, where: str) -> str:
    """A stored name or mark as text, or a StoreError naming ``where`` (not UTF-8, not text)."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bytes):
        try:
            return raw.decode()
        except UnicodeDecodeError:
            pass
    raise CorruptRecord(f"{where}: stored value {raw!r:.60} is no UTF-8 text (not written by contextfold)")


def stored_score(score: float, where: str, what: str) -> int:
    """A sorted-set score this store gave as a count (whole, finite, >= 0), else a StoreError naming ``where``."""
    if not (math.isfinite(score) and 0 <= score < 10**MAX_STORED_DIGITS and score == int(score)):
        raise CorruptRecord(f"{where}: the stored {what} {score!r} is no whole number >= 0 "
                            "(not written by contextfold)")
    return int(score)


def stored_bytes(parts: Sequence[object], where: str) -> bytes:
    """The stored pieces joined, or a StoreError naming ``where`` when one is no bytes (text or a number)."""
    if not all(isinstance(part, bytes) for part in parts):
        raise CorruptRecord(f"{where}: a stored chunk is no bytes (not written by contextfold)")
    return b"".join(parts)  # type: ignore[arg-type]  # (all bytes, checked above)
