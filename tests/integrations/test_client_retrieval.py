"""The client wrappers' retrieval opt-in: the tools go into ``tools=`` and the model's calls are answered inside
the wrapped call, against the scripted server with the real SDKs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

import anthropic
import openai
from _fw_support import big_output, retrieval_handler, target_row

from contextfold.errors import ConfigError
from contextfold.integrations.anthropic_client import wrap_anthropic
from contextfold.integrations.openai_client import wrap_openai
from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer

NAMES = ["tool_output_cache", "tool_output_cache_grep", "history_search"]


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(handler=retrieval_handler, validator="formats") as s:
        yield s


def manager_with_a_cut_output(session_id: str) -> ContextManager:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=session_id)
    cm.add([{"role": "user", "content": "What is the checksum of row 1234?"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "call_big", "type": "function",
                             "function": {"name": "read_big", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_big", "content": big_output()}])
    return cm


def tool_names(body: dict) -> list[str]:  # type: ignore[type-arg]
    return [t.get("function", t).get("name") for t in body.get("tools") or ()]


def test_chat_answers_the_retrieval_call_inside_the_wrapped_call(server: ScriptedLLMServer) -> None:
    cm = manager_with_a_cut_output("client-chat")
    llm = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0), retrieval_tools=True)
    response = llm.chat(cm, model="gpt-4o", tools=[{"type": "function", "function": {
        "name": "read_big", "description": "Read the report.", "parameters": {"type": "object"}}}])
    assert response.choices[0].message.content == f"found: {target_row()}"
    assert len(server.requests) == 2 and not server.invalid_requests
    assert tool_names(server.requests[0].body) == ["read_big", *NAMES]
    answered = server.requests[1].items[-1]
    assert (answered["role"], answered["tool_call_id"]) == ("tool", "call_read")
    assert target_row() in answered["content"]
    assert cm.messages()[-1].text == f"found: {target_row()}"


def test_responses_answers_the_retrieval_call(server: ScriptedLLMServer) -> None:
    cm = manager_with_a_cut_output("client-responses")
    llm = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0), retrieval_tools=True)
    response = llm.responses(cm, model="gpt-4o")
    assert response.output_text == f"found: {target_row()}"
    assert len(server.requests) == 2 and tool_names(server.requests[0].body) == NAMES
    answered = server.requests[1].items[-1]
    assert answered["type"] == "function_call_output" and target_row() in answered["output"]


def test_async_anthropic_answers_the_retrieval_call(server: ScriptedLLMServer) -> None:
    cm = manager_with_a_cut_output("client-anthropic")
    client = anthropic.AsyncAnthropic(base_url=server.base_url.removesuffix("/v1"), api_key="test", max_retries=0)
    llm = wrap_anthropic(client, retrieval_tools=True)
    reply = asyncio.run(llm.messages(cm, model="claude-sonnet-4-5", max_tokens=1024))  # type: ignore[misc]
    assert reply.content[0].text == f"found: {target_row()}"
    assert len(server.requests) == 2 and tool_names(server.requests[0].body) == NAMES
    assert target_row() in json.dumps(server.requests[1].items[-1])


def test_without_the_opt_in_nothing_is_added_and_new_notes_name_no_tool(server: ScriptedLLMServer) -> None:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="client-plain")
    cm.add({"role": "user", "content": "hi"})
    server.handler = None
    server.push("hello")
    wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)).chat(cm, model="gpt-4o")
    assert "tools" not in server.requests[0].body
    cm.add([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "read_big", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": big_output()}])
    note = cm.messages()[-1].text
    assert "tool_output_cache" not in note and "bytes in full" in note
    with pytest.raises(ConfigError, match="add_reply"):
        wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="test"), retrieval_tools=True, add_reply=False)
