"""A stream whose lease key merely went (nobody took it over) still records its reply as the session's head.

A lease key goes without any takeover: in Redis by its time to live (seconds + LEASE_KEY_SLACK_S after the last
write), in a local store by the collection (drop_abandoned_leases). A stream stalled that long by a slow reader, with
no other request on the session, counted that as a lost lease and did not record its reply as the head: the client
got a complete reply it could never continue (409 "not the latest"). The head is decided by the session's fed mark.
Same set-up as test_serve_lease_lost.py (shared fake clock, ``stream_pause``); no sleeps.
"""
from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _serve_support import LEASE_SALT, MODEL, UPSTREAM_WINDOW, Clock, instances_fixture  # noqa: F401 (fixtures)

from contextfold.serve import ProxyServer
from contextfold.serve.identity import caller_scope, session_id
from contextfold.serve.leases import LEASE_KEY_SLACK_S, LEASE_MARGIN_S, lease_key
from contextfold.serve.sessions import resolve_pointer
from contextfold.testing import ScriptedLLMServer

KEY = "sk-lease-gone-caller"
HEADERS = {"authorization": f"Bearer {KEY}"}
WAIT_S = 10.0


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(default="a scripted reply of several words", context_window=UPSTREAM_WINDOW,
                           validator="formats") as server:
        yield server


def post(proxy: ProxyServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(proxy.url + "/v1/responses", json={"model": MODEL, **body}, headers=HEADERS, timeout=WAIT_S)


def test_a_stalled_stream_nobody_took_over_stays_continuable(upstream: ScriptedLLMServer,
                                                             instances: list[ProxyServer],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    one, _ = instances
    clock = Clock(1_000_000_000.0)
    for proxy in instances:
        monkeypatch.setattr(proxy.serve_app.backend, "clock", clock)
    nonce = uuid.uuid4().hex[:8]
    first = post(one, {"input": f"Task gone-{nonce}: list the flaky tests."})
    assert first.status_code == 200, first.text
    backend = one.serve_app.backend
    session = resolve_pointer(backend, session_id(caller_scope(KEY, LEASE_SALT), "response", first.json()["id"]))
    assert session is not None
    relayed, events = threading.Event(), []
    body = {"model": MODEL, "stream": True, "previous_response_id": first.json()["id"], "input": f"A-{nonce}: more?"}

    def slow_reader() -> None:
        with httpx.stream("POST", one.url + "/v1/responses", json=body, headers=HEADERS, timeout=WAIT_S) as answer:
            for line in answer.iter_lines():
                if line.startswith("data:"):
                    events.append(json.loads(line[5:]))
                    relayed.set()

    upstream.stream_pause = threading.Event()
    worker = threading.Thread(target=slow_reader)
    try:
        worker.start()
        assert relayed.wait(WAIT_S)
        clock.now += one.config.upstream_timeout_s + LEASE_MARGIN_S + LEASE_KEY_SLACK_S + 1
        if backend.leases is backend.blobs:
            backend.collect_blobs(clock.now)  # (the hourly collection: the lease looks abandoned)
        else:
            backend.leases.delete(lease_key(session))  # (what redis does at the key's time to live)
        upstream.stream_pause.set()
        worker.join(WAIT_S)
    finally:
        upstream.stream_pause.set()
        upstream.stream_pause = None
    assert events[-1]["type"] == "response.completed"
    # Nobody else continued the session: its reply is the head, and the client can go on from it.
    going_on = post(one, {"previous_response_id": events[-1]["response"]["id"], "input": f"B-{nonce}: go on"})
    assert going_on.status_code == 200, going_on.text  # (before the fix: 409 "not the latest")
