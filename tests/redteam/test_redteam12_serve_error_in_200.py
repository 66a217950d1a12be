"""A gateway that answers a context overflow with status 200 and an error body must be recovered like a 400.

Found by the twelfth red team: OpenAI-compatible gateways (one-api style relays, some self-hosted stacks; OpenRouter
for errors met once processing started) answer some errors with status 200 and ``{"error": {...}}`` as the body.
The proxy read only the status: a context-length error in a 200 went to the client as a success (its SDK got a
completion without choices), the turn was saved as answered, and nothing was recovered (1 upstream call). Now a
200 whose JSON body is only an error is read like an error response: an overflow is recovered (the view shrinks,
the call is made again) and the client gets the model's reply; another error goes to the client as it came.
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

NONCE = "rt12-err200-6Ky1"
MODEL = "gpt-4o-mini"
WINDOW = 6_000
OVERFLOW = {"error": {"message": "This model's maximum context length is 4096 tokens. However, your messages "
                                 "resulted in 5210 tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
OTHER = {"error": {"message": f"upstream relay quota exhausted {NONCE}", "type": "relay_error", "code": "quota"}}
REPLY = {"id": "chatcmpl-1", "object": "chat.completion", "model": MODEL,
         "choices": [{"index": 0, "message": {"role": "assistant", "content": f"Fixed {NONCE}."},
                      "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 100, "completion_tokens": 3, "total_tokens": 103}}


def _run(first: dict[str, Any]) -> tuple[httpx.Response, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=first if len(sent) == 1 else REPLY)

    config = ServeConfig(port=0, openai_base_url="http://upstream.test/v1", anthropic_base_url="http://upstream.test",
                         sessions="memory", store="memory", archive="memory", windows={MODEL: WINDOW},
                         log_level="warning")
    app = ServeApp(config, transport=httpx.MockTransport(upstream))
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for k in range(14):
        history.append({"role": "user", "content": f"step {k} {NONCE}: " + "read the build log and report. " * 12})
        history.append({"role": "assistant", "content": f"step {k}: " + "the linker failed on module foo. " * 12})
    history.append({"role": "user", "content": f"now fix it {NONCE}"})
    with TestClient(app.app) as client:
        answer = client.post("/v1/chat/completions", json={"model": MODEL, "messages": history},
                             headers={"authorization": "Bearer sk-test", "x-contextfold-session": NONCE})
    return answer, sent


def test_an_overflow_in_a_200_is_recovered_and_the_client_gets_the_reply() -> None:
    answer, sent = _run(OVERFLOW)
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == f"Fixed {NONCE}."
    assert len(sent) == 2
    assert len(json.dumps(sent[1])) < len(json.dumps(sent[0]))


def test_another_error_in_a_200_reaches_the_client_as_it_came() -> None:
    answer, sent = _run(OTHER)
    assert answer.status_code == 200
    assert answer.json() == OTHER
    assert len(sent) == 1
