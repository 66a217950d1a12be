"""The stores' index of claims by session: a grep over all of a session's outputs lists nothing else.

``ToolOutputCache.owned_ref_ids`` (the grep without a ref) asks ``BlobStore.claimed_refs(tag)``; the memory and
SQLite stores answer from an index kept with every put and delete. It must say what a listing of the whole store
says, for every session, whatever was put, claimed, released and deleted; a SQLite file made before the index gets
it when opened; a store without the method is listed as before. (Redis: tests/stores/test_redis_claim_index.py.)
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import BlobInfo, BlobStore, ToolOutputCache, owner_key, owner_tag
from contextfold.cache.owners import OWNER_INFIX, survey
from contextfold.cache.refs import is_ref_id
from contextfold.messages import ToolCall
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore

NONCE = "ci7q"
SESSIONS = ("s-a", "s-b", "s-c")


class NoListing(MemoryBlobStore):
    """A memory store whose listing fails the test: the grep must not need it."""

    def entries(self) -> Iterator[BlobInfo]:
        raise AssertionError("the whole store was listed")


class NoListingLocal(LocalBlobStore):
    def entries(self) -> Iterator[BlobInfo]:
        raise AssertionError("the whole store was listed")


def listed_refs(store: BlobStore, session: str) -> list[str]:
    """What a listing of the whole store says the session owns (the answer before the index)."""
    outputs, _ = survey(store, is_ref_id)
    suffix = OWNER_INFIX + owner_tag(session)
    return sorted(r for r, e in outputs.items() if any(k.endswith(suffix) for k in e.claim_keys))


def grep_all(cache: ToolOutputCache, pattern: str) -> str:
    return cache.execute_tool_call(ToolCall("g", "tool_output_cache_grep", json.dumps({"pattern": pattern}))).text


# Steps: (session index, output index, action) with action 0 put, 1 release the session's claim, 2 delete the output.
STEPS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 4), st.integers(0, 2)), max_size=25)


def run_steps(store: BlobStore, steps: list[tuple[int, int, int]]) -> None:
    caches = [ToolOutputCache(store, session_id=s) for s in SESSIONS]
    for session, output, action in steps:
        cache = caches[session]
        text = f"{NONCE} output {output}\n"
        if action == 0:
            cache.put(text)
            continue
        ref = cache.stage(text)
        if action == 1:
            store.delete(owner_key(ref, owner_tag(SESSIONS[session])))
        else:
            store.delete(ref)  # the output goes, its claims stay behind (as after a crash between the deletions)


@settings(max_examples=40, deadline=None)
@given(STEPS)
def test_the_memory_index_says_what_a_listing_says(steps: list[tuple[int, int, int]]) -> None:
    store = MemoryBlobStore()
    run_steps(store, steps)
    for session in SESSIONS:
        assert ToolOutputCache(store, session_id=session).owned_ref_ids() == listed_refs(store, session)


@settings(max_examples=15, deadline=None)
@given(STEPS)
def test_the_sqlite_index_says_what_a_listing_says(steps: list[tuple[int, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as directory, LocalBlobStore(directory) as store:
        run_steps(store, steps)
        for session in SESSIONS:
            assert ToolOutputCache(store, session_id=session).owned_ref_ids() == listed_refs(store, session)


def fill(store: BlobStore) -> tuple[ToolOutputCache, str]:
    for s in range(5):
        other = ToolOutputCache(store, session_id=f"{NONCE}-other-{s}")
        other.put(f"{NONCE} other {s}\nneedle of another session\n")
    mine = ToolOutputCache(store, session_id=f"{NONCE}-mine")
    ref = mine.put(f"{NONCE} mine\nneedle here\n").id
    return mine, ref


def test_a_grep_over_all_outputs_lists_no_store(tmp_path: Path) -> None:
    for store in (NoListing(), NoListingLocal(tmp_path)):
        mine, ref = fill(store)
        assert grep_all(mine, "needle").splitlines() == [
            "1 match(es) for /needle/ in 1 cached output(s)", f"{ref}:2:needle here"]


def test_a_sqlite_file_made_before_the_index_gets_it_when_opened(tmp_path: Path) -> None:
    with LocalBlobStore(tmp_path) as store:
        _, ref = fill(store)
        path = store.path
    with sqlite3.connect(path) as db:  # as a file of the tenth session was: no blobs_owner index
        db.execute("DROP INDEX blobs_owner")
    with NoListingLocal(tmp_path) as store:
        mine = ToolOutputCache(store, session_id=f"{NONCE}-mine")
        assert mine.owned_ref_ids() == [ref]
        plan = " ".join(str(row) for row in store._query(
            "EXPLAIN QUERY PLAN SELECT key FROM blobs WHERE instr(key, '.owner.') > 0 AND "
            "substr(key, instr(key, '.owner.') + 7) = ?", ("x",)))
        assert "blobs_owner" in plan


class PlainStore:
    """A third party's store of the older protocol: no claimed_refs, no missing."""

    def __init__(self) -> None:
        self.inner = MemoryBlobStore()
        self.listed = 0

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        return self.inner.read_range(key, start, length)

    def size(self, key: str) -> int | None:
        return self.inner.size(key)

    def delete(self, key: str) -> bool:
        return self.inner.delete(key)

    def entries(self) -> Iterator[BlobInfo]:
        self.listed += 1
        return self.inner.entries()

    def get(self, key: str) -> bytes:
        return self.inner.get(key)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def touch(self, key: str) -> None:
        self.inner.touch(key)

    def close(self) -> None:
        self.inner.close()


def test_a_store_without_the_index_is_listed_as_before() -> None:
    store = PlainStore()
    mine, ref = fill(store)  # type: ignore[arg-type]
    assert grep_all(mine, "needle").splitlines()[1] == f"{ref}:2:needle here"
    assert store.listed == 1


def test_claims_on_outputs_that_are_gone_or_not_refs_are_not_searched() -> None:
    store = MemoryBlobStore()
    mine, ref = fill(store)
    tag = owner_tag(f"{NONCE}-mine")
    store.put(owner_key("../../etc/passwd", tag), b"\0" * 8)  # a planted claim on a key that is no output
    store.put(owner_key("tout_0123456789abcdef", tag), b"\0" * 8)  # a claim whose output is gone
    store.put("tout_0123456789abcdee", b"needle unclaimed\n")  # an output nobody claims
    assert mine.owned_ref_ids() == [ref]
    assert grep_all(mine, "needle").splitlines()[0] == "1 match(es) for /needle/ in 1 cached output(s)"
