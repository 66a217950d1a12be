"""A tool call id used again in a later turn (OpenAI's APIs take it; gpt-4o's ids come back in 49 of the 200 tau-bench
sessions) is sent to Anthropic under a name of its own: the API takes each ``tool_use`` id once per request."""

from __future__ import annotations

import json

import pytest
from _fmt_helpers import call

from contextfold.errors import InvalidHistory
from contextfold.formats import anthropic
from contextfold.manager import ContextManager
from contextfold.messages import Message


def turn(call_id: str, output: str) -> list[Message]:
    return [Message.assistant("", [call(call_id, "search", json.dumps({"q": output}))]), Message.tool(call_id, output)]


def uses_and_results(body: dict[str, object]) -> list[tuple[str, str]]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [(block["type"], block.get("id") or block["tool_use_id"]) for m in messages
            if isinstance(m["content"], list) for block in m["content"] if block["type"] in ("tool_use", "tool_result")]


def test_a_reused_id_gets_a_name_of_its_own_and_its_results_follow_it() -> None:
    history = [Message.user("find flights"), *turn("call_A", "first"), *turn("call_B", "second"),
               *turn("call_A", "third"), Message.user("again"), *turn("call_A", "fourth")]
    body = anthropic.encode_request(history)
    anthropic.validate(body["messages"])
    assert uses_and_results(body) == [
        ("tool_use", "call_A"), ("tool_result", "call_A"), ("tool_use", "call_B"), ("tool_result", "call_B"),
        ("tool_use", "call_A_2"), ("tool_result", "call_A_2"), ("tool_use", "call_A_3"), ("tool_result", "call_A_3")]
    # and the same history gives the same names (the prompt cache's prefix stays)
    assert anthropic.encode_request(history) == body


def test_a_new_name_never_meets_an_id_of_the_history() -> None:
    history = [Message.user("go"), *turn("x", "1"), *turn("x_2", "2"), *turn("x", "3")]
    assert [i for _, i in uses_and_results(anthropic.encode_request(history))][::2] == ["x", "x_2", "x_3"]


def test_a_refused_and_reused_id_is_renamed_for_both() -> None:
    history = [Message.user("go"), *turn("functions.search:0", "1"), *turn("functions.search:0", "2")]
    body = anthropic.encode_request(history)
    anthropic.validate(body["messages"])
    first, _, second, _ = (i for _, i in uses_and_results(body))
    assert first.startswith("functions_search_0_") and second == f"{first}_2"


def test_validate_refuses_an_id_used_in_two_turns() -> None:
    items = anthropic.encode([Message.user("go"), *turn("c", "1")])
    items = [*items, {"role": "assistant", "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c", "content": "2"}]}]
    with pytest.raises(InvalidHistory, match="duplicate tool_use id 'c'") as info:
        anthropic.validate(items)
    assert (info.value.index, info.value.field) == (3, "content[0].id")


def test_the_manager_sends_a_tau_bench_style_history_anthropic_accepts() -> None:
    cm = ContextManager("claude-sonnet-4-5", max_context_tokens=200_000, store="memory", archive=False)
    cm.add([Message.user("change my flight"), *turn("call_A", "reservation"), *turn("call_A", "flights")])
    body = cm.prepare(format="anthropic")
    anthropic.validate(body["messages"])
    assert [i for _, i in uses_and_results(body)] == ["call_A", "call_A", "call_A_2", "call_A_2"]
