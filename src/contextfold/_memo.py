"""Results computed from a text, remembered by the text's hash and bounded by the bytes they hold.

What contextfold reads of a message (its entities, the outcome lines of an output, a masked output's digest
material) is a function of its text, read once when the message is added and reused by every later compaction,
masking and read-ahead (issue 22). A memo keyed by the text itself would keep every text alive (a 3,000-turn
session at 128K grew from 195 to 631 MB that way); these memos keep the text's hash and length, never the text,
and evict the least recently used entries once their results take more than ``max_bytes``.

The key is ``(hash(text), len(text))``: ``str`` caches its hash, so a text is hashed once whatever the number of
lookups. Python's string hash is keyed per process (SipHash), so two texts of one session colliding is as unlikely
as guessing a 64-bit key; a collision would give one text's entities to another, never a crash.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

__all__ = ["TextMemo", "deep_size", "size_of_strings", "text_key"]

V = TypeVar("V")

# What one entry costs beside its values: the key tuple, the dict slot, the ordering (measured: ~200 bytes).
ENTRY_OVERHEAD_BYTES = 200
# A string's own header (CPython: 49 bytes for ASCII, more for wider kinds; the rough figure is enough to bound).
STRING_OVERHEAD_BYTES = 50


def text_key(text: str) -> tuple[int, int]:
    """The memo key of ``text``: its hash and length (the text itself is not kept)."""
    return hash(text), len(text)


def size_of_strings(values: Iterable[str]) -> int:
    """About the bytes ``values`` hold (each string's characters and header)."""
    held = values if isinstance(values, (list, tuple)) else list(values)
    return sum(map(len, held)) + STRING_OVERHEAD_BYTES * len(held)


class TextMemo(Generic[V]):
    """A thread-safe LRU of results by key, bounded by the bytes its results hold (as estimated by the caller).

    >>> memo: TextMemo[int] = TextMemo(max_bytes=1_000)
    >>> memo.get_or_compute(text_key("abc"), lambda: 3, lambda v: 8)
    3
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes: must be positive, got {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def bytes(self) -> int:
        """About the bytes the remembered results hold now."""
        return self._bytes

    def get(self, key: Hashable) -> V | None:
        """The result remembered under ``key`` (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, value: V, size: int) -> None:
        """Remember ``value`` (about ``size`` bytes) under ``key``; a result larger than the whole memo is not kept."""
        size += ENTRY_OVERHEAD_BYTES
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def get_or_compute(self, key: Hashable, compute: Callable[[], V], size: Callable[[V], int]) -> V:
        """The result under ``key``, computed (outside the lock) and remembered when missing."""
        found = self.get(key)
        if found is not None:
            return found
        value = compute()
        self.put(key, value, size(value))
        return value

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0


def deep_size(value: object) -> int:
    """A rough size in bytes of nested tuples/lists of strings (what the memos hold)."""
    if isinstance(value, str):
        return len(value) + STRING_OVERHEAD_BYTES
    if isinstance(value, tuple | list):
        return sys.getsizeof(value) + sum(deep_size(v) for v in value)
    return sys.getsizeof(value)
