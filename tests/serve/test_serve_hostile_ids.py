"""Ids a client sends that the proxy names in its answers and log lines are bounded, as model names are.

A ``previous_response_id`` of 10 MB was echoed whole in the 400 and in its log line (10 MB a request into the log);
a ``conversation`` id of any size was taken. Provider ids are a few dozen characters (a gateway's encoded ones a few
hundred): past ``MAX_HANDLE`` characters they are refused, naming the field and the length only.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import httpx
import pytest
from _serve_support import MODEL, proxy_fixture, upstream_fixture  # noqa: F401  (fixtures)

from contextfold.serve import ProxyServer
from contextfold.serve.apis import MAX_HANDLE
from contextfold.testing import ScriptedLLMServer

NONCE = "r17-ids-Mq5d"


@pytest.fixture
def log() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("contextfold.serve")
    logger.addHandler(handler)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("field", ["previous_response_id", "conversation"])
def test_a_huge_handle_is_refused_without_being_echoed(proxy: ProxyServer, log: io.StringIO, field: str) -> None:
    handle = f"resp_{NONCE}_" + "x" * 1_000_000
    reply = httpx.post(proxy.url + "/v1/responses", json={"model": MODEL, field: handle, "input": f"hi {NONCE}"},
                       headers={"authorization": "Bearer sk-r17-ids"}, timeout=30)
    assert reply.status_code == 400, reply.status_code  # (c04dd8d: 400 of 1 MB, and a conversation: 200)
    error = reply.json()["error"]
    assert error["param"] == field and f"at most {MAX_HANDLE:,}" in error["message"]
    assert len(reply.content) < 1_000 and NONCE not in log.getvalue()


def test_a_handle_of_a_gateways_length_is_taken(upstream: ScriptedLLMServer, proxy: ProxyServer) -> None:
    upstream.push(f"ok {NONCE}")
    reply = httpx.post(proxy.url + "/v1/responses", json={
        "model": MODEL, "conversation": f"conv_{NONCE}_" + "Zm9v" * 100, "input": f"hello {NONCE}"},
        headers={"authorization": "Bearer sk-r17-ids"}, timeout=30)
    assert reply.status_code == 200, reply.text
