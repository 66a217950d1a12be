"""A model's tool call cut by ``max_tokens`` mid-argument: the reply is kept, the conversation goes on (red team,
tenth session).

A model writing a file through a tool call runs out of ``max_tokens`` inside the arguments (``finish_reason:
"length"``), and local models emit broken JSON: the reply's arguments are not JSON. The manager refuses such
arguments at ``add`` (OpenAI-compatible servers refuse them in a request), which is right for a history a caller
built, but a reply is the model's own: ``wrap_openai(...).chat(cm, ...)`` raised ``InvalidHistory`` after the call it
had paid for, and the proxy answered 400 to this and to every later request of the conversation (the client resends
the reply each time, so the session was dead). The reply's arguments are now wrapped in a JSON object
(``{"unparsed_arguments": "<what the model wrote>"}``) where a reply is added: every API takes them back, and the
model still reads what it wrote.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import openai
import pytest

from contextfold import ContextManager
from contextfold.integrations.openai_client import wrap_openai
from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall

MODEL = "gpt-4o-mini"
UNPARSED_ARGUMENTS = "unparsed_arguments"  # (formats.intake.UNPARSED_ARGUMENTS)
CUT = '{"path": "a.py", "content": "def f(x):\\n    retu'
TOOLS: list[dict[str, Any]] = [{"type": "function", "function": {
    "name": "write", "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                                     "content": {"type": "string"}}}}}]


def _cut_reply(call_id: str) -> Reply:
    return Reply(tool_calls=(ScriptedToolCall("write", CUT, id=call_id),), finish_reason="length")


def test_the_openai_wrapper_keeps_a_reply_cut_inside_a_tool_call() -> None:
    nonce = uuid.uuid4().hex[:8]
    with ScriptedLLMServer(validator="formats") as upstream:
        upstream.push(_cut_reply("call_cut"), f"rewritten {nonce}")
        client = wrap_openai(openai.OpenAI(base_url=upstream.base_url, api_key="k", max_retries=0))
        cm = ContextManager(MODEL, store="memory")
        cm.add({"role": "user", "content": f"write a.py ({nonce})"})
        first = client.chat(cm, model=MODEL, tools=TOOLS)
        assert first.choices[0].finish_reason == "length"
        cm.add({"role": "tool", "tool_call_id": "call_cut", "content": "error: cut; send them again"})
        second = client.chat(cm, model=MODEL, tools=TOOLS)
        assert second.choices[0].message.content == f"rewritten {nonce}"
        assert not upstream.invalid_requests
        sent = upstream.requests[-1].body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {UNPARSED_ARGUMENTS: CUT}


def test_the_proxy_serves_the_conversation_after_a_cut_tool_call() -> None:
    pytest.importorskip("starlette", reason="contextfold[serve] is not installed")
    from contextfold.serve import ProxyServer, ServeConfig

    nonce = uuid.uuid4().hex[:8]
    with ScriptedLLMServer(validator="formats") as upstream:
        config = ServeConfig(port=0, openai_base_url=upstream.base_url, sessions="memory", store="memory",
                             archive="memory", windows={MODEL: 8_000}, log_level="warning")
        with ProxyServer(config) as proxy:
            upstream.push(_cut_reply("call_cut"), f"rewritten {nonce}", "and done")
            history: list[dict[str, Any]] = [{"role": "user", "content": f"write a.py ({nonce})"}]
            for turn in range(3):
                response = httpx.post(proxy.url + "/v1/chat/completions", timeout=20,
                                      headers={"authorization": f"Bearer k-{nonce}"},
                                      json={"model": MODEL, "messages": history, "tools": TOOLS})
                assert response.status_code == 200, (turn, response.text)
                history.append(response.json()["choices"][0]["message"])
                history.append({"role": "tool", "tool_call_id": "call_cut", "content": "error: cut; send again"}
                               if turn == 0 else {"role": "user", "content": "go on"})
        assert len(upstream.requests) == 3 and not upstream.invalid_requests


@pytest.mark.parametrize(("format", "reply"), [
    ("openai_chat", {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "write", "arguments": CUT}}]}),
    ("openai_responses", {"type": "function_call", "call_id": "c", "name": "write", "arguments": CUT}),
    ("openai_responses", {"type": "function_call", "call_id": "c", "name": "write", "arguments": "[1, 2]"}),
])
def test_a_cut_reply_is_added_with_what_the_model_wrote(format: str, reply: dict[str, Any]) -> None:
    from contextfold.formats.intake import repair_reply_arguments

    cm = ContextManager(MODEL, store="memory")
    cm.add({"role": "user", "content": "write a.py"}, format="openai_chat")
    cm.add(repair_reply_arguments(format, [reply]), format=format)
    call = next(m for m in cm.messages() if m.tool_calls).tool_calls[0]
    assert json.loads(call.arguments)[UNPARSED_ARGUMENTS] in (CUT, "[1, 2]")
    cm.close()
