"""Two proxy instances over shared stores: a response is continued once at a time (serve.leases).

Red team 16: two Responses requests continuing the same response at once, one on each instance, were both fed into
the session (each instance's lock serializes only its own requests; between the first one's feed and its reply the
session's head is still that response). The scripted upstream holds the first continuation's call until the test
has the second one's answer: no sleeps. Both instances share a real store: SQLite files and a blob directory, or a
redis-server.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _serve_support import LEASE_SALT, MODEL, UPSTREAM_WINDOW, ResponsesCaller, instances_fixture  # noqa: F401 (fixtures)

import contextfold.serve.app as serve_app
from contextfold.serve import ProxyServer
from contextfold.serve.apis import item_key
from contextfold.serve.leases import LEASE_MARGIN_S, lease_key, take_lease
from contextfold.serve.sessions import continuation_tag
from contextfold.testing import ErrorReply, RecordedRequest, ScriptedLLMServer

SALT = LEASE_SALT
KEY = "sk-lease-caller"
CALLER = ResponsesCaller(KEY)
HEADERS = CALLER.headers
# Seconds a test waits for a request it knows is coming (a failure, not a pace: events end every wait sooner).
WAIT_S = 10.0


class Gates:
    """The upstream's answers: a request whose input holds a held marker waits until the test opens its gate."""

    def __init__(self) -> None:
        self.held: dict[str, tuple[threading.Event, threading.Event]] = {}

    def hold(self, marker: str) -> tuple[threading.Event, threading.Event]:
        """(arrived, opened) for requests holding ``marker``."""
        self.held[marker] = (threading.Event(), threading.Event())
        return self.held[marker]

    def answer(self, request: RecordedRequest) -> str:
        text = json.dumps(request.body.get("input"))
        for marker, (arrived, opened) in list(self.held.items()):
            if marker in text:
                arrived.set()
                opened.wait(WAIT_S)
        return f"reply {request.number} {uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def gates() -> Gates:
    return Gates()


@pytest.fixture(scope="module")
def upstream(gates: Gates) -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(handler=gates.answer, context_window=UPSTREAM_WINDOW, validator="formats") as server:
        yield server


post = CALLER.post


def streamed_id(response: httpx.Response) -> str:
    """The id of a streamed Responses reply (its ``response.completed`` event)."""
    for line in response.text.splitlines():
        if line.startswith("data:") and '"response.completed"' in line:
            return str(json.loads(line[5:])["response"]["id"])
    raise AssertionError(f"no response.completed event in {response.text[:300]!r}")


def upstream_input(upstream: ScriptedLLMServer) -> str:
    return json.dumps(upstream.requests[-1].body["input"])


session_of = CALLER.session_of


def test_two_continuations_of_one_response_at_once_feed_one(upstream: ScriptedLLMServer, gates: Gates,
                                                            instances: list[ProxyServer]) -> None:
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task lease-{nonce}: count the files."})
    assert first.status_code == 200
    arrived, opened = gates.hold(f"A-{nonce}")
    held: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: held.append(post(one, {
        "previous_response_id": first.json()["id"], "input": f"A-{nonce}: and the dirs?", "stream": True})))
    worker.start()
    try:
        assert arrived.wait(WAIT_S), "the first continuation never reached the upstream"
        calls = len(upstream.requests)
        refused = post(two, {"previous_response_id": first.json()["id"], "input": f"B-{nonce}: and the links?"})
    finally:
        opened.set()
        worker.join(WAIT_S)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["param"] == "previous_response_id" and "in flight" in error["message"]
    assert error["type"] == "invalid_request_error"
    assert len(upstream.requests) == calls + 1  # (the held one, answered now; the refused one never went)
    assert held[0].status_code == 200
    # The streamed continuation's lease went back with its reply: its reply is continued, on the other instance.
    assert post(two, {"previous_response_id": streamed_id(held[0]), "input": f"C-{nonce}"}).status_code == 200
    sent = upstream_input(upstream)
    assert sent.count(f"A-{nonce}") == 1 and f"B-{nonce}" not in sent
    assert sent.count(first.json()["output"][0]["content"][0]["text"]) == 1


def test_an_edited_retry_after_a_failed_call_is_taken(upstream: ScriptedLLMServer,
                                                      instances: list[ProxyServer]) -> None:
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task lease-{nonce}: list the tests."})
    upstream.push(ErrorReply.server_error())
    failed = post(one, {"previous_response_id": first.json()["id"], "input": f"A-{nonce}: and the slow ones?"})
    assert failed.status_code == 500
    retried = post(two, {"previous_response_id": first.json()["id"], "input": f"A2-{nonce}: the slow ones?"})
    assert retried.status_code == 200, retried.text
    # The previous reply is in the view once (it was fed again by the retry: the emptied mark stayed in the store).
    assert upstream_input(upstream).count(first.json()["output"][0]["content"][0]["text"]) == 1


