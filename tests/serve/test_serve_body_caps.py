"""What the proxy reads of a body is bounded: the client's request by ``max_body_bytes``, an upstream's answer to a
stream request by what the relay holds of one event.

a9a74c5: a stream request answered 200 with ``application/json`` was read whole (``aread``) before a byte reached the
client, to see whether it was a JSON error: an upstream answering a large JSON body (a gateway's non-streamed reply)
held all of it in the proxy's memory, and the client got nothing until its last byte. It is read now as any stream
is: the peek for an error (small), then what the relay holds of an event at most, and past that as it comes. The
client's request body was capped already (413 naming the limit, stream or not, read no further than the limit):
kept so here.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest
from _serve_support import MODEL, RawUpstream, proxy_config, proxy_of, upstream_fixture  # noqa: F401

from contextfold.serve import ProxyServer
from contextfold.serve.app import ServeApp
from contextfold.serve.sse import _MAX_EVENT_BYTES
from contextfold.testing import ScriptedLLMServer

# A reply as one JSON body, past what the proxy reads ahead of a stream with no event in it (serve.sse: 16 MiB); the
# upstream holds its end until the test lets it go.
HEAD = b'{"id": "chatcmpl-big", "object": "chat.completion", "note": "' + b"x" * (_MAX_EVENT_BYTES + (1 << 20))
TAIL = b'", "choices": []}'
LIMIT = 10_000


def test_a_large_json_answer_to_a_stream_request_is_passed_on_before_its_end() -> None:
    gate = threading.Event()
    with RawUpstream(lambda _path: ("application/json", [HEAD, TAIL]), gate) as upstream, \
            proxy_of(upstream) as proxy, httpx.Client(timeout=10) as client:
        received = b""
        with client.stream("POST", proxy.url + "/v1/chat/completions", json={
                "model": "gpt-4o-mini", "stream": True,
                "messages": [{"role": "user", "content": "Task caps-1: hello"}]}) as answer:
            assert answer.status_code == 200
            chunks = answer.iter_bytes()
            while len(received) <= _MAX_EVENT_BYTES:  # (before the upstream's end; before the fix: a read timeout)
                received += next(chunks)
            gate.set()
            received += b"".join(chunks)
    assert received == HEAD + TAIL + b"\n\n"  # (the relay ends a stream's last event with its blank line)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize(("path", "body"), [
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "y" * (2 * LIMIT)}]}),
    ("/v1/messages", {"model": "claude-haiku-4-5", "max_tokens": 16,
                      "messages": [{"role": "user", "content": "y" * (2 * LIMIT)}]})], ids=["chat", "messages"])
def test_a_request_body_over_the_limit_is_a_413_naming_it(upstream: ScriptedLLMServer, stream: bool, path: str,
                                                          body: dict[str, Any]) -> None:
    before = len(upstream.requests)
    with ProxyServer(proxy_config(upstream, max_body_bytes=LIMIT)) as proxy:
        answer = httpx.post(proxy.url + path, json={**body, "stream": stream}, timeout=30)
    assert answer.status_code == 413
    assert answer.headers["content-type"].startswith("application/json")
    assert f"over the proxy's limit of {LIMIT} bytes" in answer.json()["error"]["message"]
    assert len(upstream.requests) == before


def test_a_body_without_a_length_is_read_no_further_than_the_limit(upstream: ScriptedLLMServer) -> None:
    serve = ServeApp(proxy_config(upstream, max_body_bytes=LIMIT))
    piece = b" " * 1_000
    given = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal given
        given += 1  # (a client that would send for ever)
        return {"type": "http.request", "body": piece, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"",
             "root_path": "", "headers": [(b"content-type", b"application/json")], "client": ("127.0.0.1", 1),
             "server": ("127.0.0.1", 2), "state": {}}
    try:
        asyncio.run(serve.app(scope, receive, send))
    finally:
        serve.stop_lines()
        serve.backend.close()
    assert sent[0]["status"] == 413
    assert given == LIMIT // len(piece) + 1  # (the piece that crossed the limit, and not one more)
    assert f"limit of {LIMIT} bytes" in json.loads(b"".join(m.get("body", b"") for m in sent[1:]))["error"]["message"]
