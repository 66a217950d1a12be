"""Retention of the Redis blob store: a sliding time to live, and GC evicting as on the local store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _redis_server import RedisServer
from conftest import require_binary

from contextfold.cache import ToolOutputCache
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.redis_blob import RedisBlobStore

TTL = 600  # never reached in a test: what is checked is that every key carries it


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    running = RedisServer(require_binary("redis-server"), tmp_path_factory.mktemp("redis-retention"))
    yield running
    running.stop()


def _store(server: RedisServer, **options: object) -> RedisBlobStore:
    return RedisBlobStore(server.url, prefix=f"t:{uuid.uuid4().hex[:8]}", chunk_bytes=16, **options)  # type: ignore[arg-type]


def _keys(store: RedisBlobStore, key: str) -> list[bytes]:
    client = store._client
    data = list(client.scan_iter(match=f"{store.prefix}:data:{key}:*"))
    return sorted([*data, *client.scan_iter(match=f"{store.prefix}:meta:{key}")])


def test_every_key_of_a_blob_carries_the_ttl_and_a_touch_renews_it(server: RedisServer) -> None:
    store = _store(server, ttl_seconds=TTL)
    store.put("k", b"x" * 100)  # 7 chunks of 16 bytes: a meta key and one data key
    keys = _keys(store, "k")
    assert len(keys) == 2
    client = store._client
    for key in keys:
        assert 0 < client.ttl(key) <= TTL
        client.expire(key, 5)  # as if time passed
    store.touch("k")
    assert all(TTL - 5 < client.ttl(key) <= TTL for key in keys)
    assert store.get("k") == b"x" * 100


def test_without_a_ttl_blobs_never_expire_even_after_a_put_with_one(server: RedisServer) -> None:
    prefix = f"t:{uuid.uuid4().hex[:8]}"
    RedisBlobStore(server.url, prefix=prefix, ttl_seconds=TTL).put("k", b"old")
    store = RedisBlobStore(server.url, prefix=prefix)
    store.put("k", b"new")
    assert [store._client.ttl(key) for key in _keys(store, "k")] == [-1, -1]


def test_an_expired_blob_leaves_the_listing_and_its_access_record(server: RedisServer) -> None:
    store = _store(server, ttl_seconds=TTL)
    store.put("gone", b"a" * 40)
    store.put("kept", b"b" * 40)
    for key in _keys(store, "gone"):
        store._client.delete(key)  # what expiry does
    assert [info.key for info in store.entries()] == ["kept"]
    assert store._client.zrange(f"{store.prefix}:lru", 0, -1) == [b"kept"]
    store.touch("gone")  # a touch does not bring it back
    assert [info.key for info in store.entries()] == ["kept"]


def test_gc_evicts_the_same_outputs_on_redis_as_on_the_local_store(server: RedisServer, tmp_path: Path) -> None:
    texts = [f"output {i}: " + "line\n" * (20 + 7 * i) for i in range(8)]
    results = []
    for blobs in (LocalBlobStore(tmp_path / "local"), _store(server)):
        cache = ToolOutputCache(blobs)
        refs = [cache.put(text).id for text in texts]
        for i in (5, 1, 6):  # reads make these the most recently used
            cache.read(refs[i])
        result = cache.gc(referenced=[refs[0]], max_bytes=sum(len(t) for t in texts[:4]))
        kept = sorted(refs.index(r) for r in refs if cache.contains(r))
        results.append((sorted(refs.index(r) for r in result.deleted), kept))
        blobs.close()
    assert results[0] == results[1]
    assert 0 in results[0][1] and results[0][0]  # the referenced one stays, something was evicted
