"""A real redis-server killed and started again mid-run: turns retry or fail clearly; no session is corrupted."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.errors import StoreError
from contextfold.fleet import FleetWorker
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.testing.fleet import FleetConfig, _strip, recorded_turns
from contextfold.testing.services import RedisServer

TAU = Path(__file__).resolve().parents[3] / "shared" / "data" / "trajectories" / "taubench-airline"


@pytest.fixture()
def server(tmp_path: Path) -> RedisServer:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    with RedisServer(tmp_path, appendonly=True) as running:
        yield running


def _worker(url: str) -> FleetWorker:
    from contextfold.stores.redis_blob import RedisBlobStore
    from contextfold.stores.redis_session import RedisSessionStore

    archive = Archive(MemoryArchiveStore(), redactor=Redactor(enabled=False))
    return FleetWorker(RedisSessionStore(url), blobs=RedisBlobStore(url), archive=archive, max_context_tokens=6_000,
                       redact=False)


def test_turns_survive_a_redis_restart_mid_run_and_every_session_stays_whole(server: RedisServer) -> None:
    if not TAU.exists():
        pytest.skip(f"shared data not found at {TAU}")
    sessions = recorded_turns(FleetConfig(sessions=4, data=str(TAU), max_turns=8))
    worker = _worker(server.url)
    halfway = threading.Event()
    restarted = threading.Event()
    failures: list[BaseException] = []
    store_errors = 0
    total = sum(len(t) for t in sessions.values())

    def run() -> None:
        nonlocal store_errors
        done = 0
        try:
            for number in range(1, max(len(t) for t in sessions.values()) + 1):
                for session_id, turns in sessions.items():
                    if number > len(turns):
                        continue
                    result = worker.turn(session_id, number, *turns[number - 1])
                    store_errors += result.store_errors
                    done += 1
                    if done == total // 2:
                        halfway.set()
                        assert restarted.wait(timeout=60)
        except BaseException as exc:  # reported to the test thread
            failures.append(exc)
            halfway.set()

    def restart_when_halfway() -> None:
        assert halfway.wait(timeout=120)
        server.stop()
        restarted.set()  # the turns resume against a dead server: they must retry until it is back
        server.start()

    driver = threading.Thread(target=run)
    restarter = threading.Thread(target=restart_when_halfway)
    driver.start()
    restarter.start()
    restarter.join()
    driver.join()
    assert failures == []
    # A transaction is not retried inside redis-py: the turn saw the dead server and retried itself.
    assert store_errors >= 1
    for session_id, turns in sessions.items():
        worker.finish(session_id)
        want = [_strip(m) for inputs, reply in turns for m in (*inputs, *reply)]
        assert worker.restore(session_id, keep_meta=None) == want
        state = worker.sessions.load_state(session_id)
        assert state.marks == {"turn": str(len(turns))}


def test_a_dead_redis_gives_a_clear_error_naming_the_server_and_the_session(server: RedisServer) -> None:
    worker = _worker(server.url)
    message = Message("user", "hello", meta={"id": "s1:1"})
    worker.turn("s1", 1, [message])
    server.stop()
    with pytest.raises(StoreError, match=rf"Redis session store at {server.url}: cannot load session 's1'"):
        worker.sessions.load_state("s1")
    server.start()
    state = worker.sessions.load_state("s1")  # the data came back with the server (append-only file)
    assert [m.text for m in state.messages] == ["hello"] and state.version == 1
