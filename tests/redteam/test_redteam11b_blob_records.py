"""A tool output record someone else wrote in the blob store is a StoreError naming where, never a raw exception.

Found tampering the rows of a local blob store (an SQLite file any local process can open) and the keys of a Redis
blob store on a real redis-server after one output was stored: a size of ``abc`` raised ValueError, a size SQLite keeps
as ``inf`` OverflowError, a chunk stored as text TypeError, a Redis size of 5,000 digits ValueError from
``read_range``, an access-order member that is no UTF-8 UnicodeDecodeError from ``entries()``. The retrieval tool
and the answered view turn a StoreError into a note for the model; anything else failed the tool call or the turn,
and ``contextfold gc`` (which lists ``entries()``) ended in an internal error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from contextfold.errors import StoreError
from contextfold.stores.local import LocalBlobStore
from contextfold.stores.redis_blob import RedisBlobStore
from contextfold.testing.services import RedisServer

NONCE = b"rt11b-blobs-91e4 "
META = "contextfold:blob:meta:k"
LRU = "contextfold:blob:lru"

SQLITE_TAMPERINGS = {
    "size that is text": ("UPDATE blobs SET size = 'abc'", ()),
    "size too large for an integer": ("UPDATE blobs SET size = ?", ("9" * 5000,)),  # SQLite keeps inf
    "negative size": ("UPDATE blobs SET size = -5", ()),
    "chunk stored as text": ("UPDATE chunks SET data = 'abc'", ()),
    "chunk stored as a number": ("UPDATE chunks SET data = 5", ()),
}


@pytest.mark.parametrize("tampering", list(SQLITE_TAMPERINGS))
def test_a_tampered_sqlite_output_is_a_store_error(tmp_path: Path, tampering: str) -> None:
    with LocalBlobStore(tmp_path) as store:
        store.put("k", NONCE * 100)
        sql, args = SQLITE_TAMPERINGS[tampering]
        db = sqlite3.connect(tmp_path / "tool_outputs.sqlite3")
        db.execute(sql, args)
        db.commit()
        db.close()
        with pytest.raises(StoreError, match=r"tool_outputs\.sqlite3, output 'k'"):
            store.read_range("k", 0, 50)
        if "size" in tampering:
            with pytest.raises(StoreError, match="stored size"):
                store.size("k")
            with pytest.raises(StoreError, match="stored size"):
                list(store.entries())
            assert store.delete("k")  # the way out stays open


def test_a_tampered_sqlite_access_order_is_a_store_error(tmp_path: Path) -> None:
    with LocalBlobStore(tmp_path) as store:
        store.put("k", NONCE)
        store._db().execute("UPDATE blobs SET accessed = 'abc'")
        with pytest.raises(StoreError, match="stored access order"):
            list(store.entries())


REDIS_TAMPERINGS: dict[str, tuple[Callable[[redis.Redis], object], Callable[[RedisBlobStore], object]]] = {
    "size of 5,000 digits, read": (lambda c: c.hset(META, "size", "9" * 5000), lambda s: s.read_range("k", 0, 9)),
    "size of 5,000 digits, size": (lambda c: c.hset(META, "size", "9" * 5000), lambda s: s.size("k")),
    "size that is text, listed": (lambda c: c.hset(META, "size", "abc"), lambda s: list(s.entries())),
    "negative size, read": (lambda c: c.hset(META, "size", "-3"), lambda s: s.read_range("k", 0, 9)),
    "access order inf, listed": (lambda c: c.zadd(LRU, {"k": float("inf")}), lambda s: list(s.entries())),
    "member no UTF-8, listed": (lambda c: c.zadd(LRU, {b"\xff": 5}), lambda s: list(s.entries())),
}


@pytest.mark.redis
@pytest.mark.parametrize("tampering", list(REDIS_TAMPERINGS))
def test_a_tampered_redis_output_is_a_store_error_naming_its_key(redis_server: RedisServer, tampering: str) -> None:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    tamper, use = REDIS_TAMPERINGS[tampering]
    store = RedisBlobStore(redis_server.url)
    try:
        store.put("k", NONCE * 100)
        tamper(client)
        with pytest.raises(StoreError, match="Redis key 'contextfold:blob:"):
            use(store)
    finally:
        store.close()
        client.close()
