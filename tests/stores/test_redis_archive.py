"""RedisArchiveStore against a real redis-server: the ArchiveStore contract and the Archive facade on top of it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from _redis_server import RedisServer
from conftest import require_binary

from contextfold.archive import Archive, ArchiveStore
from contextfold.messages import Message
from contextfold.stores.redis_archive import RedisArchiveStore

pytestmark = pytest.mark.redis


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = RedisServer(require_binary("redis-server"), tmp_path_factory.mktemp("redis"))
    yield srv
    srv.stop()


@pytest.fixture
def store(server: RedisServer) -> Iterator[RedisArchiveStore]:
    server.client.flushall()
    s = RedisArchiveStore(server.url)
    yield s
    s.close()


def test_write_read_replace_names_and_sessions(store: RedisArchiveStore) -> None:
    assert isinstance(store, ArchiveStore)
    assert store.read("s1", "summary-001.json") is None
    store.write("s1", "summary-001.json", b"{}")
    store.write("s1", "summary-001.json", b'{"v": 2}')
    store.write("s2", "a.jsonl", b"x")
    assert store.read("s1", "summary-001.json") == b'{"v": 2}'
    assert store.names("s1") == ["summary-001.json"]
    assert store.names("unknown") == []
    assert store.sessions() == ["s1", "s2"]


def test_exclusive_write_refuses_to_replace(store: RedisArchiveStore) -> None:
    store.write("s", "t.jsonl", b"first", exclusive=True)
    with pytest.raises(FileExistsError, match=r"s/t\.jsonl"):
        store.write("s", "t.jsonl", b"second", exclusive=True)
    assert store.read("s", "t.jsonl") == b"first"


@pytest.mark.parametrize("session_id, name", [("../etc", "x"), ("s", "../x"), ("", "x"), ("s", "a/b")])
def test_unsafe_ids_and_names_are_refused(store: RedisArchiveStore, session_id: str, name: str) -> None:
    with pytest.raises(ValueError):
        store.write(session_id, name, b"x")


def test_concurrent_appends_lose_nothing(store: RedisArchiveStore, server: RedisServer) -> None:
    stores = [RedisArchiveStore(server.url) for _ in range(4)]
    start = threading.Barrier(len(stores))

    def work(i: int) -> None:
        start.wait()
        for j in range(50):
            stores[i].append("s", "events.jsonl", f'{{"w":{i},"n":{j}}}\n'.encode())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    raw = store.read("s", "events.jsonl")
    assert raw is not None
    assert sorted(raw.decode().splitlines()) == sorted(f'{{"w":{i},"n":{j}}}' for i in range(4) for j in range(50))
    for s in stores:
        s.close()


def test_archive_facade_end_to_end(store: RedisArchiveStore) -> None:
    archive = Archive(store)
    view = [Message.user("fix the bug", meta={"id": "m1"}), Message.assistant("on it", meta={"id": "m2"})]
    assert archive.archive_transcript("sess", view) == 1
    assert archive.archive_transcript("sess", view[:1]) == 2
    archive.archive_summary("sess", 1, {"summary": "user wants the bug fixed"})
    archive.append_events("sess", [{"type": "compact.trigger_decision"}])
    assert archive.transcript("sess", 1) == view
    assert [n for n, _ in archive.transcripts("sess")] == [1, 2]
    assert archive.summary("sess", 1) == {"summary": "user wants the bug fixed"}
    assert [e["type"] for e in archive.events("sess")] == ["compact.trigger_decision"]
