"""Two conversations of one caller that open alike are two sessions once they part.

The proxy names a session without a header or a conversation handle by its opening (the items up to the first user
message), scoped to the caller's key. Agents of one team run under one key with one system prompt and one task
template: their conversations open alike and part at the first reply. Both were one session: each request of one
rebuilt the view the other had left (its summary lost, the whole history added and counted again, the view
archived each time), and the retrieval tools answered one conversation from the other's outputs and archive.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from _serve_support import MODEL, proxy_config, upstream_fixture  # noqa: F401 (fixtures)

from contextfold.serve import ProxyServer
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall


@pytest.fixture(scope="module")
def rproxy(upstream: ScriptedLLMServer) -> Iterator[ProxyServer]:
    with ProxyServer(proxy_config(upstream, retrieval_tools=True)) as server:
        yield server


def _call(cid: str) -> dict[str, Any]:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}


def test_conversations_that_open_alike_do_not_share_outputs_or_history(upstream: ScriptedLLMServer,
                                                                       rproxy: ProxyServer) -> None:
    nonce = uuid.uuid4().hex[:8]
    opening = [{"role": "system", "content": "You are a coding agent."},
               {"role": "user", "content": f"Task {nonce}: fix the failing test."}]
    llm = openai.OpenAI(base_url=rproxy.url + "/v1", api_key="sk-team-shared", max_retries=0)
    secret_log = "\n".join(f"A-{nonce} line {i}: deploy token A-{nonce}-private-{i}" for i in range(400))
    a = [*opening, _call("ca1"), {"role": "tool", "tool_call_id": "ca1", "content": secret_log}]
    upstream.push("A noted")
    llm.chat.completions.create(model=MODEL, messages=a)  # type: ignore[arg-type]
    # B: the same opening, its own first step; its model searches everything the session can answer from.
    b = [*opening, _call("cb1"), {"role": "tool", "tool_call_id": "cb1", "content": f"B-{nonce} tests pass"}]
    upstream.push(Reply.calling(ScriptedToolCall("tool_output_cache_grep", {"pattern": f"A-{nonce}"}, id="g1"),
                                ScriptedToolCall("history_search", {"pattern": f"A-{nonce}"}, id="h1")),
                  "B done")
    before = len(upstream.requests)
    llm.chat.completions.create(model=MODEL, messages=b)  # type: ignore[arg-type]
    answered = json.dumps(upstream.requests[before + 1].body["messages"][-2:])
    assert "private" not in answered, answered
    # A goes on: its session still holds what it was fed, nothing is rebuilt, B's step is not in its view.
    upstream.push("A next")
    before = len(upstream.requests)
    llm.chat.completions.create(  # type: ignore[call-overload]
        model=MODEL, messages=[*a, {"role": "assistant", "content": "A noted"}, {"role": "user", "content": "go on"}])
    sent = json.dumps(upstream.requests[before].body["messages"])
    assert f"B-{nonce}" not in sent and "cb1" not in sent
