"""Leases (serve.leases) when the world misbehaves: tries of one request ending out of order, leases never given
back (in Redis they expire past their holders' time), ``conversation`` requests on two instances at once, and one fed
on a head that moved between reading it and taking the lease (re-tagged: the takeover rule matches its ``fed`` mark).

Two proxy instances over one shared store (SQLite files and a blob directory, or a redis-server); the scripted
upstream holds a request whose input holds a marker until the test opens that request's gate (the first arrival's
gate, then the second's): no sleeps.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _serve_support import LEASE_SALT, MODEL, UPSTREAM_WINDOW, ResponsesCaller, instances_fixture, proxy_config  # noqa: F401 (fixtures)

from contextfold.errors import StoreError
from contextfold.serve import ProxyServer
from contextfold.serve.leases import LEASE_KEY_PREFIX, LEASE_MARGIN_S, lease_key, take_lease
from contextfold.stores.memory import MemoryBlobStore
from contextfold.testing import ErrorReply, RecordedRequest, ScriptedLLMServer
from contextfold.testing.server import ScriptedReply

SALT = LEASE_SALT
KEY = "sk-lease-upkeep-caller"
CALLER = ResponsesCaller(KEY)
HEADERS = CALLER.headers
# Seconds a test waits for a request it knows is coming (a failure, not a pace: events end every wait sooner).
WAIT_S = 10.0
NONCE = "r18f1-retag-Kp2v"


class Gates:
    """The upstream's answers: the n-th request holding a held marker waits until the test opens its n-th gate.

    A held request gets ``reply`` when one is given; the requests after the held ones are answered as any.
    """

    def __init__(self) -> None:
        self.held: dict[str, tuple[list[threading.Event], list[threading.Event], ScriptedReply | None]] = {}
        self._lock = threading.Lock()

    def hold(self, marker: str, tries: int = 1,
             reply: ScriptedReply | None = None) -> tuple[list[threading.Event], list[threading.Event]]:
        """(arrived, opened) per try of requests holding ``marker``; ``reply``: what they get (else a text)."""
        arrived = [threading.Event() for _ in range(tries)]
        opened = [threading.Event() for _ in range(tries)]
        self.held[marker] = (arrived, opened, reply)
        return arrived, opened

    def answer(self, request: RecordedRequest) -> ScriptedReply:
        text = json.dumps(request.body.get("input"))
        for marker, (arrived, opened, reply) in list(self.held.items()):
            if marker in text:
                with self._lock:
                    n = next((i for i, event in enumerate(arrived) if not event.is_set()), None)
                    if n is not None:
                        arrived[n].set()
                if n is not None:  # (later requests carry the marker in their history: answered as any)
                    opened[n].wait(WAIT_S)
                    if reply is not None:
                        return reply
        return f"reply {request.number} {uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def gates() -> Gates:
    return Gates()


@pytest.fixture(scope="module")
def upstream(gates: Gates) -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(handler=gates.answer, context_window=UPSTREAM_WINDOW, validator="formats") as server:
        yield server


post = CALLER.post


def in_thread(proxy: ProxyServer, body: dict[str, Any], into: list[httpx.Response]) -> threading.Thread:
    worker = threading.Thread(target=lambda: into.append(post(proxy, body)))
    worker.start()
    return worker


def upstream_input(upstream: ScriptedLLMServer) -> str:
    return json.dumps(upstream.requests[-1].body["input"])


def reply_text(response: httpx.Response) -> str:
    return str(response.json()["output"][0]["content"][0]["text"])


def test_a_try_ending_before_the_retry_that_joined_it_leaves_nothing_held(
        upstream: ScriptedLLMServer, gates: Gates, instances: list[ProxyServer]) -> None:
    # The same continuation sent twice (an SDK's retry on the other instance while the first is in flight); both
    # calls fail, the first one first. The retry gave back what it had taken over: the first's lease, whose holder
    # was gone, and an edited retry was refused until its expiry (c04dd8d: 409).
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task upkeep-{nonce}: list the flaky tests."})
    body = {"previous_response_id": first.json()["id"], "input": f"A-{nonce}: and the slow ones?"}
    arrived, opened = gates.hold(f"A-{nonce}", tries=2, reply=ErrorReply.server_error())
    answers: list[httpx.Response] = []
    try:
        worker = in_thread(one, body, answers)
        assert arrived[0].wait(WAIT_S), "the first try never reached the upstream"
        retry = in_thread(two, body, answers)
        assert arrived[1].wait(WAIT_S), "the retry never reached the upstream"
        opened[0].set()
        worker.join(WAIT_S)
        opened[1].set()
        retry.join(WAIT_S)
    finally:
        for gate in opened:
            gate.set()
    assert [answer.status_code for answer in answers] == [500, 500]
    edited = post(one, {"previous_response_id": first.json()["id"], "input": f"A2-{nonce}: the slow ones?"})
    assert edited.status_code == 200, edited.text
    sent = upstream_input(upstream)
    assert f"A2-{nonce}" in sent and sent.count(reply_text(first)) == 1


def lease_keys(proxy: ProxyServer) -> list[str]:
    return [info.key for info in proxy.serve_app.backend.blobs.entries() if info.key.startswith(LEASE_KEY_PREFIX)]


def test_leases_never_given_back_stay_one_a_session(instances: list[ProxyServer],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The store refuses every give-back (an outage at that moment; an instance dying after its reply is recorded
    # leaves the same): each continuation of the chain left its lease for good, one more key per response
    # (c04dd8d: 4 after 4 continuations). The next continuation still goes through: the session moved past the
    # response the lease was on.
    one, _ = instances
    nonce = uuid.uuid4().hex[:8]
    before = set(lease_keys(one))
    leases = one.serve_app.backend.leases
    put_if = leases.put_if

    def no_give_back(key: str, data: bytes | None, expected: bytes | None) -> bool:
        if key.startswith(LEASE_KEY_PREFIX) and data is None:
            raise StoreError("the store is unavailable (test)")
        return put_if(key, data, expected)

    monkeypatch.setattr(leases, "put_if", no_give_back)
    reply = post(one, {"input": f"Task upkeep-{nonce}: read the build log."})
    for turn in range(4):
        reply = post(one, {"previous_response_id": reply.json()["id"], "input": f"T{turn}-{nonce}: and then?"})
        assert reply.status_code == 200, reply.text
    assert len(set(lease_keys(one)) - before) <= 1


def test_two_requests_of_one_conversation_at_once_feed_one(upstream: ScriptedLLMServer, gates: Gates,
                                                           instances: list[ProxyServer]) -> None:
    # Without a lease, the second request (another instance) was fed while the first was in flight: its input went
    # into the session after the first's, the first's reply was lost when the second's reply replaced it as the one
    # to feed next (c04dd8d: 200, then a view with B's input and without A's reply).
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    conversation = f"conv_{nonce}"
    assert post(one, {"conversation": conversation, "input": f"Task upkeep-{nonce}: count the files."}) \
        .status_code == 200
    arrived, opened = gates.hold(f"A-{nonce}")
    held: list[httpx.Response] = []
    try:
        worker = in_thread(one, {"conversation": conversation, "input": f"A-{nonce}: and the dirs?"}, held)
        assert arrived[0].wait(WAIT_S), "the first request never reached the upstream"
        calls = len(upstream.requests)
        refused = post(two, {"conversation": conversation, "input": f"B-{nonce}: and the links?"})
    finally:
        opened[0].set()
    worker.join(WAIT_S)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["param"] == "conversation"
    assert len(upstream.requests) == calls + 1  # (the held one; the refused one never went)
    assert held[0].status_code == 200
    assert post(two, {"conversation": conversation, "input": f"C-{nonce}: done?"}).status_code == 200
    sent = upstream_input(upstream)
    assert sent.count(f"A-{nonce}") == 1 and f"B-{nonce}" not in sent and sent.count(reply_text(held[0])) == 1


def test_the_same_conversation_request_retried_on_another_instance_is_taken(
        upstream: ScriptedLLMServer, gates: Gates, instances: list[ProxyServer]) -> None:
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    conversation = f"conv_{nonce}"
    assert post(one, {"conversation": conversation, "input": f"Task upkeep-{nonce}: read the log."}).status_code == 200
    body = {"conversation": conversation, "input": f"A-{nonce}: what failed?"}
    arrived, opened = gates.hold(f"A-{nonce}", tries=2)
    answers: list[httpx.Response] = []
    try:
        worker = in_thread(one, body, answers)
        assert arrived[0].wait(WAIT_S), "the first try never reached the upstream"
        retry = in_thread(two, body, answers)  # (its SDK retried on the other instance: the same request)
        assert arrived[1].wait(WAIT_S), "the retry never reached the upstream"
    finally:
        for gate in opened:
            gate.set()
    worker.join(WAIT_S)
    retry.join(WAIT_S)
    assert [answer.status_code for answer in answers] == [200, 200]
    assert upstream_input(upstream).count(f"A-{nonce}") == 1


def test_a_pruned_sessions_abandoned_lease_goes_with_it(upstream: ScriptedLLMServer, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # A session never continued after its instance died holding the lease: nothing took the lease over, and pruning
    # the session (past its age) left it in the store for good (c04dd8d: the key stays).
    config = proxy_config(upstream, key_salt=SALT, sessions="local", store="local", state_dir=str(tmp_path),
                          archive=str(tmp_path / "archive"), session_max_age_s=3600.0)
    with ProxyServer(config) as proxy:
        nonce = uuid.uuid4().hex[:8]
        blobs = proxy.serve_app.backend.blobs
        first = post(proxy, {"input": f"Task upkeep-{nonce}: read the log."})
        monkeypatch.setattr(blobs, "put_if", lambda key, data, expected: False)  # (no give-back gets through)
        assert post(proxy, {"previous_response_id": first.json()["id"], "input": f"A-{nonce}"}).status_code == 200
        assert lease_keys(proxy)
        monkeypatch.undo()
        assert proxy.serve_app.backend.prune_sessions(now=time.time() + 2 * 3600.0)
        assert lease_keys(proxy) == []


def test_the_prune_at_start_drops_leases_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (the prune at start ran before the blob store was opened: dropping a pruned session's lease must not break it)
    from contextfold.serve import ServeConfig
    from contextfold.serve.leases import lease_key, take_lease
    from contextfold.serve.sessions import Backend
    from contextfold.stores.session_local import LocalSessionStore

    config = ServeConfig(port=0, sessions="local", store="local", state_dir=str(tmp_path), archive="memory")
    backend = Backend(config)
    take_lease(backend.blobs, "sess-pruned", "resp_1", "tag", seconds=60.0, clock=time.time)
    backend.close()
    monkeypatch.setattr(LocalSessionStore, "prune", lambda self, max_age, now=None: ["sess-pruned"])
    backend = Backend(config)
    try:
        assert not backend.blobs.exists(lease_key("sess-pruned"))
    finally:
        backend.close()


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
        pytest.skip("a local store's leases go when their sessions are pruned (test above)")
    import redis

    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task upkeep-{nonce}: read the build log."})
    no_give_back(monkeypatch, one)
    assert post(one, {"previous_response_id": first.json()["id"], "input": f"A-{nonce}: and?"}).status_code == 200
    session = CALLER.session_of(one, first.json()["id"])
    store = lease_store(one)
    left = redis.Redis.from_url(one.config.store).ttl(f"{store.prefix}:meta:{lease_key(session)}")
    held = one.config.upstream_timeout_s + LEASE_MARGIN_S
    assert held <= left <= held + 2 * LEASE_MARGIN_S  # (08dd6b2: -1, kept for good)


def test_a_conversation_fed_on_a_head_that_moved_can_be_taken_over_once_answered(
        instances: list[ProxyServer], monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    conversation = f"conv_retag_{nonce}"
    assert post(one, {"conversation": conversation, "input": f"Task upkeep-{nonce}: count the files."}) \
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


def test_a_store_outage_during_a_retag_is_a_store_error_not_a_conflict() -> None:
    # (8c274dd: Conflict, a 409 "another request ... is in flight" where none was; a StoreError is open_turn's retry
    # and then its 503)
    store = MemoryBlobStore()
    lease = take_lease(store, f"sess-{NONCE}", None, f"head0:{NONCE}", seconds=900, clock=lambda: 1000.0)

    def down(key: str, data: bytes | None, expected: bytes | None) -> bool:
        raise StoreError(f"the store is unavailable ({NONCE})")

    store.put_if = down  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        lease.retag(f"head1:{NONCE}")
