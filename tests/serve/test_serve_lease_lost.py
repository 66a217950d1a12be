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

import logging
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
from contextfold.serve.leases import LEASE_MARGIN_S
from contextfold.serve.sessions import session_marks
from contextfold.testing import ScriptedLLMServer

CALLER = ResponsesCaller("sk-lease-lost-caller")


class Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_stream_that_lost_its_lease_does_not_move_the_head_back(
        upstream: ScriptedLLMServer, instances: list[ProxyServer], monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = instances
    clock = shared_clock(instances, monkeypatch)
    nonce = uuid.uuid4().hex[:8]
    first = CALLER.post(one, {"input": f"Task lost-{nonce}: list the flaky tests."})
    assert first.status_code == 200, first.text
    session = CALLER.session_of(one, first.json()["id"])
    stalled = StreamReader(CALLER, one, {"previous_response_id": first.json()["id"],
                                         "input": f"A-{nonce}: and the slow ones?"})
    upstream.stream_pause = threading.Event()
    try:
        stalled.start()
        assert stalled.relayed.wait(CALLER.wait_s), "the stream's first event never reached the client"
        clock.now += one.config.upstream_timeout_s + LEASE_MARGIN_S + 1  # (no event relayed meanwhile: no renewal)
        taken = CALLER.post(two, {"previous_response_id": first.json()["id"],
                                  "input": f"B-{nonce}: and the fast ones?"})
        assert taken.status_code == 200, taken.text  # (the lease expired: taken over, fed, answered)
        assert session_marks(one.serve_app.backend, session)["head"] == taken.json()["id"]
        said = Said()
        logging.getLogger("contextfold.serve").addHandler(said)  # (on the proxy's logger: handed each line at once)
        try:
            upstream.stream_pause.set()
            stalled.join(CALLER.wait_s)
        finally:
            logging.getLogger("contextfold.serve").removeHandler(said)
    finally:
        upstream.stream_pause.set()
        upstream.stream_pause = None
    events = stalled.events
    assert events[-1]["type"] == "response.completed"  # (the stalled client still gets its whole reply)
    assert session_marks(one.serve_app.backend, session)["head"] == taken.json()["id"]
    # (the new holder gave its lease back: the stalled stream's renewal finds it gone, not taken, and the session's
    # fed mark, another request's now, is what keeps its reply from the head)
    assert "reply not the head" in said.messages
    following = CALLER.post(one, {"previous_response_id": taken.json()["id"], "input": f"C-{nonce}: which are both?"})
    assert following.status_code == 200, following.text
    # The stalled reply is still known to the proxy: continuing it is refused as not the latest (not as unknown).
    refused = CALLER.post(two, {"previous_response_id": events[-1]["response"]["id"], "input": f"D-{nonce}: go on"})
    assert refused.status_code == 409 and refused.json()["error"]["param"] == "previous_response_id", refused.text
