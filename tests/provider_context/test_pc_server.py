"""The scripted server speaks the providers' context management: shapes the SDKs parse into their own types, and
the rejections the providers make (real SDKs over loopback HTTP)."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from anthropic.types.beta import BetaClearToolUses20250919EditResponse, BetaCompactionBlock, BetaThinkingBlock
from openai.types.responses import ResponseCompactionItem, ResponseReasoningItem

from contextfold.testing import Reply, ScriptedLLMServer, ScriptedToolCall

MODEL = "claude-sonnet-4-5"
BETAS = ["context-management-2025-06-27", "compact-2026-01-12"]
THINKING = {"type": "enabled", "budget_tokens": 1024}
BIG = "\n".join(f"line {i}: value {i * 7}" for i in range(2_000))  # ~20,000 tokens


def _claude(server: ScriptedLLMServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)


def _openai(server: ScriptedLLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)


def _edits(*edits: dict[str, Any]) -> dict[str, Any]:
    return {"edits": list(edits)}


def _tool_turns(n: int, size: str = BIG) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "read the logs"}]
    for k in range(n):
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{k}", "name": "read" if k % 2 else "grep", "input": {"n": k}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": f"log {k}\n{size}"}]})
    return messages


@pytest.mark.parametrize(("management", "betas", "needle"), [
    (_edits({"type": "clear_everything"}), BETAS, "does not match any of the expected tags"),
    (_edits({"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015", "keep": "all"}), BETAS,
     "must be the first edit"),
    (_edits({"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 20_000}}), BETAS,
     "at least 50000"),
    (_edits({"type": "clear_tool_uses_20250919"}), ["compact-2026-01-12"], "context-management-2025-06-27"),
    (_edits({"type": "compact_20260112"}), ["context-management-2025-06-27"], "compact-2026-01-12"),
    (_edits({"type": "clear_tool_uses_20250919", "keep": {"type": "input_tokens", "value": 3}}), BETAS, "keep"),
])
def test_anthropic_edits_the_provider_refuses_are_refused(management: dict[str, Any], betas: list[str],
                                                           needle: str) -> None:
    with ScriptedLLMServer(["never sent"], validator="formats") as server, \
            pytest.raises(anthropic.BadRequestError, match=needle):
        _claude(server).beta.messages.create(model=MODEL, max_tokens=100, betas=betas, context_management=management,
                                             messages=[{"role": "user", "content": "hi"}])
    assert server.pending == 1  # refused before the model was asked


def test_clear_thinking_without_thinking_on_is_refused() -> None:
    with ScriptedLLMServer(["never sent"]) as server, pytest.raises(anthropic.BadRequestError, match="thinking"):
        _claude(server).beta.messages.create(model=MODEL, max_tokens=100, betas=BETAS, messages=[
            {"role": "user", "content": "hi"}], context_management=_edits({"type": "clear_thinking_20251015"}))


def test_clear_tool_uses_reports_what_it_cleared_in_the_sdks_types() -> None:
    with ScriptedLLMServer(["done"], validator="formats") as server:
        reply = _claude(server).beta.messages.create(
            model=MODEL, max_tokens=100, betas=BETAS, messages=_tool_turns(6),
            context_management=_edits({"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens",
                                                                                      "value": 30_000},
                                       "keep": {"type": "tool_uses", "value": 2}, "exclude_tools": ["read"]}))
    edit = reply.context_management.applied_edits[0] if reply.context_management else None
    assert isinstance(edit, BetaClearToolUses20250919EditResponse)
    assert edit.cleared_tool_uses == 2  # grep 0 and grep 2; read is excluded, the last two uses are kept
    raw = server.requests[0]
    assert reply.usage.input_tokens == raw.input_tokens < raw.input_tokens + edit.cleared_input_tokens
    assert edit.cleared_input_tokens > 30_000


def test_anthropic_compaction_block_heads_the_reply_and_a_changed_byte_is_refused() -> None:
    with ScriptedLLMServer(["first", "second"], validator="formats") as server:
        client = _claude(server)
        management = _edits({"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000},
                             "instructions": "keep the file names"})
        reply = client.beta.messages.create(model=MODEL, max_tokens=100, betas=BETAS, messages=_tool_turns(4),
                                            context_management=management)
        block = reply.content[0]
        assert isinstance(block, BetaCompactionBlock) and "keep the file names" in (block.content or "")
        assert reply.usage.iterations is not None
        assert [i.type for i in reply.usage.iterations] == ["compaction", "message"]
        assert reply.usage.input_tokens < 1_000  # the model read the summary, not the 80,000 tokens before it
        tampered = block.model_dump(exclude_none=True) | {"content": (block.content or "") + " (edited)"}
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.beta.messages.create(model=MODEL, max_tokens=100, betas=BETAS, messages=[
                {"role": "assistant", "content": [tampered]}, {"role": "user", "content": "go on"}])
        assert refused.value.error_code == "compaction_content_mismatch"
        client.beta.messages.create(model=MODEL, max_tokens=100, betas=BETAS, messages=[
            {"role": "assistant", "content": [block.model_dump(exclude_none=True)]},
            {"role": "user", "content": "go on"}])
    assert len(server.context_management.compactions) == 1


def test_a_tool_use_turn_whose_thinking_was_removed_is_refused_while_thinking_is_on() -> None:
    reply = Reply(reasoning="I need the logs.", tool_calls=(ScriptedToolCall("grep", {"q": "error"}),))
    with ScriptedLLMServer([reply, "found it", "found it"], validator="formats") as server:
        client = _claude(server)
        first = client.messages.create(model=MODEL, max_tokens=2_000, thinking=THINKING,  # type: ignore[arg-type]
                                       messages=[{"role": "user", "content": "why does it fail?"}])
        assert isinstance(first.content[0], anthropic.types.ThinkingBlock)
        turn = [b.model_dump(exclude_none=True) for b in first.content]
        use = next(b for b in turn if b["type"] == "tool_use")
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "E1"}]}
        history = [{"role": "user", "content": "why does it fail?"}]
        client.messages.create(model=MODEL, max_tokens=2_000, thinking=THINKING,  # type: ignore[arg-type]
                               messages=[*history, {"role": "assistant", "content": turn}, result])
        without = [b for b in turn if b["type"] != "thinking"]
        with pytest.raises(anthropic.BadRequestError, match="must start with a thinking block"):
            client.messages.create(model=MODEL, max_tokens=2_000, thinking=THINKING,  # type: ignore[arg-type]
                                   messages=[*history, {"role": "assistant", "content": without}, result])
        edited = [dict(turn[0], thinking="I need the logs!"), *turn[1:]]
        with pytest.raises(anthropic.BadRequestError, match="signature"):
            client.messages.create(model=MODEL, max_tokens=2_000, thinking=THINKING,  # type: ignore[arg-type]
                                   messages=[*history, {"role": "assistant", "content": edited}, result])
    assert isinstance(BetaThinkingBlock.model_validate(turn[0]), BetaThinkingBlock)


def test_openai_compaction_item_and_encrypted_reasoning_in_the_sdks_types() -> None:
    big = [{"type": "message", "role": "user", "content": f"log {k}\n{BIG}"} for k in range(3)]
    with ScriptedLLMServer([Reply(text="ok", reasoning="Read the logs first.")], validator="formats") as server:
        response = _openai(server).responses.create(
            model="gpt-4o", input=big, store=False,  # type: ignore[arg-type]
            context_management=[{"type": "compaction", "compact_threshold": 40_000}])
    kinds = [type(item) for item in response.output]
    assert kinds[:2] == [ResponseCompactionItem, ResponseReasoningItem]
    assert response.usage is not None and response.usage.input_tokens < 1_000
    reasoning = response.output[1]
    assert isinstance(reasoning, ResponseReasoningItem) and reasoning.encrypted_content


@pytest.mark.parametrize(("entry", "needle"), [
    ({"type": "truncate"}, "Supported values are: 'compaction'"),
    ({"type": "compaction", "compact_threshold": 0}, "positive integer"),
])
def test_openai_context_management_the_provider_refuses_is_refused(entry: dict[str, Any], needle: str) -> None:
    with ScriptedLLMServer(["never sent"]) as server, pytest.raises(openai.BadRequestError, match=needle):
        _openai(server).responses.create(model="gpt-4o", input="hi",
                                         context_management=[entry])  # type: ignore[list-item]


def test_openai_refuses_a_call_without_its_reasoning_and_a_forged_item() -> None:
    reply = Reply(reasoning="Grep first.", tool_calls=(ScriptedToolCall("grep", {"q": "x"}, id="call_1"),))
    with ScriptedLLMServer([reply, "done", "done"]) as server:
        client = _openai(server)
        first = client.responses.create(model="gpt-4o", input="find x", store=False)
        items = [o.model_dump(exclude_none=True) for o in first.output]
        output = {"type": "function_call_output", "call_id": "call_1", "output": "x at 3"}
        client.responses.create(model="gpt-4o", input=[*items, output], store=False)  # as issued: fine
        with pytest.raises(openai.BadRequestError, match="without its required 'reasoning' item"):
            client.responses.create(model="gpt-4o", input=[items[1], output], store=False)
        forged = [dict(items[0], encrypted_content="Zm9yZ2Vk"), items[1], output]
        with pytest.raises(openai.BadRequestError, match="could not be verified"):
            client.responses.create(model="gpt-4o", input=forged, store=False)


def test_the_standalone_compact_endpoint_returns_the_user_messages_and_one_compaction_item() -> None:
    items = [{"role": "user", "content": "fix the build"},
             {"role": "assistant", "content": "Reading the log."},
             {"role": "user", "content": f"here it is\n{BIG}"}]
    with ScriptedLLMServer() as server:
        compacted = _openai(server).responses.compact(model="gpt-4o", input=items)  # type: ignore[arg-type]
    assert compacted.object == "response.compaction"
    assert [getattr(o, "type", None) for o in compacted.output] == ["message", "message", "compaction"]
    assert isinstance(compacted.output[-1], ResponseCompactionItem)
    assert compacted.usage.input_tokens > 15_000  # billed for the whole input it read
