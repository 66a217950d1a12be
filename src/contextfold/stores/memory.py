"""An in-process :class:`~contextfold.cache.BlobStore`: the test double and the choice for short scripts."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Sequence

from ..cache import BlobInfo, BlobStore
from ..cache.owners import OWNER_INFIX, parse_owner_key
from ..errors import RefNotFound

__all__ = ["MemoryBlobStore"]


class MemoryBlobStore(BlobStore):
    """Blobs in a dict, safe to share between threads. Nothing survives the process.

    Example:
        >>> store = MemoryBlobStore()
        >>> store.put("a", b"xyz")
        >>> store.get("a")
        b'xyz'
    """

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._accessed: dict[str, int] = {}
        self._claims: dict[str, set[str]] = {}  # tag -> refs it holds a claim key on (see claimed_refs)
        self._clock = itertools.count(1)
        self._lock = threading.RLock()  # (re-entered: put_new and put_if put under it)

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``."""
        value = bytes(data)
        with self._lock:
            self._data[key] = value
            self._accessed[key] = next(self._clock)
            if OWNER_INFIX in key:
                self._index_claim(key, add=True)

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store each ``(key, data)`` in order, under one hold of the lock."""
        values = [(key, bytes(data)) for key, data in items]
        with self._lock:
            for key, value in values:
                self._data[key] = value
                self._accessed[key] = next(self._clock)
                if OWNER_INFIX in key:
                    self._index_claim(key, add=True)

    def put_new(self, key: str, data: bytes) -> bool:
        """Store ``data`` under ``key`` unless it is there; True when stored (one step: under the lock)."""
        with self._lock:
            if key in self._data:
                return False
            self.put(key, data)
            return True

    def put_if(self, key: str, data: bytes | None, expected: bytes | None) -> bool:
        """Make ``key`` hold ``data`` (None: delete it) only when it holds ``expected`` (None: nothing); one step."""
        with self._lock:
            if self._data.get(key) != expected:
                return False
            if data is None:
                self.delete(key)
            else:
                self.put(key, data)
            return True

    def read_range(self, key: str, start: int, length: int) -> bytes:
        """Up to ``length`` bytes of ``key`` from ``start``."""
        if start < 0 or length < 0:
            raise ValueError(f"read_range: start and length must be >= 0, got start={start}, length={length}")
        with self._lock:
            value = self._data.get(key)
        if value is None:
            raise RefNotFound(key)
        return value[start : start + length]

    def get(self, key: str) -> bytes:
        """The whole value of ``key``."""
        with self._lock:
            value = self._data.get(key)
        if value is None:
            raise RefNotFound(key)
        return value

    def size(self, key: str) -> int | None:
        """Byte size of ``key`` or None."""
        with self._lock:
            value = self._data.get(key)
        return None if value is None else len(value)

    def delete(self, key: str) -> bool:
        """Remove ``key``."""
        with self._lock:
            self._accessed.pop(key, None)
            if OWNER_INFIX in key:
                self._index_claim(key, add=False)
            return self._data.pop(key, None) is not None

    def delete_unused(self, key: str, accessed: int) -> bool:
        """Remove ``key`` only when its access order is still ``accessed`` (one step: under the lock)."""
        with self._lock:
            if self._accessed.get(key) != accessed:
                return False
            return self.delete(key)

    def claimed_refs(self, tag: str) -> list[str]:
        """The refs ``tag`` holds a claim on, from the index :meth:`put` and :meth:`delete` keep."""
        with self._lock:
            return sorted(self._claims.get(tag, ()))

    def _index_claim(self, key: str, *, add: bool) -> None:
        """Add or remove a claim key in the per-tag index (the lock is held)."""
        parsed = parse_owner_key(key)
        if parsed is None:
            return
        ref_id, tag = parsed
        if add:
            self._claims.setdefault(tag, set()).add(ref_id)
            return
        refs = self._claims.get(tag)
        if refs is not None:
            refs.discard(ref_id)
            if not refs:
                del self._claims[tag]

    def entries(self) -> Iterator[BlobInfo]:
        """Every key, sorted, with size and access order."""
        with self._lock:
            infos = [BlobInfo(k, len(v), self._accessed[k]) for k, v in self._data.items()]
        return iter(sorted(infos, key=lambda i: i.key))

    def touch(self, key: str) -> None:
        """Mark ``key`` as just used."""
        with self._lock:
            if key in self._data:
                self._accessed[key] = next(self._clock)