def test_a_lease_left_by_a_dead_instance_is_taken_over_once_expired(upstream: ScriptedLLMServer,
                                                                     instances: list[ProxyServer],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task lease-{nonce}: find the flaky test."})
    response = first.json()["id"]
    backend = one.serve_app.backend
    start = time.time()
    # An instance that took the lease for another input and died before answering: never given back.
    take_lease(backend.blobs, session_of(one, response), response, "died", seconds=60.0, clock=lambda: start)
    body = {"previous_response_id": response, "input": f"B-{nonce}: which one?"}
    assert post(two, body).status_code == 409
    monkeypatch.setattr(two.serve_app.backend, "clock", lambda: start + 61.0)
    assert post(two, body).status_code == 200


def test_the_same_request_retried_takes_a_live_lease_over(upstream: ScriptedLLMServer,
                                                          instances: list[ProxyServer]) -> None:
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task lease-{nonce}: read the log."})
    response, text = first.json()["id"], f"A-{nonce}: what failed?"
    tag = continuation_tag(response, [item_key({"role": "user", "content": text})])
    # Its instance took the lease and died before answering; the client's SDK retries on the other one at once.
    take_lease(one.serve_app.backend.blobs, session_of(one, response), response, tag, seconds=60.0,
               clock=time.time)
    assert post(two, {"previous_response_id": response, "input": text}).status_code == 200
    assert upstream_input(upstream).count(f"A-{nonce}") == 1


def test_a_stream_outlasting_the_lease_renews_it(upstream: ScriptedLLMServer, gates: Gates,
                                                 instances: list[ProxyServer],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    one, _ = instances
    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task lease-{nonce}: bisect the regression."})
    response = first.json()["id"]
    backend = one.serve_app.backend
    now = [time.time()]
    monkeypatch.setattr(backend, "clock", lambda: now[0])
    written: list[bytes] = []
    put_if, lease = backend.leases.put_if, lease_key(session_of(one, response))

    def recording(key: str, data: bytes | None, expected: bytes | None) -> bool:
        if key == lease and data is not None:
            written.append(data)
        return put_if(key, data, expected)

    monkeypatch.setattr(backend.leases, "put_if", recording)
    arrived, opened = gates.hold(f"A-{nonce}")
    held: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: held.append(post(one, {
        "previous_response_id": response, "input": f"A-{nonce}: which commit?", "stream": True})))
    worker.start()
    try:
        assert arrived.wait(WAIT_S), "the continuation never reached the upstream"
        taken = now[0]
        now[0] += one.config.upstream_timeout_s  # (the upstream's first event, just within its read timeout)
    finally:
        opened.set()
        worker.join(WAIT_S)
    assert held[0].status_code == 200
    # Renewed at the stream's first event: its time runs from then, past where the first one ended.
    assert written and json.loads(written[0])["until"] == now[0] + one.config.upstream_timeout_s + LEASE_MARGIN_S
    assert json.loads(written[0])["until"] > taken + one.config.upstream_timeout_s + LEASE_MARGIN_S


def test_a_conversation_request_repeating_its_input_keeps_its_lease_until_fed(
        upstream: ScriptedLLMServer, instances: list[ProxyServer], monkeypatch: pytest.MonkeyPatch) -> None:
    # Reviewer 2 (s17r): the takeover rule read "fed and answered" from a fed mark with the same input keys and an
    # older head; a request repeating the previous one's input ("go on") matched it before it was fed, and another
    # instance's request took its lease over: both were fed, one reply lost.
    one, two = instances
    nonce = uuid.uuid4().hex[:8]
    conversation = f"conv_lease_{nonce}"
    again = {"conversation": conversation, "input": f"go on {nonce}"}
    assert post(one, {"conversation": conversation, "input": f"Task lease-{nonce}: count the files."}).status_code \
        == 200
    assert post(one, again).status_code == 200
    # A: the same input again, paused once it holds the lease and before it is fed (a slow load or compaction).
    real_open_turn = serve_app.open_turn
    a_holds, a_go = threading.Event(), threading.Event()

    def paused_open_turn(backend: Any, exchange: Any, session: str, **kwargs: Any) -> Any:
        if exchange.body.get("input") == again["input"] and not a_holds.is_set():
            a_holds.set()
            a_go.wait(WAIT_S)
        return real_open_turn(backend, exchange, session, **kwargs)

    monkeypatch.setattr(serve_app, "open_turn", paused_open_turn)
    answered: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: answered.append(post(one, again)))
    worker.start()
    try:
        assert a_holds.wait(WAIT_S), "the repeated request never took its lease"
        other = post(two, {"conversation": conversation, "input": f"B-{nonce}: and the dirs?"})
    finally:
        a_go.set()
        worker.join(WAIT_S)
    assert other.status_code == 409, other.text  # (on main before the fix: 200, fed while A held the lease)
    assert other.json()["error"]["param"] == "conversation"
    assert answered[0].status_code == 200
    assert post(one, {"conversation": conversation, "input": f"C-{nonce}: done?"}).status_code == 200
    sent = upstream_input(upstream)
    assert sent.count(answered[0].json()["output"][0]["content"][0]["text"]) == 1 and f"B-{nonce}" not in sent
