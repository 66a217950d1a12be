"""Retention over a third party's store lists it once, however many aged outputs it deletes.

``BlobStore.delete_unused``'s default compared an output's access order by listing the whole store (``entries``)
for each delete (s20f): retention over a store subclassing ``BlobStore`` listed it once per aged output, quadratic
(3,000 aged outputs: 3,001 listings, seconds of CPU, inside the ``put`` that ran retention). The default now deletes
(no compare: only a listing could read one key's order); the stores of ``contextfold.stores`` compare in one step.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from contextfold.cache import ToolOutputCache
from contextfold.cache.blobs import BlobInfo, BlobStore

DAY_S = 86_400.0


class _ListingCountingStore(BlobStore):
    """A third party's store: only the required methods, each write a newer access order; counts its listings."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.accessed: dict[str, int] = {}
        self.listings = 0
        self._order = itertools.count()

    def put(self, key: str, data: bytes) -> None:
        self.data[key] = bytes(data)
        self.accessed[key] = next(self._order)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        return self.data[key][start : start + length]

    def size(self, key: str) -> int | None:
        value = self.data.get(key)
        return None if value is None else len(value)

    def delete(self, key: str) -> bool:
        self.accessed.pop(key, None)
        return self.data.pop(key, None) is not None

    def entries(self) -> Iterator[BlobInfo]:
        self.listings += 1
        return iter([BlobInfo(k, len(v), self.accessed[k]) for k, v in sorted(self.data.items())])


def test_retention_lists_a_subclassed_store_once_for_all_its_aged_outputs() -> None:
    store = _ListingCountingStore()
    writer = ToolOutputCache(store, session_id="s-retain-once", clock=lambda: 1_000.0)
    refs = [writer.put(f"output {n} of the aged session\n" * 3) for n in range(60)]
    assert store.listings == 0
    report = ToolOutputCache(store).retain(now=1_000.0 + 30 * DAY_S)
    assert sorted(report.deleted) == sorted(ref.id for ref in refs)
    assert store.data == {}  # (outputs, their claims: all gone)
    assert store.listings == 1
