"""Two workers sharing one secret memory store, made to interleave at a chosen store operation.

Shared by the secret memory's red-team tests (``test_redteam15``, ``16``, ``17``): the stores they run over, the
values the workers learn and save, and a store wrapper that runs the other worker's work once, just before (or just
after) the first chosen operation on a key matching a pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from contextfold.cache.blobs import BlobStore
from contextfold.redact import SecretMemory
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore

__all__ = ["STORE_KINDS", "HookedStore", "Secrets", "opened_store"]

# The stores every interleaving runs over here (a real Redis in the tests marked so).
STORE_KINDS = ("memory", "local")

# (operation: "put" for put, put_new and put_if; "get"; "delete"), a regex searched in the key, what to run.
Hook = tuple[str, str, Callable[[], None]]


def opened_store(kind: str, tmp_path: Path) -> Iterator[BlobStore]:
    """A store of ``kind`` (one of :data:`STORE_KINDS`), closed after the test (a fixture's body)."""
    made: BlobStore = MemoryBlobStore() if kind == "memory" else LocalBlobStore(tmp_path)
    yield made
    made.close()


class Secrets:
    """The values a test's workers learn, each its own (the nonce keeps a stale memo from making a test pass)."""

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce

    def value(self, tag: str, i: int) -> str:
        return f"{self.nonce}{tag}Kx{i:04d}q9Zm{i * 7919 % 10_000:04d}"

    def saved(self, memory: SecretMemory, tag: str, count: int, start: int = 0) -> None:
        """``memory`` learns ``count`` values of ``tag`` from ``start`` on, and saves after each."""
        for i in range(start, start + count):
            memory.learn(self.value(tag, i), "password")
            assert memory.save()


class HookedStore(MemoryBlobStore):
    """A view of another store that runs ``hook`` once before, and ``hook_after`` once after, a chosen operation.

    Each is ``(operation, key pattern, what to run)``; ``hook_after`` of a ``get`` returns what was read before it
    ran (what the worker then decides on).
    """

    def __init__(self, inner: BlobStore) -> None:
        super().__init__()
        self.inner = inner
        self.hook: Hook | None = None
        self.hook_after: Hook | None = None

    def _before(self, op: str, key: str) -> None:
        if self.hook is not None and self.hook[0] == op and _matches(self.hook[1], key):
            run, self.hook = self.hook[2], None
            run()

    def _after(self, op: str, key: str) -> None:
        if self.hook_after is not None and self.hook_after[0] == op and _matches(self.hook_after[1], key):
            run, self.hook_after = self.hook_after[2], None
            run()

    def put(self, key: str, data: bytes) -> None:
        self._before("put", key)
        self.inner.put(key, data)
        self._after("put", key)

    def put_new(self, key: str, data: bytes) -> bool:
        self._before("put", key)
        stored = bool(self.inner.put_new(key, data))
        self._after("put", key)
        return stored

    def put_if(self, key: str, data: bytes | None, expected: bytes | None) -> bool:
        self._before("put", key)
        done = bool(self.inner.put_if(key, data, expected))
        self._after("put", key)
        return done

    def read_range(self, key: str, start: int, length: int) -> bytes:
        return self.inner.read_range(key, start, length)

    def get(self, key: str) -> bytes:
        self._before("get", key)
        try:
            return self.inner.get(key)
        finally:
            self._after("get", key)

    def size(self, key: str) -> int | None:
        return self.inner.size(key)

    def delete(self, key: str) -> bool:
        self._before("delete", key)
        found = self.inner.delete(key)
        self._after("delete", key)
        return found

    def entries(self) -> Iterator[object]:  # type: ignore[override]
        return self.inner.entries()  # type: ignore[return-value]


def _matches(pattern: str, key: str) -> bool:
    return re.search(pattern, key) is not None
