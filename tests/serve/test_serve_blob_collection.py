"""What proxied sessions leave in the blob store is collected at the sessions' own age (``Backend.collect_blobs``).

base19: nothing collected it. A manager's cache runs the store-wide retention every 200 outputs it stores, and the
proxy's managers live one turn; a local session store's prune deleted sessions and their leases only; and Redis
sessions expire unseen, so beside them a local blob store kept every tool output, claim, secret memory and abandoned
lease of every session for good (the outputs hold what the tools printed, secrets in clear).

A real redis-server for the sessions, a local blob store in a temporary directory, the scripted upstream.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _serve_support import MODEL, UPSTREAM_WINDOW, proxy_config

from contextfold.cache import ToolOutputCache
from contextfold.cache.owners import OWNER_INFIX
from contextfold.serve import ProxyServer, ServeConfig
from contextfold.serve.collection import AGES_KEY, FOR_GOOD_NOTED_S
from contextfold.serve.leases import LEASE_KEY_PREFIX, take_lease
from contextfold.serve.sessions import Backend
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall
from contextfold.testing.services import RedisServer

MAX_AGE_S = 3600.0


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(default="Done.", context_window=UPSTREAM_WINDOW) as server:
        yield server


@pytest.fixture
def proxy(upstream: ScriptedLLMServer, redis_server: RedisServer, tmp_path: Path) -> Iterator[ProxyServer]:
    config = proxy_config(upstream, sessions=redis_server.url, store="local", state_dir=str(tmp_path),
                          archive=str(tmp_path / "archive"), session_max_age_s=MAX_AGE_S)
    with ProxyServer(config) as server:
        yield server


def listing(turn: int) -> str:
    return "\n".join(f"{turn}.{i:03d} /var/log/app/worker_{i % 7}.log  {i * 37} bytes  rotated" for i in range(300))


def converse(upstream: ScriptedLLMServer, proxy: ProxyServer, turns: int) -> None:
    """A chat session whose tool outputs the proxy stores as they leave the view."""
    nonce = uuid.uuid4().hex[:8]
    history: list[dict[str, Any]] = [{"role": "user", "content": f"Task collect-{nonce}: read the worker logs."}]
    for turn in range(turns):
        upstream.push(Reply.calling(ScriptedToolCall("cat", {"file": f"log{turn}"}, id=f"call_{nonce}_{turn}")))
        answer = httpx.post(proxy.url + "/v1/chat/completions", timeout=30,
                            json={"model": MODEL, "messages": history})
        assert answer.status_code == 200, answer.text
        history += [answer.json()["choices"][0]["message"],
                    {"role": "tool", "tool_call_id": f"call_{nonce}_{turn}", "content": listing(turn)}]


def keys(proxy: ProxyServer) -> list[str]:
    """The blob store's keys, but the instances' note of their session ages (serve.collection)."""
    return sorted(info.key for info in proxy.serve_app.backend.blobs.entries() if info.key != AGES_KEY)


def test_what_expired_sessions_left_beside_redis_sessions_is_collected(upstream: ScriptedLLMServer,
                                                                       proxy: ProxyServer) -> None:
    backend = proxy.serve_app.backend
    converse(upstream, proxy, turns=8)
    # (an instance that died holding a continuation's lease: nothing takes it over, its session expires unseen)
    take_lease(backend.leases, f"session-{uuid.uuid4().hex[:8]}", "resp_gone", "tag", seconds=900.0,
               clock=time.time)
    left = keys(proxy)
    assert [k for k in left if OWNER_INFIX in k] and [k for k in left if k.startswith(LEASE_KEY_PREFIX)]
    assert backend.prune_sessions(now=time.time() + MAX_AGE_S / 2) == []
    assert [k for k in keys(proxy) if not k.startswith(LEASE_KEY_PREFIX)] == \
        [k for k in left if not k.startswith(LEASE_KEY_PREFIX)]  # (used within the sessions' age: all kept)
    backend.prune_sessions(now=time.time() + MAX_AGE_S + 60)
    assert keys(proxy) == []  # (base19: every output, claim and the lease stayed)


def test_outputs_used_within_the_sessions_age_are_kept(upstream: ScriptedLLMServer, proxy: ProxyServer) -> None:
    converse(upstream, proxy, turns=8)
    old = set(keys(proxy))
    later = time.time() + MAX_AGE_S + 60
    backend = proxy.serve_app.backend
    backend.collect_blobs(later - MAX_AGE_S / 2)  # (nothing of it is past the age yet)
    assert set(keys(proxy)) == old
    converse(upstream, proxy, turns=8)  # (another session, used now)
    new = set(keys(proxy)) - old
    backend.collect_blobs(time.time() + MAX_AGE_S / 2)
    assert new and new <= set(keys(proxy))


def backend(tmp_path: Path, max_age: float | None) -> Backend:
    return Backend(ServeConfig(port=0, sessions="memory", store="local", state_dir=str(tmp_path), archive="memory",
                               session_max_age_s=max_age))


def test_instances_told_different_ages_collect_at_the_longest(tmp_path: Path) -> None:
    # Two configs over one store: the instance told 1 h must not delete what sessions of the one told 10 days still
    # have (a collection at its own age did).
    short, long, keeping = backend(tmp_path, MAX_AGE_S), backend(tmp_path, 10 * 86_400.0), None
    try:
        now = time.time()
        ref = ToolOutputCache(short.blobs, session_id="a-session-of-the-long-instance").put(listing(1)).id
        long.collect_blobs(now)
        short.collect_blobs(now + 2 * MAX_AGE_S)
        assert short.blobs.exists(ref)
        keeping = backend(tmp_path, None)  # (a third keeps sessions for good: nobody collects while it is counted)
        keeping.collect_blobs(now)
        short.collect_blobs(now + 11 * 86_400.0)  # (past the long instance's age: only the third counts)
        assert short.blobs.exists(ref)
        short.collect_blobs(now + FOR_GOOD_NOTED_S + 86_400.0)
        assert not short.blobs.exists(ref)
    finally:
        for one in (short, long, keeping):
            if one is not None:
                one.close()


def test_a_note_another_writer_left_unreadable_is_written_anew(tmp_path: Path) -> None:
    from contextfold.serve.collection import collection_age
    from contextfold.stores.local import LocalBlobStore

    store = LocalBlobStore(tmp_path)
    try:
        for garbage in (b"not json", b"[1, 2]", b'{"x": [0, 1], "y": ["a", 1], "z": [5, NaN]}'):
            store.put(AGES_KEY, garbage)
            assert collection_age(store, "me", MAX_AGE_S, 1_000.0) == MAX_AGE_S
        assert collection_age(store, "other", None, 1_000.0) == float("inf")
    finally:
        store.close()


def test_a_backend_made_reads_nothing_of_the_store_until_a_turn(tmp_path: Path) -> None:
    # A backend a test or the CLI makes started a collection (every key of the store read) on a thread, and its
    # close waited for it: the collection's note of the age is what shows it ran.
    made = backend(tmp_path, MAX_AGE_S)
    made.close()
    again = backend(tmp_path, MAX_AGE_S)
    try:
        assert not again.blobs.exists(AGES_KEY)  # (before the fix: noted by the collection at construction)
    finally:
        again.close()


def test_instances_of_one_age_note_it_once_however_often_they_restart(tmp_path: Path) -> None:
    now = time.time()
    for restart in range(3):
        one = backend(tmp_path, MAX_AGE_S)
        try:
            one.collect_blobs(now + restart)
        finally:
            one.close()
    other = backend(tmp_path, 2 * MAX_AGE_S)
    try:
        other.collect_blobs(now + 3)
        noted = json.loads(other.blobs.get(AGES_KEY))
    finally:
        other.close()
    # (before the fix: an entry per process, four)
    assert sorted(noted.values()) == [[MAX_AGE_S, now + 2], [2 * MAX_AGE_S, now + 3]]
