"""A lease's key lives no longer than it is needed, and its tag is the one its ``fed`` mark will carry, when the
world misbehaves (serve.leases).

(1) A Redis session expires on its own: the lease key an instance left (it died, or its give-back met an outage)
stayed for good, ~150 bytes a session. It now gets a time to live at each write, past its holders' time.
(2) A conversation's request tags its lease with the head it read before taking it; another request answered in
between moved that head, the request was fed on the new one, and its ``fed`` mark never matched its lease's tag: had
its instance died after its reply was recorded, the conversation stayed closed until the lease's expiry.

Two proxy instances over one shared store (SQLite files and a blob directory, or a redis-server); the interleaving is
made by a hook on the lease's first write, no sleeps.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _serve_support import LEASE_SALT, MODEL, UPSTREAM_WINDOW, instances_fixture  # noqa: F401 (fixtures)

from contextfold.errors import StoreError
from contextfold.serve import ProxyServer
from contextfold.serve.identity import caller_scope, session_id
from contextfold.serve.leases import LEASE_KEY_PREFIX, LEASE_MARGIN_S, lease_key
from contextfold.serve.sessions import resolve_pointer
from contextfold.testing import ScriptedLLMServer

KEY = "sk-lease-lifetime-caller"
HEADERS = {"authorization": f"Bearer {KEY}"}
# Seconds a test waits for an answer (a failure, not a pace).
WAIT_S = 10.0


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(handler=lambda request: f"reply {request.number} {uuid.uuid4().hex[:8]}",
                           context_window=UPSTREAM_WINDOW, validator="formats") as server:
        yield server


def post(proxy: ProxyServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(proxy.url + "/v1/responses", json={"model": MODEL, **body}, headers=HEADERS, timeout=WAIT_S)


def lease_store(proxy: ProxyServer) -> Any:
    backend = proxy.serve_app.backend
    return getattr(backend, "leases", backend.blobs)  # (08dd6b2 wrote leases to the blob store itself)


def no_give_back(monkeypatch: pytest.MonkeyPatch, proxy: ProxyServer) -> None:
    """The instance's give-backs meet a store outage (as if it died once its reply was recorded)."""
    store = lease_store(proxy)
    put_if = store.put_if

    def failing(key: str, data: bytes | None, expected: bytes | None) -> bool:
        if key.startswith(LEASE_KEY_PREFIX) and data is None:
            raise StoreError("the store is unavailable (test)")
        return put_if(key, data, expected)

    monkeypatch.setattr(store, "put_if", failing)


def test_a_lease_left_in_redis_expires_after_its_holders_time(instances: list[ProxyServer],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    one, _ = instances
    if not one.config.store.startswith("redis://"):
        pytest.skip("a local store's leases go when their sessions are pruned (test_serve_lease_upkeep)")
    import redis

    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task lifetime-{nonce}: read the build log."})
    no_give_back(monkeypatch, one)
    assert post(one, {"previous_response_id": first.json()["id"], "input": f"A-{nonce}: and?"}).status_code == 200
    session = resolve_pointer(one.serve_app.backend, session_id(caller_scope(KEY, LEASE_SALT), "response",
                                                                first.json()["id"]))
    assert session is not None
    store = lease_store(one)
    left = redis.Redis.from_url(one.config.store).ttl(f"{store.prefix}:meta:{lease_key(session)}")
    held = one.config.upstream_timeout_s + LEASE_MARGIN_S
    assert held <= left <= held + 2 * LEASE_MARGIN_S  # (08dd6b2: -1, kept for good)


def test_a_conversation_fed_on_a_head_that_moved_can_be_taken_over_once_answered(
        instances: list[ProxyServer], monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    conversation = f"conv_lifetime_{nonce}"
    assert post(one, {"conversation": conversation, "input": f"Task lifetime-{nonce}: count the files."}) \
        .status_code == 200
    # B (instance one) reads the head, then, before its lease is taken, A (instance two) is answered: the head moves.
    store = lease_store(one)
    put_new = store.put_new
    answered: list[httpx.Response] = []

    def a_first(key: str, data: bytes) -> bool:
        if key.startswith(LEASE_KEY_PREFIX) and not answered:
            answered.append(post(two, {"conversation": conversation, "input": f"A-{nonce}: and the dirs?"}))
        return put_new(key, data)

    monkeypatch.setattr(store, "put_new", a_first)
    no_give_back(monkeypatch, one)  # (B's instance dies once its reply is recorded: its lease is left)
    b = post(one, {"conversation": conversation, "input": f"B-{nonce}: and the links?"})
    assert [r.status_code for r in answered] == [200] and b.status_code == 200, b.text
    # The conversation moved past B (fed, answered): C is not kept waiting for B's lease to expire.
    c = post(two, {"conversation": conversation, "input": f"C-{nonce}: done?"})
    assert c.status_code == 200, c.text  # (08dd6b2: 409, the lease's tag named the head B read, not the one it fed on)
