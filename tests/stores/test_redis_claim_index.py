"""The Redis store's owner sets: a session's outputs found without listing the store, kept, pruned, built once."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from _redis_server import RedisServer
from conftest import require_binary

from contextfold.cache import BlobInfo, ToolOutputCache, owner_key, owner_tag
from contextfold.messages import ToolCall
from contextfold.stores.redis_blob import RedisBlobStore

NONCE = "rci4"
TTL = 600  # never reached: what is checked is that the owner set carries one


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    running = RedisServer(require_binary("redis-server"), tmp_path_factory.mktemp("redis-claims"))
    yield running
    running.stop()


class NoListing(RedisBlobStore):
    def entries(self) -> Iterator[BlobInfo]:
        raise AssertionError("the whole store was listed")


def grep_all(cache: ToolOutputCache, pattern: str) -> list[str]:
    call = ToolCall("g", "tool_output_cache_grep", json.dumps({"pattern": pattern}))
    return cache.execute_tool_call(call).text.splitlines()


def fill(store: RedisBlobStore) -> tuple[ToolOutputCache, str, str]:
    """Three other sessions' outputs, one shared with mine, and one of mine."""
    shared = f"{NONCE} shared\nneedle everyone sees\n"
    for s in range(3):
        other = ToolOutputCache(store, session_id=f"{NONCE}-other-{s}")
        other.put(f"{NONCE} other {s}\nneedle of another session\n")
        other.put(shared)
    mine = ToolOutputCache(store, session_id=f"{NONCE}-mine")
    return mine, mine.put(f"{NONCE} mine\nneedle here\n").id, mine.put(shared).id


def test_a_grep_over_all_outputs_lists_no_store_and_sees_only_its_own(server: RedisServer) -> None:
    store = NoListing(server.url, prefix=f"t:{uuid.uuid4().hex[:8]}")
    mine, own, shared = fill(store)
    assert grep_all(mine, "needle") == [
        "2 match(es) for /needle/ in 2 cached output(s)", *sorted([f"{own}:2:needle here",
                                                                   f"{shared}:2:needle everyone sees"])]
    # Released, deleted, or expired (its claim gone behind the store's back): no longer searched.
    store.delete(owner_key(shared, owner_tag(f"{NONCE}-mine")))
    assert mine.owned_ref_ids() == [own]
    store._client.delete(store._meta(owner_key(own, owner_tag(f"{NONCE}-mine"))))  # as a time to live does
    assert mine.owned_ref_ids() == []
    assert store._client.exists(store._owner_set(owner_tag(f"{NONCE}-mine"))) == 0  # pruned to nothing


def test_a_store_written_before_the_owner_sets_gets_them_once(server: RedisServer) -> None:
    prefix = f"t:{uuid.uuid4().hex[:8]}"
    mine, own, shared = fill(RedisBlobStore(server.url, prefix=prefix))
    client = mine.store._client  # type: ignore[attr-defined]
    old = list(client.scan_iter(match=f"{prefix}:owner*"))
    assert old
    client.delete(*old)  # as the tenth session's stores were: claims, no owner sets
    again = ToolOutputCache(RedisBlobStore(server.url, prefix=prefix), session_id=f"{NONCE}-mine")
    assert again.owned_ref_ids() == sorted([own, shared])
    built = NoListing(server.url, prefix=prefix)  # a worker started after it: no listing any more
    assert ToolOutputCache(built, session_id=f"{NONCE}-other-1").owned_ref_ids() == sorted(
        [shared, ToolOutputCache(built, session_id="x").stage(f"{NONCE} other 1\nneedle of another session\n")])


def test_an_owner_set_lives_as_long_as_its_claims(server: RedisServer) -> None:
    store = RedisBlobStore(server.url, prefix=f"t:{uuid.uuid4().hex[:8]}", ttl_seconds=TTL)
    cache = ToolOutputCache(store, session_id=f"{NONCE}-ttl")
    cache.put(f"{NONCE} expiring\n")
    owner_set = store._owner_set(owner_tag(f"{NONCE}-ttl"))
    assert 0 < store._client.ttl(owner_set) <= TTL
    store._client.expire(owner_set, 5)  # as if time passed; a new claim renews it
    cache.put(f"{NONCE} expiring too\n")
    assert TTL - 5 < store._client.ttl(owner_set) <= TTL
    forever = RedisBlobStore(server.url, prefix=store.prefix)  # a claim without a time to live: the set keeps none
    ToolOutputCache(forever, session_id=f"{NONCE}-ttl").put(f"{NONCE} kept\n")
    assert store._client.ttl(owner_set) == -1


def test_the_listing_path_is_unchanged_for_other_keys(server: RedisServer) -> None:
    store = RedisBlobStore(server.url, prefix=f"t:{uuid.uuid4().hex[:8]}")
    store.put("plain", b"x")
    store.touch("plain")
    assert [i.key for i in store.entries()] == ["plain"]
    assert store.delete("plain") and not store.delete("plain")
    assert store.claimed_refs(owner_tag("nobody")) == []
