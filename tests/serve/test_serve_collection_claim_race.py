"""A session's claim made while collection deletes an aged output keeps the output (memory, SQLite, redis-server).

Collection (serve.collection -> ToolOutputCache.retain) reads an output's claims, finds them all past the age, reads
them again just before deleting, then deletes. A brand-new session storing the same output in that moment (outputs
are shared by content) found it stored, touched it and wrote its claim; the delete then took the output, and the new
session's view cited a ref that was gone (a9a74c5). The delete is a compare-and-delete on the output's access order
now (``BlobStore.delete_unused``), and a session claiming a stored output writes its claim, then touches it, then
checks it is still there. The interleaving is driven by the store (a step run at the delete), not by timing.
Also (s20f1): a session writing the output again after the delete keeps its claim and line index, and a session
noting its use during collection keeps the note.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contextfold.cache import ToolOutputCache
from contextfold.cache._line_index import INDEX_CHUNK_BYTES, index_key
from contextfold.cache.owners import owner_key, owner_tag, read_claim, read_use, use_key, write_claim, write_use
from contextfold.cache.refs import ref_id_for
from contextfold.serve.collection import collect
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore
from contextfold.stores.redis_blob import RedisBlobStore
from contextfold.testing.services import RedisServer

MAX_AGE_S = 3600.0
NOW = 2_000_000_000.0
TEXT = "\n".join(f"shared [{i:04d}] make: step {i} ok" for i in range(900))
REF = ref_id_for(TEXT.encode())
# Past the line index's chunk: stored with its index (index, output and claim written in one call).
INDEXED_TEXT = "\n".join(f"shared [{i:06d}] make: step {i} ok" for i in range(3000))
INDEXED_REF = ref_id_for(INDEXED_TEXT.encode())


class AtTheDelete:
    """Runs ``step`` once, when collection first deletes (or compare-and-deletes) ``key``: before it, or after it."""

    def __init__(self, store: Any, key: str, step: Callable[[], None], *, after: bool) -> None:
        self.store, self.key, self.step, self.after, self.ran = store, key, step, after, False
        self._delete, self._delete_unused = store.delete, getattr(store, "delete_unused", None)
        store.delete = self.delete
        if self._delete_unused is not None:  # (a9a74c5's stores: none)
            store.delete_unused = self.delete_unused

    def _around(self, key: str, deleting: Callable[[], bool]) -> bool:
        if key != self.key or self.ran:
            return deleting()
        self.ran = True
        if not self.after:
            self.step()
        done = deleting()
        if self.after:
            self.step()
        return done

    def delete(self, key: str) -> bool:
        return self._around(key, lambda: self._delete(key))

    def delete_unused(self, key: str, accessed: int) -> bool:
        assert self._delete_unused is not None
        return self._around(key, lambda: self._delete_unused(key, accessed))


@pytest.fixture(params=["memory", "local", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield MemoryBlobStore()
    elif request.param == "local":
        local = LocalBlobStore(tmp_path / "blobs")
        yield local
        local.close()
    else:
        server: RedisServer = request.getfixturevalue("redis_server")
        redis_store = RedisBlobStore(server.url, prefix=f"race-{tmp_path.name}")
        yield redis_store
        redis_store.close()


@pytest.mark.parametrize("after", [False, True], ids=["claim-before-the-delete", "claim-after-the-delete"])
def test_a_new_sessions_claim_during_collection_keeps_the_output(store: Any, after: bool) -> None:
    old, new = "an-old-session", "a-brand-new-session"
    ToolOutputCache(store, session_id=old).put(TEXT)
    write_claim(store, REF, owner_tag(old), NOW - 2 * MAX_AGE_S)  # (unused for two ages: collection takes it)
    cited: list[str] = []

    def new_session_stores_the_same_output() -> None:
        cited.append(ToolOutputCache(store, session_id=new, clock=lambda: NOW).put(TEXT).id)

    hook = AtTheDelete(store, REF, new_session_stores_the_same_output, after=after)
    collect(store, "one-instance", MAX_AGE_S, NOW, leases=False)
    assert hook.ran and cited == [REF]
    assert store.get(REF) == TEXT.encode()  # (before the fix, claim before the delete: gone, the new view citing it)
    assert store.exists(owner_key(REF, owner_tag(new)))
    assert ToolOutputCache(store, session_id=new).owns(REF)
    # The next collection, the new session's claim fresh: kept; an age after it: taken with its claims.
    assert collect(store, "one-instance", MAX_AGE_S, NOW + 60, leases=False) == 0
    assert collect(store, "one-instance", MAX_AGE_S, NOW + MAX_AGE_S + 60, leases=False) == 1
    assert not store.exists(REF) and not store.exists(owner_key(REF, owner_tag(new)))


def test_a_session_writing_its_output_again_after_the_delete_keeps_its_claim_and_index(store: Any) -> None:
    # The same session back after two ages, in a fresh instance: it claims the stored output, touches it and finds
    # it deleted by the collection under way, so writes it again. On s20f it wrote no claim with it (claimed just
    # now), and the collection then deleted the index and the claim keys it had listed, the rewritten claim among
    # them: an output nobody claimed (the next collection took it), and no line index.
    assert len(INDEXED_TEXT.encode()) > INDEX_CHUNK_BYTES
    session = "a-session-back-after-two-ages"
    ToolOutputCache(store, session_id=session).put(INDEXED_TEXT)
    write_claim(store, INDEXED_REF, owner_tag(session), NOW - 2 * MAX_AGE_S)
    index = store.get(index_key(INDEXED_REF))
    back = ToolOutputCache(store, session_id=session, clock=lambda: NOW)

    def the_session_stores_it_again() -> None:
        back.put(INDEXED_TEXT)

    hook = AtTheDelete(store, INDEXED_REF, the_session_stores_it_again, after=True)
    collect(store, "one-instance", MAX_AGE_S, NOW, leases=False)
    assert hook.ran
    assert store.get(INDEXED_REF) == INDEXED_TEXT.encode()
    assert store.get(index_key(INDEXED_REF)) == index
    assert read_claim(store, INDEXED_REF, owner_tag(session)) == NOW
    assert ToolOutputCache(store, session_id=session).owns(INDEXED_REF)
    assert collect(store, "one-instance", MAX_AGE_S, NOW + 60, leases=False) == 0
    assert store.exists(INDEXED_REF)


class AtTheUseNoteDelete:
    """Runs ``step`` once, just before collection deletes (or compare-deletes) the use note ``key``."""

    def __init__(self, store: Any, key: str, step: Callable[[], None]) -> None:
        self.key, self.step, self.ran = key, step, False
        self._delete, self._put_if = store.delete, store.put_if
        store.delete, store.put_if = self.delete, self.put_if

    def _before(self, key: str) -> None:
        if key == self.key and not self.ran:
            self.ran = True
            self.step()

    def delete(self, key: str) -> bool:
        self._before(key)
        return bool(self._delete(key))

    def put_if(self, key: str, data: bytes | None, expected: bytes | None) -> bool:
        self._before(key)
        return bool(self._put_if(key, data, expected))


def test_a_session_noting_its_use_during_collection_keeps_its_note(store: Any) -> None:
    # A session back after two ages notes its use (each turn does) between the collection's read of its aged note
    # and the note's delete: on s20f the delete took the fresh note, and its memory was aged by its last save again.
    tag = owner_tag("a-session-back-after-two-ages")
    write_use(store, tag, NOW - 2 * MAX_AGE_S)
    hook = AtTheUseNoteDelete(store, use_key(tag), lambda: write_use(store, tag, NOW))
    collect(store, "one-instance", MAX_AGE_S, NOW, leases=False)
    assert hook.ran
    assert read_use(store, use_key(tag)) == NOW
