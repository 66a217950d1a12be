"""An overflow that opens a 200 event stream is recovered like one answered with 400.

Some providers and gateways answer ``stream: true`` with status 200 and then an error as the stream's first event
(OpenAI-style ``data: {"error": ...}``, Anthropic's ``event: error``). The proxy looked at a stream's status only:
the overflow went to the client as its stream, nothing was recovered (1 upstream call). Now the first event of a
200 stream is read before the stream is handed on: an error there is read like an error response (an overflow
shrinks the view and the call is made again), anything else reaches the client byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

import httpx
from starlette.testclient import TestClient

from contextfold.serve import ServeConfig
from contextfold.serve.app import ServeApp

NONCE = "p12-streamerr-Qz7c"
MODEL = "gpt-4o-mini"
WINDOW = 6_000
OVERFLOW = {"error": {"message": "This model's maximum context length is 4096 tokens. However, your messages "
                                 "resulted in 5210 tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
OTHER = {"error": {"message": f"relay quota exhausted {NONCE}", "type": "relay_error", "code": "quota"}}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(data)}\n\n".encode()


REPLY_STREAM = [b": keep-alive\n\n", _chunk({"role": "assistant", "content": f"Fixed {NONCE}."}),
                _chunk({}, "stop"), b"data: [DONE]\n\n"]


CLAUDE = "claude-haiku-4-5"
ANTHROPIC_OVERFLOW = {"type": "error", "error": {"type": "invalid_request_error",
                                                 "message": "prompt is too long: 5210 tokens > 4096 maximum"}}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


ANTHROPIC_REPLY = [
    _event("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": CLAUDE, "content": [], "stop_reason": None,
        "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    _event("content_block_start", {"type": "content_block_start", "index": 0,
                                   "content_block": {"type": "text", "text": ""}}),
    _event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": f"Fixed {NONCE}."}}),
    _event("content_block_stop", {"type": "content_block_stop", "index": 0}),
    _event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                             "usage": {"output_tokens": 3}}),
    _event("message_stop", {"type": "message_stop"})]


def _run(first: list[bytes], api: str = "chat") -> tuple[str, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        body = first if len(sent) == 1 else REPLY_STREAM if api == "chat" else ANTHROPIC_REPLY
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"".join(body))

    config = ServeConfig(port=0, openai_base_url="http://upstream.test/v1", anthropic_base_url="http://upstream.test",
                         sessions="memory", store="memory", archive="memory", windows={MODEL: WINDOW, CLAUDE: WINDOW},
                         log_level="warning")
    app = ServeApp(config, transport=httpx.MockTransport(upstream))
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for k in range(14):
        history.append({"role": "user", "content": f"step {k} {NONCE}: " + "read the build log and report. " * 12})
        history.append({"role": "assistant", "content": f"step {k}: " + "the linker failed on module foo. " * 12})
    history.append({"role": "user", "content": f"now fix it {NONCE}"})
    headers = {"authorization": "Bearer sk-test", "x-contextfold-session": f"{NONCE}-{api}"}
    with TestClient(app.app) as client:
        if api == "chat":
            answer = client.post("/v1/chat/completions", headers=headers,
                                 json={"model": MODEL, "messages": history, "stream": True})
        else:
            answer = client.post("/v1/messages", headers=headers, json={
                "model": CLAUDE, "system": history[0]["content"], "messages": history[1:], "max_tokens": 256,
                "stream": True})
    assert answer.status_code == 200
    return answer.text, sent


def test_an_overflow_opening_a_200_stream_is_recovered() -> None:
    text, sent = _run([b": keep-alive\n\n", f"data: {json.dumps(OVERFLOW)}\n\n".encode()])
    assert len(sent) == 2
    assert len(json.dumps(sent[1])) < len(json.dumps(sent[0]))
    assert f"Fixed {NONCE}." in text and "maximum context length" not in text


def test_another_error_opening_a_stream_and_a_reply_stream_reach_the_client_as_they_came() -> None:
    error_stream = [f"data: {json.dumps(OTHER)}\n\n".encode()]
    text, sent = _run(error_stream)
    assert len(sent) == 1 and text == error_stream[0].decode()
    text, sent = _run(REPLY_STREAM)
    assert len(sent) == 1 and text == b"".join(REPLY_STREAM).decode()


def test_an_anthropic_overflow_event_opening_a_200_stream_is_recovered() -> None:
    text, sent = _run([_event("error", ANTHROPIC_OVERFLOW)], api="messages")
    assert len(sent) == 2
    assert len(json.dumps(sent[1])) < len(json.dumps(sent[0]))
    assert f"Fixed {NONCE}." in text and "prompt is too long" not in text
