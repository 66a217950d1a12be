"""The :class:`BlobStore` protocol: where whole tool outputs live while the context keeps a view of them.

A blob store maps string keys to immutable bytes. It is deliberately small so that a third party can back it with
anything (a dict, SQLite, Redis, S3): ``put``, ``read_range``, ``size``, ``delete`` and ``entries`` are the
required methods; ``get``, ``exists``, ``touch``, ``put_many``, ``delete_unused`` and ``close`` have defaults that
subclasses inherit.

One key shape is known to stores: ``<ref>.owner.<tag>``, a session's claim on an output
(:mod:`contextfold.cache.owners`). A store may index claims by ``tag`` (:meth:`BlobStore.claimed_refs`), so that a
session finds its outputs without listing everyone's; one that does not answers None and the cache lists instead.

The protocol is part of the pure core, so that the cache and retrieval can name it without importing an edge;
the backends in :mod:`contextfold.stores` implement it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..errors import RefNotFound

__all__ = ["BlobInfo", "BlobStore"]


@dataclass(frozen=True, slots=True)
class BlobInfo:
    """What a store knows about one key without reading it.

    ``accessed`` orders entries from least to most recently used; only its order is meaningful.
    """

    key: str
    size: int
    accessed: int


@runtime_checkable
class BlobStore(Protocol):
    """Immutable bytes by key, readable by range so that a slice never loads the whole blob.

    Example:
        >>> from contextfold.stores.memory import MemoryBlobStore
        >>> store = MemoryBlobStore()
        >>> store.put("k", b"hello world")
        >>> store.read_range("k", 6, 5)
        b'world'
    """

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` atomically (a reader sees all of it or none), replacing any old value."""
        ...

    def read_range(self, key: str, start: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``start`` (fewer at the end); raises ``RefNotFound`` for an unknown key."""
        ...

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store each ``(key, data)`` of ``items``, in their order, as :meth:`put` would.

        Storing a new output writes its line index, itself and its session's claim: one call for the three (issue 22:
        each store call took a lock of its own in the masking turn). The default puts them one by one, in order (a
        crash in between leaves the earlier ones, which is why the cache orders them); the stores of
        :mod:`contextfold.stores` that hold their data in the process or a file write them in one step.
        """
        for key, data in items:
            self.put(key, data)

    def put_new(self, key: str, data: bytes) -> bool:
        """Store ``data`` under ``key`` only when the store holds no ``key``; True when stored.

        Two workers appending under one key: one wins, the other learns it lost (a secret memory's records). The
        default checks then writes, which another process can slip between; the stores of :mod:`contextfold.stores`
        do both in one step. A store whose sessions' secret memories more than one worker saves must override it
        with one step (the memory warns, naming the class, about a store that keeps the default).
        """
        if self.exists(key):
            return False
        self.put(key, data)
        return True

    def put_if(self, key: str, data: bytes | None, expected: bytes | None) -> bool:
        """Compare-and-set: make ``key`` hold ``data`` only when it holds ``expected`` now; True when done.

        None stands for no value, on either side: ``expected=None`` writes only where no ``key`` is (as
        :meth:`put_new`), ``data=None`` deletes. What a worker read and decided on is what it replaces: a secret
        memory's note and bases, which another worker may write between the read and the write. The default reads,
        compares, then writes (another process can slip between); the stores of :mod:`contextfold.stores` do it in
        one step. A store whose sessions' secret memories more than one worker saves must override it with one step
        (the memory warns, naming the class, about a store that keeps the default: secrets can be lost).
        """
        try:
            held: bytes | None = self.get(key)
        except RefNotFound:
            held = None
        if held != expected:
            return False
        if data is None:
            self.delete(key)
        else:
            self.put(key, data)
        return True

    def delete_unused(self, key: str, accessed: int) -> bool:
        """Remove ``key`` only when its access order is still ``accessed`` (as :meth:`entries` listed it); True if so.

        Collection decides on what it listed: an output no session claimed for the age. A session that claims it
        meanwhile (a new one storing the same output) writes its claim, then touches the output, which moves its
        access order: the delete is then refused, in one step with the compare. The stores of
        :mod:`contextfold.stores` do it in one step. The default is **no** compare-and-delete: it deletes ``key``
        (as :meth:`delete`), since a store's only way to read one key's access order is to list them all, and
        retention deletes many outputs per listing (s20f's default listed the store per delete: quadratic). A store
        shared by sessions of more than one process that collect it should override it.
        """
        return self.delete(key)

    def size(self, key: str) -> int | None:
        """The byte size of ``key``, or None when the store does not hold it."""
        ...

    def delete(self, key: str) -> bool:
        """Remove ``key``; True when it was there."""
        ...

    def entries(self) -> Iterator[BlobInfo]:
        """Every key with its size and last-access order, sorted by key."""
        ...

    def get(self, key: str) -> bytes:
        """The whole value of ``key``; raises ``RefNotFound`` when missing."""
        n = self.size(key)
        if n is None:
            raise RefNotFound(key)
        return self.read_range(key, 0, n)

    def exists(self, key: str) -> bool:
        """Whether the store holds ``key``."""
        return self.size(key) is not None

    def touch(self, key: str) -> None:
        """Mark ``key`` as just used, for least-recently-used eviction (a no-op by default)."""
        return None

    def close(self) -> None:
        """Release connections and files (a no-op by default)."""
        return None

    def losses(self) -> int:
        """How many times the store may have lost what it held since it was opened (a server that restarted empty).

        Asked before every model call, so it must be cheap: no round trip per call (a counter the backend keeps).
        0, the default, for a store that never forgets on its own.
        """
        return 0

    def claimed_refs(self, tag: str) -> list[str] | None:
        """The refs ``tag`` holds a claim key on (``<ref>.owner.<tag>``), from an index the store keeps.

        O(the session's claims), not O(the store): a grep over "all of a session's outputs" runs it on every call.
        The outputs themselves may be gone (the caller checks). None, the default, when the store keeps no such
        index: the cache then finds the claims by listing :meth:`entries`.
        """
        return None

    def missing(self, keys: Sequence[str]) -> set[str]:
        """The keys among ``keys`` the store does not hold (a backend with a network answers in one round trip)."""
        return {key for key in keys if not self.exists(key)}
