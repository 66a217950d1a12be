"""Storing a new output writes its line index, itself and its claim in one store call (issue 22), and the same keys
and values as one put each: in the process's store, the SQLite file, and a store that keeps the looping default."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import BlobInfo, BlobStore, ToolOutputCache
from contextfold.cache._line_index import index_key
from contextfold.cache.owners import owner_key, owner_tag
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore

NONCE = "pm7q2"


def _output(tag: str, lines: int = 400) -> str:
    return "".join(f"{NONCE} {tag} line {i} of a long tool output\n" for i in range(lines))


class _CountingStore(MemoryBlobStore):
    """The process's store, counting its write calls."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def put(self, key: str, data: bytes) -> None:
        self.writes.append("put")
        super().put(key, data)

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        self.writes.append("put_many")
        super().put_many(items)


class _LoopingStore(BlobStore):
    """A third party's store: only the required methods, ``put_many`` the protocol's default (one put each)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.order: list[str] = []

    def put(self, key: str, data: bytes) -> None:
        self.data[key] = bytes(data)
        self.order.append(key)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        return self.data[key][start : start + length]

    def size(self, key: str) -> int | None:
        value = self.data.get(key)
        return None if value is None else len(value)

    def delete(self, key: str) -> bool:
        return self.data.pop(key, None) is not None

    def entries(self) -> Iterator[BlobInfo]:
        return iter([BlobInfo(k, len(v), 0) for k, v in sorted(self.data.items())])


def test_a_new_output_with_its_index_and_claim_is_one_store_call() -> None:
    store = _CountingStore()
    cache = ToolOutputCache(store, session_id=f"s-{NONCE}")
    text = _output("a", 4000)  # past the line index's threshold: three keys written
    ref = cache.put(text)
    assert store.writes == ["put_many"]
    assert store.get(owner_key(ref.id, owner_tag(f"s-{NONCE}")))
    assert cache.owns(ref.id) and cache.get(ref.id) == text
    assert cache.owned_ref_ids() == [ref.id]  # the claims index kept by the batch
    # Put again: claimed lately, nothing written.
    store.writes.clear()
    assert cache.put(text) == ref
    assert store.writes == []


def test_the_default_puts_index_then_output_then_claim() -> None:
    store = _LoopingStore()
    cache = ToolOutputCache(store, session_id=f"s-{NONCE}")
    ref = cache.put(_output("b", 4000))
    assert store.order == [index_key(ref.id), ref.id, owner_key(ref.id, owner_tag(f"s-{NONCE}"))]


def test_a_claim_lost_after_its_output_is_written_again_by_the_next_put() -> None:
    store = MemoryBlobStore()
    cache = ToolOutputCache(store, session_id=f"s-{NONCE}")
    text = _output("c")
    ref = cache.put(text)
    claim = owner_key(ref.id, owner_tag(f"s-{NONCE}"))
    assert store.delete(claim) and store.delete(ref.id)
    cache2 = ToolOutputCache(store, session_id=f"s-{NONCE}")
    store.put(ref.id, text.encode())  # the output there, its claim not (a loop killed between the two)
    assert cache2.put(text) == ref
    assert store.exists(claim)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["x", "y", "z"]), st.integers(1, 3000)), min_size=1, max_size=5),
       st.booleans())
def test_every_store_holds_what_one_put_each_writes(outputs: list[tuple[str, int]], session: bool) -> None:
    session_id = f"s-{NONCE}" if session else None
    texts = [_output(tag, lines) for tag, lines in outputs]
    looping = _LoopingStore()
    memory = MemoryBlobStore()
    with tempfile.TemporaryDirectory() as directory, LocalBlobStore(directory) as local:
        held = []
        for store in (looping, memory, local):
            cache = ToolOutputCache(store, session_id=session_id, clock=lambda: 1_000_000.0)
            refs = [cache.put(t) for t in texts]
            held.append((refs, {e.key: store.get(e.key) for e in store.entries()}))
        assert held[0] == held[1] == held[2]
