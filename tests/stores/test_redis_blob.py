"""RedisBlobStore against a real redis-server: the BlobStore contract, chunked slice reads, atomic replacement."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from _redis_server import RedisServer, free_port
from conftest import require_binary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.cache import BlobStore, ToolOutputCache
from contextfold.errors import MissingExtra, RefNotFound, StoreError
from contextfold.stores import open_blob_store
from contextfold.stores.redis_blob import CHUNKS_PER_PIPELINE, RedisBlobStore

pytestmark = pytest.mark.redis

# Small chunks make every slice cross chunk boundaries, and a few hundred bytes span several round trips.
SMALL_CHUNK = 7


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = RedisServer(require_binary("redis-server"), tmp_path_factory.mktemp("redis"))
    yield srv
    srv.stop()


@pytest.fixture
def store(server: RedisServer) -> Iterator[RedisBlobStore]:
    server.client.flushall()
    s = RedisBlobStore(server.url, chunk_bytes=SMALL_CHUNK)
    yield s
    s.close()


def test_satisfies_the_protocol(store: RedisBlobStore) -> None:
    assert isinstance(store, BlobStore)


def test_put_new_writes_only_where_no_key_is(store: RedisBlobStore, server: RedisServer) -> None:
    assert store.put_new("n", b"first, in several chunks")
    assert not store.put_new("n", b"second, in several chunks")
    assert store.get("n") == b"first, in several chunks"
    assert len(server.client.keys(f"{store.prefix}:data:n:*")) == 1  # (the refused value's staged chunks dropped)
    store.delete("n")
    assert store.put_new("n", b"third") and store.get("n") == b"third"


def test_put_get_size_exists_delete(store: RedisBlobStore) -> None:
    assert store.size("a") is None
    assert not store.exists("a")
    store.put("a", b"hello world, in several chunks")
    assert store.get("a") == b"hello world, in several chunks"
    assert store.size("a") == 30
    assert store.exists("a")
    assert store.delete("a") is True
    assert store.delete("a") is False
    with pytest.raises(RefNotFound):
        store.get("a")
    with pytest.raises(RefNotFound):
        store.read_range("a", 0, 1)


def test_replace_and_empty_values(store: RedisBlobStore, server: RedisServer) -> None:
    store.put("k", b"x" * (5 * SMALL_CHUNK + 3))
    store.put("k", b"short")
    assert store.get("k") == b"short"
    store.put("e", b"")
    assert store.exists("e")
    assert store.get("e") == b""
    assert store.read_range("e", 0, 10) == b""
    # The replaced generation is gone and the live one is permanent: nothing is left to leak or expire.
    data_keys = sorted(server.client.keys("contextfold:blob:data:*"))
    assert len(data_keys) == 1 and data_keys[0].startswith(b"contextfold:blob:data:k:")
    assert server.client.ttl(data_keys[0]) == -1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(max_size=SMALL_CHUNK * (CHUNKS_PER_PIPELINE + 10)),
    start=st.integers(0, SMALL_CHUNK * (CHUNKS_PER_PIPELINE + 12)),
    length=st.integers(0, SMALL_CHUNK * (CHUNKS_PER_PIPELINE + 12)),
)
def test_read_range_is_a_slice(store: RedisBlobStore, data: bytes, start: int, length: int) -> None:
    store.put("blob", data)
    assert store.read_range("blob", start, length) == data[start : start + length]
    assert store.get("blob") == data


def test_negative_ranges_are_refused(store: RedisBlobStore) -> None:
    store.put("k", b"abc")
    with pytest.raises(ValueError, match="start=-1"):
        store.read_range("k", -1, 2)


def test_a_slice_reads_only_the_chunks_that_hold_it(store: RedisBlobStore, server: RedisServer) -> None:
    data = bytes(range(256)) * 4
    store.put("big", data)
    (data_key,) = server.client.keys("contextfold:blob:data:big:*")
    last = (len(data) - 1) // SMALL_CHUNK
    server.client.hdel(data_key, str(last))  # damage the far end only
    assert store.read_range("big", 10, 50) == data[10:60]
    with pytest.raises(StoreError, match="missing chunks"):
        store.read_range("big", len(data) - 3, 3)


def test_entries_sorted_with_sizes_and_lru_order(store: RedisBlobStore) -> None:
    for key in ("b", "a", "c"):
        store.put(key, key.encode() * 3)
    assert [(e.key, e.size) for e in store.entries()] == [("a", 3), ("b", 3), ("c", 3)]
    store.touch("b")
    store.touch("missing")  # a no-op, and it must not create an entry
    by_age = [e.key for e in sorted(store.entries(), key=lambda e: e.accessed)]
    assert by_age == ["a", "c", "b"]
    assert store.size("missing") is None
    store.delete("c")
    assert [e.key for e in store.entries()] == ["a", "b"]


def test_a_put_that_dies_before_commit_leaves_the_old_value_and_expiring_chunks(
    store: RedisBlobStore, server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.put("k", b"old value")

    def die(**_: object) -> None:
        raise KeyboardInterrupt  # a worker killed between staging and commit

    monkeypatch.setattr(store, "_commit", die)
    with pytest.raises(KeyboardInterrupt):
        store.put("k", b"a new value that never lands")
    assert store.get("k") == b"old value"
    ttls = [server.client.ttl(k) for k in server.client.keys("contextfold:blob:data:k:*")]
    assert sorted(t > 0 for t in ttls) == [False, True]  # the live one is permanent, the orphan expires


def test_concurrent_replacement_never_mixes_two_values(server: RedisServer) -> None:
    server.client.flushall()
    # Values spanning several round trips, so that a replacement can land between two of them.
    a, b = b"a" * (SMALL_CHUNK * CHUNKS_PER_PIPELINE * 3), b"b" * (SMALL_CHUNK * CHUNKS_PER_PIPELINE * 2 + 5)
    writer_store = RedisBlobStore(server.url, chunk_bytes=SMALL_CHUNK)
    reader_store = RedisBlobStore(server.url, chunk_bytes=SMALL_CHUNK)
    writer_store.put("k", a)
    done = threading.Event()
    seen: set[bytes] = set()

    def write() -> None:
        for i in range(40):
            writer_store.put("k", a if i % 2 else b)
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    reads = 0
    while not done.is_set() or reads < 5:
        try:
            seen.add(reader_store.get("k"))
        except StoreError as exc:  # starved by the writer: allowed, and said plainly
            assert "replaced" in str(exc)
        reads += 1
    thread.join()
    assert seen and seen <= {a, b}
    writer_store.close()
    reader_store.close()


def test_open_blob_store_passes_the_url_through(server: RedisServer) -> None:
    server.client.flushall()
    store = open_blob_store(server.url)
    assert isinstance(store, RedisBlobStore)
    store.put("via-url", b"yes")
    assert server.client.exists("contextfold:blob:meta:via-url") == 1
    store.close()


def test_two_workers_share_the_tool_output_cache(server: RedisServer) -> None:
    server.client.flushall()
    text = "".join(f"line {i}: {'x' * 80}\n" for i in range(3000))
    worker_a = ToolOutputCache(RedisBlobStore(server.url), context_window=32_000)
    worker_b = ToolOutputCache(RedisBlobStore(server.url), context_window=32_000)
    ref = worker_a.put(text)
    assert worker_b.get(ref.id) == text
    assert worker_b.ref(ref.id) == ref
    # Line numbers are 1-based like a file read: line 1500 is the text's "line 1499".
    assert worker_b.read(ref.id, offset=1500, limit=3).lines == tuple(text.splitlines()[1499:1502])


def test_an_unreachable_server_is_a_store_error_naming_the_url() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    store = RedisBlobStore(url)
    with pytest.raises(StoreError, match=f"127.0.0.1:{url.split(':')[2].split('/')[0]}"):
        store.put("k", b"v")
    with pytest.raises(StoreError, match="cannot read"):
        store.read_range("k", 0, 1)


def test_a_bad_url_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="bad Redis URL"):
        RedisBlobStore("http://127.0.0.1:1/0")


def test_without_redis_py_the_extra_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingExtra, match=r"pip install 'contextfold\[redis\]'"):
        RedisBlobStore("redis://127.0.0.1:1/0")
