"""The OpenAI client wrapper against the scripted server, through the real openai SDK (sync and async)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import openai
import pytest

from contextfold.errors import ConfigError, MissingExtra
from contextfold.integrations.openai_client import AsyncOpenAIClient, OpenAIClient, wrap_openai
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.pairing import normalize
from contextfold.telemetry import RecordingTelemetry, RecoveryRetry
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run a command", "parameters": SCHEMA}}]
RESPONSES_TOOLS = [{"type": "function", "name": "bash", "description": "run a command",
                    "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


def manager(tmp_path: Path, window: int = 60_000, **kw: Any) -> tuple[ContextManager, RecordingTelemetry]:
    events = RecordingTelemetry()
    return ContextManager("gpt-4o", max_context_tokens=window, store="memory", archive=str(tmp_path / "a"),
                          telemetry=events, session_id="s", **kw), events


def big_history(turns: int = 20) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."},
                                   {"role": "user", "content": "fix the parser"}]
    for i in range(turns):
        items.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": i})}}]})
        items.append({"role": "tool", "tool_call_id": f"c{i}",
                      "content": "".join(f"line {i}.{k}: value = compute({k})\n" for k in range(40))})
    return items


def tool_result(cm: ContextManager, output: str) -> None:
    # the view answers a pending call with a synthetic "aborted" result; the agent's real one replaces it
    call = next(m for m in reversed(cm.messages()) if m.role == "assistant").tool_calls[0]
    cm.add(Message.tool(call.id, output, name=call.name))


def test_chat_tool_loop_records_usage_and_adds_replies(tmp_path: Path) -> None:
    cm, _ = manager(tmp_path)
    cm.add({"role": "user", "content": "list the files"})
    script = [Reply.calling(ScriptedToolCall("bash", {"cmd": "ls"}), text="looking"), "two files: a.py, b.py"]
    with ScriptedLLMServer(script, validator="formats") as server:
        llm = OpenAIClient(openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0))
        first = llm.chat(cm, model="gpt-4o", tools=TOOLS)
        assert first.choices[0].finish_reason == "tool_calls"
        assert cm.messages()[-2].tool_calls[0].name == "bash"
        tool_result(cm, "a.py\nb.py")
        second = llm.chat(cm, model="gpt-4o", tools=TOOLS)
    assert second.choices[0].message.content == "two files: a.py, b.py"
    assert not server.invalid_requests
    sent = server.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"] and sent[2]["content"] == "a.py\nb.py"
    assert server.requests[1].body["tools"] == TOOLS
    assert cm.usage_total.input == sum(r.input_tokens for r in server.requests)
    assert [m.role for m in cm.messages()] == ["user", "assistant", "tool", "assistant"]


def test_chat_recovers_from_overflow(tmp_path: Path) -> None:
    cm, events = manager(tmp_path)
    cm.add(big_history())
    with ScriptedLLMServer(["done"], context_window=3_000, validator="formats") as server:
        llm = wrap_openai(openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0))
        assert isinstance(llm, OpenAIClient)
        reply = llm.chat(cm, model="gpt-4o")
    assert [r.status for r in server.requests] == [400, 200] and reply.choices[0].message.content == "done"
    assert len(events.of_type(RecoveryRetry)) == 1
    assert cm.messages()[-1].text == "done" and cm.usage_total.input == server.requests[1].input_tokens


def test_responses_tool_loop_and_recovery(tmp_path: Path) -> None:
    cm, events = manager(tmp_path)
    cm.add(big_history())
    script = [Reply.calling(ScriptedToolCall("bash", {"cmd": "pytest"})), "all green"]
    with ScriptedLLMServer(script, context_window=3_000, validator="formats") as server:
        llm = OpenAIClient(openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0))
        first = llm.responses(cm, model="gpt-4o", tools=RESPONSES_TOOLS)
        assert first.output[0].type == "function_call"
        tool_result(cm, "3 passed")
        second = llm.responses(cm, model="gpt-4o", tools=RESPONSES_TOOLS)
    assert second.output_text == "all green" and not server.invalid_requests
    assert events.of_type(RecoveryRetry)
    assert server.requests[-1].body["input"][-1]["type"] == "function_call_output"
    view = cm.messages()
    assert normalize(view) == view and view[-1].text == "all green"


def test_async_chat_and_responses(tmp_path: Path) -> None:
    cm, events = manager(tmp_path)
    cm.add(big_history())

    async def run(server: ScriptedLLMServer) -> tuple[Any, Any]:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        llm = wrap_openai(client)
        assert isinstance(llm, AsyncOpenAIClient)
        try:
            chat = await llm.chat(cm, model="gpt-4o")
            cm.add({"role": "user", "content": "and now?"})
            responses = await llm.responses(cm, model="gpt-4o")
        finally:
            await client.close()
        return chat, responses

    with ScriptedLLMServer(["first", "second"], context_window=3_000, validator="formats") as server:
        chat, responses = asyncio.run(run(server))
    assert chat.choices[0].message.content == "first" and responses.output_text == "second"
    assert [r.status for r in server.requests] == [400, 200, 200]
    assert [m.text for m in cm.messages()[-3:]] == ["first", "and now?", "second"]
    assert len(events.of_type(RecoveryRetry)) == 1


def test_fifty_turn_tool_loop_recovers_every_overflow_in_one_retry(tmp_path: Path) -> None:
    # The server's window (6K) is smaller than the one the manager was told (20K): the provider's errors, not the
    # manager's thresholds, drive compaction, and each is recovered from the counts it carries.
    cm, events = manager(tmp_path, window=20_000)
    cm.add({"role": "user", "content": "refactor the module"})
    turns = 50
    script: list[Any] = [Reply.calling(ScriptedToolCall("bash", {"cmd": f"cat f{i}.py"})) for i in range(turns)]
    with ScriptedLLMServer([*script, "refactored"], context_window=6_000, validator="formats") as server:
        llm = OpenAIClient(openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0))
        for i in range(turns):
            llm.chat(cm, model="gpt-4o", tools=TOOLS)
            tool_result(cm, "".join(f"def f{i}_{k}(): return {k}\n" for k in range(60)))
        final = llm.chat(cm, model="gpt-4o", tools=TOOLS)
    assert final.choices[0].message.content == "refactored"
    assert not server.invalid_requests
    accepted = [r for r in server.requests if r.status == 200]
    rejected = [r for r in server.requests if r.status != 200]
    assert len(accepted) == turns + 1 and all(r.input_tokens <= 6_000 for r in accepted)
    assert rejected and len(events.of_type(RecoveryRetry)) == len(rejected)  # one retry per overflow
    assert cm.compactions >= len(rejected)


@pytest.mark.parametrize(("method", "kwargs", "field"), [
    ("chat", {"messages": []}, "chat.messages"), ("chat", {"stream": "yes"}, "chat.stream"),
    ("responses", {"input": "hi"}, "responses.input"),
    ("responses", {"previous_response_id": "r1"}, "responses.previous_response_id"),
])
def test_keywords_the_manager_owns_are_refused(tmp_path: Path, method: str, kwargs: dict[str, Any],
                                               field: str) -> None:
    cm, _ = manager(tmp_path)
    cm.add({"role": "user", "content": "hi"})
    with ScriptedLLMServer(["x"]) as server:
        llm = OpenAIClient(openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0))
        with pytest.raises(ConfigError) as info:
            getattr(llm, method)(cm, model="m", **kwargs)
    assert info.value.field == field and not server.requests


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # what an environment without the package looks like
    with pytest.raises(MissingExtra, match=r"pip install 'contextfold\[openai\]'"):
        OpenAIClient()
