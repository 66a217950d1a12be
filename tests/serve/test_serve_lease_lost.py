"""A continuation whose lease was taken over while it was still relaying (serve.leases): it must not move the
session's head afterwards.

A stream stalled longer than its lease's time (a client that stops reading: nothing renews the hold meanwhile) loses
its lease to the next continuation, which is fed and answered. When the stalled stream ends, its reply is no longer
the session's to record: writing it as the head put the session back on a response the new holder had continued
past (base19: the new holder's own reply could no longer be continued, 409 "not the latest"), and the renewal that
found the hold gone was ignored silently.

Two proxy instances over one shared store (SQLite files and a blob directory, or a redis-server); the scripted
upstream holds the stream after its first event (``stream_pause``) while the test moves both instances' clocks past
the lease's time: no sleeps.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _serve_support import LEASE_SALT, MODEL, UPSTREAM_WINDOW, Clock, instances_fixture, proxy_config  # noqa: F401 (fixtures)

from contextfold.serve import ProxyServer
from contextfold.serve.identity import caller_scope, session_id
from contextfold.serve.leases import LEASE_MARGIN_S
from contextfold.serve.sessions import resolve_pointer, session_marks
from contextfold.testing import ScriptedLLMServer

KEY = "sk-lease-lost-caller"
HEADERS = {"authorization": f"Bearer {KEY}"}
# Seconds a test waits for what it knows is coming (a failure, not a pace).
WAIT_S = 10.0


class Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(default="a scripted reply of several words", context_window=UPSTREAM_WINDOW,
                           validator="formats") as server:
        yield server


def post(proxy: ProxyServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(proxy.url + "/v1/responses", json={"model": MODEL, **body}, headers=HEADERS, timeout=WAIT_S)


def test_a_stream_that_lost_its_lease_does_not_move_the_head_back(
        upstream: ScriptedLLMServer, instances: list[ProxyServer], monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = instances
    clock = Clock(1_000_000_000.0)
    for proxy in instances:
        monkeypatch.setattr(proxy.serve_app.backend, "clock", clock)
    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task lost-{nonce}: list the flaky tests."})
    assert first.status_code == 200, first.text
    scope = caller_scope(KEY, LEASE_SALT)
    session = resolve_pointer(one.serve_app.backend, session_id(scope, "response", first.json()["id"]))
    assert session is not None
    relayed, events = threading.Event(), []
    stalled_body = {"model": MODEL, "stream": True, "previous_response_id": first.json()["id"],
                    "input": f"A-{nonce}: and the slow ones?"}

    def stalled_client() -> None:
        with httpx.stream("POST", one.url + "/v1/responses", json=stalled_body, headers=HEADERS,
                          timeout=WAIT_S) as answer:
            for line in answer.iter_lines():
                if line.startswith("data:"):
                    events.append(json.loads(line[5:]))
                    relayed.set()

    upstream.stream_pause = threading.Event()
    worker = threading.Thread(target=stalled_client)
    try:
        worker.start()
        assert relayed.wait(WAIT_S), "the stream's first event never reached the client"
        clock.now += one.config.upstream_timeout_s + LEASE_MARGIN_S + 1  # (no event relayed meanwhile: no renewal)
        taken = post(two, {"previous_response_id": first.json()["id"], "input": f"B-{nonce}: and the fast ones?"})
        assert taken.status_code == 200, taken.text  # (the lease expired: taken over, fed, answered)
        assert session_marks(one.serve_app.backend, session)["head"] == taken.json()["id"]
        said = Said()
        logging.getLogger("contextfold.serve").addHandler(said)  # (on the proxy's logger: handed each line at once)
        try:
            upstream.stream_pause.set()
            worker.join(WAIT_S)
        finally:
            logging.getLogger("contextfold.serve").removeHandler(said)
    finally:
        upstream.stream_pause.set()
        upstream.stream_pause = None
    assert events[-1]["type"] == "response.completed"  # (the stalled client still gets its whole reply)
    assert session_marks(one.serve_app.backend, session)["head"] == taken.json()["id"]
    # (the new holder gave its lease back: the stalled stream's renewal finds it gone, not taken, and the session's
    # fed mark, another request's now, is what keeps its reply from the head)
    assert "reply not the head" in said.messages
    following = post(one, {"previous_response_id": taken.json()["id"], "input": f"C-{nonce}: which are both?"})
    assert following.status_code == 200, following.text
    # The stalled reply is still known to the proxy: continuing it is refused as not the latest (not as unknown).
    stalled = post(two, {"previous_response_id": events[-1]["response"]["id"], "input": f"D-{nonce}: go on"})
    assert stalled.status_code == 409 and stalled.json()["error"]["param"] == "previous_response_id", stalled.text
