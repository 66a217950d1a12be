"""A stream whose lease key merely went (nobody took it over) still records its reply as the session's head.

A lease key goes without any takeover: in Redis by its time to live (seconds + LEASE_KEY_SLACK_S after the last
write), in a local store by the collection (drop_abandoned_leases). A stream stalled that long by a slow reader, with
no other request on the session, counted that as a lost lease and did not record its reply as the head: the client
got a complete reply it could never continue (409 "not the latest"). The head is decided by the session's fed mark.
Same set-up as test_serve_lease_lost.py (shared fake clock, ``stream_pause``); no sleeps.
"""
from __future__ import annotations

import threading
import uuid

import pytest
from _serve_support import (  # noqa: F401 (fixtures)
    ResponsesCaller,
    StreamReader,
    instances_fixture,
    replying_upstream_fixture,
    shared_clock,
)

from contextfold.serve import ProxyServer
from contextfold.serve.leases import LEASE_KEY_SLACK_S, LEASE_MARGIN_S, lease_key
from contextfold.testing import ScriptedLLMServer

CALLER = ResponsesCaller("sk-lease-gone-caller")


def test_a_stalled_stream_nobody_took_over_stays_continuable(upstream: ScriptedLLMServer,
                                                             instances: list[ProxyServer],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    one, _ = instances
    clock = shared_clock(instances, monkeypatch)
    nonce = uuid.uuid4().hex[:8]
    first = CALLER.post(one, {"input": f"Task gone-{nonce}: list the flaky tests."})
    assert first.status_code == 200, first.text
    backend = one.serve_app.backend
    session = CALLER.session_of(one, first.json()["id"])
    reader = StreamReader(CALLER, one, {"previous_response_id": first.json()["id"], "input": f"A-{nonce}: more?"})
    upstream.stream_pause = threading.Event()
    try:
        reader.start()
        assert reader.relayed.wait(CALLER.wait_s)
        clock.now += one.config.upstream_timeout_s + LEASE_MARGIN_S + LEASE_KEY_SLACK_S + 1
        if backend.leases is backend.blobs:
            backend.collect_blobs(clock.now)  # (the hourly collection: the lease looks abandoned)
        else:
            backend.leases.delete(lease_key(session))  # (what redis does at the key's time to live)
        upstream.stream_pause.set()
        reader.join(CALLER.wait_s)
    finally:
        upstream.stream_pause.set()
        upstream.stream_pause = None
    assert reader.events[-1]["type"] == "response.completed"
    # Nobody else continued the session: its reply is the head, and the client can go on from it.
    going_on = CALLER.post(one, {"previous_response_id": reader.events[-1]["response"]["id"],
                                 "input": f"B-{nonce}: go on"})
    assert going_on.status_code == 200, going_on.text  # (before the fix: 409 "not the latest")
