"""An upstream event the proxy cannot read must still reach the client: the proxy reads the stream on the way.

Found by the twelfth red team: the proxy forwards each event as it arrives and reads it to collect the reply
(``ReplyCollector``). A chunk of a shape it did not expect raised inside the relay: a tool-call delta with
``"index": null`` (an OpenAI-compatible server's), a ``function`` that is a string, ``tool_calls`` that is a string,
a ``delta`` that is a list. The client's stream ended after the first of four events, without the tool call,
``finish_reason`` or ``[DONE]``. Now every event is relayed; a reply the proxy could not read is not made the
session's head (as a stream cut short is not). With the retrieval tools on, a non-streamed reply whose tool call
has a ``function`` that is a string was a 500; it goes to the client as it came.
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
from contextfold.serve.replies import ReplyCollector

NONCE = "rt12-chunks-2Tq5"
MODEL = "gpt-4o-mini"
ODD_DELTAS: dict[str, Any] = {
    "index null": {"tool_calls": [{"index": None, "id": "t1", "type": "function",
                                   "function": {"name": "f", "arguments": "{}"}}]},
    "function a string": {"tool_calls": [{"index": 0, "id": "t1", "function": "f"}]},
    "tool_calls a string": {"tool_calls": "f"},
    "delta a list": ["f"],
}


def _stream(delta: Any) -> bytes:
    chunks = [{"id": "c", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": NONCE}, "finish_reason": None}]},
              {"id": "c", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {"id": "c", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


@pytest.mark.parametrize("shape", list(ODD_DELTAS))
@pytest.mark.parametrize("retrieval", [False, True])
def test_every_event_reaches_the_client(shape: str, retrieval: bool) -> None:
    body = _stream(ODD_DELTAS[shape])
    config = ServeConfig(port=0, openai_base_url="http://upstream.test/v1", anthropic_base_url="http://upstream.test",
                         sessions="memory", store="memory", archive="memory", windows={MODEL: 6_000},
                         log_level="warning", retrieval_tools=retrieval)
    app = ServeApp(config, transport=httpx.MockTransport(
        lambda request: httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})))
    with TestClient(app.app) as client:
        answer = client.post("/v1/chat/completions", headers={"authorization": "Bearer sk-test"}, json={
            "model": MODEL, "stream": True, "messages": [{"role": "user", "content": f"go {NONCE}"}]})
    assert answer.status_code == 200
    assert answer.text.count("data: ") == 4
    assert answer.text.rstrip().endswith("data: [DONE]")


@pytest.mark.parametrize("shape", list(ODD_DELTAS))
def test_a_reply_the_collector_could_not_read_is_not_taken_for_one(shape: str) -> None:
    collector = ReplyCollector("chat")
    for line in _stream(ODD_DELTAS[shape]).split(b"\n\n"):
        if line.startswith(b"data: {"):
            collector.observe(json.loads(line[6:]))
    assert collector.unreadable


def test_a_reply_the_retrieval_split_cannot_read_goes_to_the_client_as_it_came() -> None:
    reply = {"id": "c", "object": "chat.completion", "model": MODEL, "choices": [{"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": NONCE, "tool_calls": [{"id": "t1", "function": "f"}]}}]}
    config = ServeConfig(port=0, openai_base_url="http://upstream.test/v1", anthropic_base_url="http://upstream.test",
                         sessions="memory", store="memory", archive="memory", windows={MODEL: 6_000},
                         log_level="warning", retrieval_tools=True)
    app = ServeApp(config, transport=httpx.MockTransport(lambda request: httpx.Response(200, json=reply)))
    with TestClient(app.app) as client:
        answer = client.post("/v1/chat/completions", headers={"authorization": "Bearer sk-test"}, json={
            "model": MODEL, "messages": [{"role": "user", "content": f"go {NONCE}"}]})
    assert answer.status_code == 200
    assert answer.json() == reply
