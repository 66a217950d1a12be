"""Session stores (memory, SQLite, Redis on a real redis-server): one contract, optimistic concurrency, fleets."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _redis_server import RedisServer
from conftest import require_binary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.errors import InvalidHistory, StoreError
from contextfold.manager import ContextManager
from contextfold.messages import Message, TextPart, ToolCall
from contextfold.stores.redis_blob import RedisBlobStore
from contextfold.stores.redis_session import RedisSessionStore
from contextfold.stores.session import MemorySessionStore, SessionConflict, SessionStore
from contextfold.stores.session_local import LocalSessionStore

# A pair of store instances over the same data: two workers (two connections, two processes' worth of state).
Pair = tuple[SessionStore, SessionStore]

_BACKENDS = ["memory", "local", pytest.param("redis", marks=pytest.mark.redis)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = RedisServer(require_binary("redis-server"), tmp_path_factory.mktemp("redis"))
    yield srv
    srv.stop()


@pytest.fixture
def make_pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Pair]]:
    """Builds a fresh, empty pair of workers for the backend of the test's parameter."""
    made: list[SessionStore] = []
    backend = request.param

    def build() -> Pair:
        if backend == "memory":
            one = MemorySessionStore()
            pair: Pair = (one, one)  # one process: both workers share the object
        elif backend == "local":
            directory = tmp_path_factory.mktemp("sessions")
            pair = (LocalSessionStore(directory), LocalSessionStore(directory))
        else:
            server = request.getfixturevalue("server")
            server.client.flushall()
            pair = (RedisSessionStore(server.url), RedisSessionStore(server.url))
        made.extend(pair)
        return pair

    yield build
    for store in made:
        store.close()


def _turn(i: int) -> list[Message]:
    call = ToolCall(f"call_{i}", "bash", json.dumps({"cmd": f"ls {i}"}))
    return [
        Message("assistant", f"step {i}", (call,), meta={"id": f"s:{i}"}),
        Message("tool", f"output {i} ✓\u2028", tool_call_id=call.id, name="bash", meta={"ref": f"tout_{i:016x}"}),
    ]


HISTORY = [
    Message("system", "You are careful."),
    Message("user", (TextPart("fix the bug"), TextPart("in parser.py", cache_control={"type": "ephemeral"}))),
    *_turn(1),
    *_turn(2),
]


@pytest.mark.parametrize("make_pair", _BACKENDS, indirect=True)
def test_round_trip_and_versions(make_pair: Callable[[], Pair]) -> None:
    store, _ = make_pair()
    assert isinstance(store, SessionStore)
    assert store.load("s1") == ([], 0)
    assert store.save("s1", HISTORY, expected_version=0) == 1
    assert store.load("s1") == (HISTORY, 1)
    assert store.save("s1", [*HISTORY, *_turn(3)], expected_version=1) == 2
    assert store.load("s1") == ([*HISTORY, *_turn(3)], 2)
    assert store.load("other") == ([], 0)
    assert store.delete("s1") is True
    assert store.delete("s1") is False
    assert store.load("s1") == ([], 0)


@pytest.mark.parametrize("make_pair", _BACKENDS, indirect=True)
def test_a_stale_writer_is_rejected_naming_both_versions(make_pair: Callable[[], Pair]) -> None:
    a, b = make_pair()
    a.save("s", HISTORY, 0)
    loaded_a, va = a.load("s")
    loaded_b, vb = b.load("s")
    assert a.save("s", [*loaded_a, *_turn(3)], va) == 2
    with pytest.raises(SessionConflict, match="expected version 1, but the store holds version 2") as info:
        b.save("s", [*loaded_b, *_turn(4)], vb)
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert isinstance(info.value, StoreError)
    assert b.load("s") == ([*HISTORY, *_turn(3)], 2)  # the winner's history, untouched


@pytest.mark.parametrize("make_pair", _BACKENDS, indirect=True)
def test_bad_input_names_the_problem(make_pair: Callable[[], Pair]) -> None:
    store, _ = make_pair()
    with pytest.raises(ValueError, match="session_id"):
        store.load("")
    with pytest.raises(ValueError, match="expected_version"):
        store.save("s", HISTORY, -1)
    with pytest.raises(InvalidHistory, match="message 1: expected a contextfold Message, got dict"):
        store.save("s", [HISTORY[0], {"role": "user", "content": "x"}], 0)  # type: ignore[list-item]
    assert store.load("s") == ([], 0)


