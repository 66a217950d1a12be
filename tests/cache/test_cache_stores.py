"""The BlobStore contract, held by the memory and the local (SQLite) store alike."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.cache import BlobStore
from contextfold.errors import ConfigError, RefNotFound, StoreError
from contextfold.stores import open_blob_store
from contextfold.stores._sqlite import DEFAULT_DIRECTORY
from contextfold.stores.local import CHUNK_BYTES, DEFAULT_FILENAME, LocalBlobStore
from contextfold.stores.memory import MemoryBlobStore


@pytest.fixture(params=["memory", "local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    s: BlobStore = MemoryBlobStore() if request.param == "memory" else LocalBlobStore(tmp_path)
    yield s
    s.close()


def test_both_stores_satisfy_the_protocol(store: BlobStore) -> None:
    assert isinstance(store, BlobStore)


def test_put_get_size_exists_delete(store: BlobStore) -> None:
    assert store.size("a") is None
    assert not store.exists("a")
    store.put("a", b"hello")
    assert store.get("a") == b"hello"
    assert store.size("a") == 5
    assert store.exists("a")
    assert store.delete("a") is True
    assert store.delete("a") is False
    with pytest.raises(RefNotFound):
        store.get("a")
    with pytest.raises(RefNotFound):
        store.read_range("a", 0, 1)


def test_put_replaces_and_empty_values_are_kept(store: BlobStore) -> None:
    store.put("k", b"x" * (3 * CHUNK_BYTES + 5))
    store.put("k", b"short")
    assert store.get("k") == b"short"
    store.put("e", b"")
    assert store.exists("e")
    assert store.get("e") == b""
    assert store.read_range("e", 0, 10) == b""


def test_entries_are_sorted_with_sizes(store: BlobStore) -> None:
    for key in ("b", "a", "c"):
        store.put(key, key.encode() * 3)
    assert [(e.key, e.size) for e in store.entries()] == [("a", 3), ("b", 3), ("c", 3)]


def test_touch_moves_a_key_to_most_recently_used(store: BlobStore) -> None:
    for key in ("a", "b", "c"):
        store.put(key, b"v")
    store.touch("a")
    order = [e.key for e in sorted(store.entries(), key=lambda e: e.accessed)]
    assert order == ["b", "c", "a"]
    store.touch("missing")  # no error, nothing created
    assert not store.exists("missing")


def test_read_range_rejects_negative_arguments(store: BlobStore) -> None:
    store.put("k", b"abc")
    with pytest.raises(ValueError, match="start"):
        store.read_range("k", -1, 2)


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(0, 3 * CHUNK_BYTES + 17),
    start=st.integers(0, 4 * CHUNK_BYTES),
    length=st.integers(0, 2 * CHUNK_BYTES + 3),
)
def test_read_range_matches_slicing_across_chunk_boundaries(size: int, start: int, length: int) -> None:
    data = bytes((i * 7 + i // 251) % 256 for i in range(size))
    memory = MemoryBlobStore()
    memory.put("k", data)
    assert memory.read_range("k", start, length) == data[start : start + length]
    with LocalBlobStore(_hypothesis_dir()) as local:
        local.put("k", data)
        assert local.read_range("k", start, length) == data[start : start + length]


_TMP: list[Path] = []


def _hypothesis_dir() -> Path:
    # One directory for every example (hypothesis does not mix with function-scoped fixtures).
    import tempfile

    if not _TMP:
        _TMP.append(Path(tempfile.mkdtemp(prefix="cf-stores-")))
    return _TMP[0]


def test_local_store_persists_across_instances_and_chunks_large_values(tmp_path: Path) -> None:
    data = bytes(range(256)) * (CHUNK_BYTES // 64)  # 4 chunks
    with LocalBlobStore(tmp_path) as s:
        s.put("big", data)
    with LocalBlobStore(tmp_path) as s:
        assert s.get("big") == data
        assert s.read_range("big", CHUNK_BYTES - 3, 6) == data[CHUNK_BYTES - 3 : CHUNK_BYTES + 3]
    db = sqlite3.connect(tmp_path / DEFAULT_FILENAME)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = db.execute("SELECT count(*), max(length(data)) FROM chunks WHERE key = 'big'").fetchone()
    finally:
        db.close()
    assert rows == (4, CHUNK_BYTES)


def test_local_store_defaults_to_dot_contextfold_under_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with LocalBlobStore() as s:
        s.put("k", b"v")
        assert s.path == tmp_path / DEFAULT_DIRECTORY / DEFAULT_FILENAME
    assert (tmp_path / DEFAULT_DIRECTORY / DEFAULT_FILENAME).is_file()


def test_local_store_accepts_a_file_path(tmp_path: Path) -> None:
    with LocalBlobStore(tmp_path / "x" / "cache.db") as s:
        s.put("k", b"v")
    assert (tmp_path / "x" / "cache.db").is_file()


def test_closed_local_store_says_so(tmp_path: Path) -> None:
    s = LocalBlobStore(tmp_path)
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.put("k", b"v")


def test_unopenable_location_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot open"):
        LocalBlobStore(blocker / "sub")


def test_local_store_is_safe_to_share_between_threads(tmp_path: Path) -> None:
    with LocalBlobStore(tmp_path) as s:
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(20):
                    key = f"t{n}-{i}"
                    s.put(key, key.encode() * 1000)
                    assert s.get(key) == key.encode() * 1000
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(list(s.entries())) == 80


def test_two_processes_worth_of_connections_see_each_others_writes(tmp_path: Path) -> None:
    with LocalBlobStore(tmp_path) as a, LocalBlobStore(tmp_path) as b:
        a.put("k", b"from a")
        assert b.get("k") == b"from a"
        b.delete("k")
        assert not a.exists("k")


# -- open_blob_store ---------------------------------------------------------------------------------------------


def test_open_blob_store_resolves_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(open_blob_store("memory"), MemoryBlobStore)
    monkeypatch.chdir(tmp_path)
    local = open_blob_store("local")
    assert isinstance(local, LocalBlobStore)
    assert local.path == tmp_path / DEFAULT_DIRECTORY / DEFAULT_FILENAME
    local.close()
    explicit = open_blob_store(f"local://{tmp_path / 'elsewhere'}")
    assert isinstance(explicit, LocalBlobStore)
    assert explicit.path == tmp_path / "elsewhere" / DEFAULT_FILENAME
    explicit.close()
    relative = open_blob_store("local://rel/dir")
    assert isinstance(relative, LocalBlobStore)
    assert relative.path == tmp_path / "rel" / "dir" / DEFAULT_FILENAME
    relative.close()


@pytest.mark.parametrize("url", ["ftp://x", "nope", "memory:///some/path"])
def test_open_blob_store_rejects_unknown_names_clearly(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        open_blob_store(url)
    assert info.value.field == "store"
    assert url in str(info.value)
