"""The Anthropic client wrapper against the scripted server, through the real anthropic SDK (sync and async)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest

from contextfold.errors import ConfigError, MissingExtra, RecoveryFailed
from contextfold.integrations.anthropic_client import AnthropicClient, AsyncAnthropicClient, wrap_anthropic
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.pairing import normalize
from contextfold.telemetry import RecordingTelemetry, RecoveryRetry
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import Reply, ScriptedToolCall

TOOLS = [{"name": "bash", "description": "run a command",
          "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


def manager(tmp_path: Path) -> tuple[ContextManager, RecordingTelemetry]:
    events = RecordingTelemetry()
    return ContextManager("gpt-4o", max_context_tokens=60_000, store="memory", archive=str(tmp_path / "a"),
                          telemetry=events, session_id="s"), events


def big_history(cm: ContextManager, turns: int = 20) -> None:
    cm.add([Message.system("You are a coding agent."), Message.user("fix the parser")])
    for i in range(turns):
        reply = {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "bash",
                                                   "input": {"cmd": f"cat f{i}.py"}}]}
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content":
                                               "".join(f"line {i}.{k}: value = compute({k})\n" for k in range(40))}]}
        cm.add([reply, result], format="anthropic")


def test_messages_tool_loop_with_recovery(tmp_path: Path) -> None:
    cm, events = manager(tmp_path)
    big_history(cm)
    script = [Reply.calling(ScriptedToolCall("bash", {"cmd": "pytest"}), text="running the tests"), "all green"]
    with ScriptedLLMServer(script, context_window=3_000, validator="formats") as server:
        llm = AnthropicClient(anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0))
        first = llm.messages(cm, model="claude-test", max_tokens=300, tools=TOOLS)
        assert first.stop_reason == "tool_use"
        call = next(m for m in reversed(cm.messages()) if m.role == "assistant").tool_calls[0]
        cm.add(Message.tool(call.id, "3 passed", name="bash"))
        second = llm.messages(cm, model="claude-test", max_tokens=300, tools=TOOLS)
    assert second.content[0].text == "all green" and not server.invalid_requests
    assert [r.status for r in server.requests][-2:] == [200, 200] and server.requests[0].status == 400
    body = server.requests[-1].body
    assert body["system"] and body["tools"] == TOOLS and body["max_tokens"] == 300
    assert len(events.of_type(RecoveryRetry)) == 1
    assert cm.usage_total.input == sum(r.input_tokens for r in server.requests if r.status == 200)
    view = cm.messages()
    assert normalize(view) == view and view[-1].text == "all green"


def test_max_tokens_counts_against_the_window(tmp_path: Path) -> None:
    # "input length and `max_tokens` exceed context limit": the input must leave room for the reply.
    cm, _ = manager(tmp_path)
    big_history(cm, turns=8)
    with ScriptedLLMServer(["ok"], context_window=3_000) as server:
        llm = AnthropicClient(anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0))
        llm.messages(cm, model="m", max_tokens=1_500)
    # one retry: it leaves room for the reply although the first error only said "prompt is too long"
    first, second = server.requests
    assert first.status == 400 and "prompt is too long" in first.response["error"]["message"]
    assert second.status == 200 and second.input_tokens + 1_500 <= 3_000


def test_async_messages(tmp_path: Path) -> None:
    cm, events = manager(tmp_path)
    big_history(cm)

    async def run(server: ScriptedLLMServer) -> Any:
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="t", max_retries=0)
        llm = wrap_anthropic(client)
        assert isinstance(llm, AsyncAnthropicClient)
        try:
            return await llm.messages(cm, model="m", max_tokens=100)
        finally:
            await client.close()

    with ScriptedLLMServer(["done"], context_window=3_000, validator="formats") as server:
        reply = asyncio.run(run(server))
    assert reply.content[0].text == "done" and [r.status for r in server.requests] == [400, 200]
    assert len(events.of_type(RecoveryRetry)) == 1 and cm.messages()[-1].text == "done"


def test_system_given_twice_is_refused(tmp_path: Path) -> None:
    cm, _ = manager(tmp_path)
    cm.add([Message.system("rules"), Message.user("hi")])
    with ScriptedLLMServer(["x"]) as server:
        llm = wrap_anthropic(anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0))
        with pytest.raises(ConfigError, match="system"):
            llm.messages(cm, model="m", max_tokens=10, system="other rules")
        with pytest.raises(ConfigError, match="messages"):
            llm.messages(cm, model="m", max_tokens=10, messages=[])
    assert not server.requests


def test_system_keyword_is_used_when_the_manager_has_none(tmp_path: Path) -> None:
    cm, _ = manager(tmp_path)
    cm.add(Message.user("hi"))
    with ScriptedLLMServer(["x"]) as server:
        AnthropicClient(anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0)).messages(
            cm, model="m", max_tokens=10, system="rules")
    # the caller's system prompt is the pinned head: contextfold's first breakpoint goes on it
    assert server.requests[0].body["system"] == [{"type": "text", "text": "rules",
                                                  "cache_control": {"type": "ephemeral"}}]


def test_a_huge_single_request_fails_clearly(tmp_path: Path) -> None:
    cm, _ = manager(tmp_path)
    # Protected: under the limit the error teaches, compaction's last resort would otherwise summarize the request.
    cm.add(Message.user("read this: " + "lorem ipsum " * 3_000).with_meta(protected=True))
    with ScriptedLLMServer([], context_window=1_000) as server, pytest.raises(RecoveryFailed) as info:
        AnthropicClient(anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0)).messages(
            cm, model="m", max_tokens=10)
    assert "stall guard" in str(info.value) and isinstance(info.value.__cause__, anthropic.BadRequestError)


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingExtra, match=r"pip install 'contextfold\[anthropic\]'"):
        AnthropicClient()