# Operations on a shared session by two workers: (worker, what it does). Each worker saves from what it last loaded.
_OPS = st.lists(
    st.tuples(st.sampled_from([0, 1]), st.sampled_from(["load", "append", "rewrite", "truncate", "same"])),
    max_size=25,
)


@pytest.mark.parametrize("make_pair", _BACKENDS, indirect=True)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_the_store_always_holds_the_last_successful_save(
    make_pair: Callable[[], Pair], ops: list[tuple[int, str]]
) -> None:
    """Suffix-only writes must never leave the store different from what the winning save sent."""
    workers = make_pair()
    views: list[tuple[list[Message], int]] = [([], 0), ([], 0)]
    truth: tuple[list[Message], int] = ([], 0)
    for n, (w, op) in enumerate(ops):
        messages, version = views[w]
        if op == "load":
            views[w] = workers[w].load("s")
            assert views[w] == truth
            continue
        if op == "append":
            new = [*messages, *_turn(n)]
        elif op == "rewrite":  # like a compaction: the middle changes
            new = [Message("user", f"summary {n}"), *messages[-2:]]
        elif op == "truncate":
            new = messages[: len(messages) // 2]
        else:
            new = list(messages)
        if version != truth[1]:
            with pytest.raises(SessionConflict):
                workers[w].save("s", new, version)
            continue
        saved = workers[w].save("s", new, version)
        truth = (new, saved)
        views[w] = truth
        assert workers[1 - w].load("s") == truth
        views[1 - w] = truth


@pytest.mark.parametrize("make_pair", _BACKENDS, indirect=True)
def test_two_threads_saving_from_one_version_exactly_one_wins(make_pair: Callable[[], Pair]) -> None:
    workers = make_pair()
    workers[0].save("s", HISTORY, 0)
    both_loaded = threading.Barrier(2)
    outcomes: dict[int, str] = {}

    def work(w: int) -> None:
        messages, version = workers[w].load("s")
        both_loaded.wait()
        try:
            workers[w].save("s", [*messages, *_turn(10 + w)], version)
            outcomes[w] = "saved"
        except SessionConflict:
            # The loser does what a worker should: load again and redo its step.
            messages, version = workers[w].load("s")
            workers[w].save("s", [*messages, *_turn(10 + w)], version)
            outcomes[w] = "retried"

    threads = [threading.Thread(target=work, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes.values()) == ["retried", "saved"]
    final, version = workers[0].load("s")
    assert version == 3
    winner = 10 + next(w for w, o in outcomes.items() if o == "saved")
    loser = 10 + next(w for w, o in outcomes.items() if o == "retried")
    assert final == [*HISTORY, *_turn(winner), *_turn(loser)]


@pytest.mark.redis
def test_redis_appends_only_the_new_messages(server: RedisServer) -> None:
    server.client.flushall()
    store = RedisSessionStore(server.url)
    store.save("s", HISTORY, 0)
    key = b"contextfold:session:s:messages"
    first_items = server.client.lrange(key, 0, -1)
    # Mark the stored first item: an append must leave it alone, a rewrite must replace it.
    server.client.lset(key, 0, first_items[0].replace(b"careful", b"CAREFUL"))
    store.save("s", [*HISTORY, *_turn(3)], 1)
    assert b"CAREFUL" in server.client.lindex(key, 0)
    assert server.client.llen(key) == len(HISTORY) + 2
    compacted = [Message("user", "summary of steps 1-2"), *_turn(3)]
    store.save("s", compacted, 2)
    assert server.client.llen(key) == 3
    assert store.load("s")[0] == compacted
    # The first message is the same, so only what follows it is rewritten (the mark stays).
    store.save("s", [Message("system", "You are careful."), *_turn(4)], 3)
    store.save("s", [Message("system", "You are careful."), *_turn(5)], 4)
    assert b"CAREFUL" not in server.client.lindex(key, 0)  # rewritten by the save from version 3
    store.close()


@pytest.mark.redis
def test_redis_sessions_expire_when_asked(server: RedisServer) -> None:
    server.client.flushall()
    store = RedisSessionStore(server.url, ttl_seconds=600)
    store.save("s", HISTORY, 0)
    assert 0 < server.client.ttl(b"contextfold:session:s:head") <= 600
    assert 0 < server.client.ttl(b"contextfold:session:s:messages") <= 600
    store.close()


@pytest.mark.redis
def test_an_unreachable_redis_is_a_store_error() -> None:
    from _redis_server import free_port

    store = RedisSessionStore(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(StoreError, match="cannot load session 's'"):
        store.load("s")


def test_a_corrupt_record_names_session_and_position(tmp_path: Path) -> None:
    store = LocalSessionStore(tmp_path)
    store.save("s", HISTORY, 0)
    db = store._db()
    db.execute("UPDATE session_messages SET data = '{\"role\": \"robot\"}' WHERE seq = 2")
    with pytest.raises(StoreError, match="session 's': stored message 2 is unreadable"):
        LocalSessionStore(tmp_path).load("s")
    store.close()


_WORKER = """
import json, sys
from contextfold.manager import ContextManager
from contextfold.stores.redis_blob import RedisBlobStore
from contextfold.stores.redis_session import RedisSessionStore
url = sys.argv[1]
sessions = RedisSessionStore(url)
messages, version = sessions.load("fleet-1")
cm = ContextManager(model="gpt-4o", store=RedisBlobStore(url), archive="memory", session_id="fleet-1")
cm.add(messages)
cm.add({"role": "tool", "tool_call_id": "call_big", "name": "bash", "content": sys.stdin.read()})
print(json.dumps({"version": sessions.save("fleet-1", cm.messages(), version)}))
"""


@pytest.mark.redis
def test_any_worker_picks_up_a_session_and_its_cached_tool_outputs(server: RedisServer) -> None:
    """Worker A (another process) runs a turn with a huge tool output; worker B continues the session."""
    server.client.flushall()
    sessions = RedisSessionStore(server.url)
    opening = [
        Message("user", "list the repository"),
        Message("assistant", "", (ToolCall("call_big", "bash", '{"cmd": "ls -R"}'),)),
    ]
    sessions.save("fleet-1", opening, 0)
    big = "".join(f"./src/module_{i}/file_{i}.py\n" for i in range(20_000))
    done = subprocess.run([sys.executable, "-c", _WORKER, server.url], input=big, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["version"] == 2

    messages, version = sessions.load("fleet-1")
    assert version == 2
    tool = messages[-1]
    assert tool.role == "tool" and len(tool.text) < len(big)  # the view was cut at write time …
    ref = str(tool.meta["ref"])
    cm = ContextManager(model="gpt-4o", store=RedisBlobStore(server.url), archive="memory", session_id="fleet-1")
    cm.add(messages)
    assert cm.cache is not None
    assert cm.cache.get(ref) == big  # … and worker B reads the whole output, byte for byte
    assert cm.cache.read(ref, offset=10_001, limit=1).lines == ("./src/module_10000/file_10000.py",)
    cm.add(Message("user", "thanks"))
    assert sessions.save("fleet-1", cm.messages(), version) == 3
    cm.close()
    sessions.close()


@pytest.mark.parametrize("make_pair", _BACKENDS, indirect=True)
def test_marks_are_saved_with_the_messages_and_a_refused_save_sets_none(make_pair: Callable[[], Pair]) -> None:
    one, two = make_pair()
    version = one.save("s", HISTORY[:2], 0, marks={"turn": "1", "keys": "[\"a\"]"})  # type: ignore[call-arg]
    state = two.load_state("s")  # type: ignore[attr-defined]
    assert (state.messages, state.version, dict(state.marks)) == (HISTORY[:2], version,
                                                                  {"turn": "1", "keys": "[\"a\"]"})
    two.save("s", HISTORY, version, marks={"turn": "2"})  # type: ignore[call-arg]
    with pytest.raises(SessionConflict):
        one.save("s", HISTORY[:3], version, marks={"turn": "9"})  # type: ignore[call-arg]
    state = one.load_state("s")  # type: ignore[attr-defined]
    assert dict(state.marks) == {"turn": "2", "keys": "[\"a\"]"}  # other marks stay, the refused one is not set
    assert one.delete("s") and dict(two.load_state("s").marks) == {}  # type: ignore[attr-defined]
