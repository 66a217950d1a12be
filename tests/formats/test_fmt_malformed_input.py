"""Malformed input is refused where it enters, by field, never accepted into a view no API takes (issue 21 §4).

Each case was accepted before and then made a request the library's own validator (or the provider) refused, or
escaped as a RecursionError: Responses histories ending in reasoning or holding an assistant turn of reasoning only,
an unknown Responses item type, Anthropic blocks on the wrong side, tool arguments that are not an object or are
nested past the parser's limit, a Chat tool result of null content.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.errors import InvalidHistory
from contextfold.formats import get_format
from contextfold.manager import ContextManager
from contextfold.messages import Message, TextPart, ThinkingPart, ToolCall

RESPONSES = get_format("openai_responses")
ANTHROPIC = get_format("anthropic")
CHAT = get_format("openai_chat")
DEEP = "[" * 100_000 + "]" * 100_000


def test_a_responses_history_ending_in_reasoning_encodes_to_a_valid_request() -> None:
    # A response cut short: its reasoning has nothing after it. It stays in the view; no request carries it.
    history = [Message.user("q"), Message("assistant", (ThinkingPart("thinking...", encrypted="enc"),))]
    items = RESPONSES.encode(history)
    RESPONSES.validate(items)
    assert items == [{"type": "message", "role": "user", "content": "q"}]


def test_an_assistant_turn_of_reasoning_only_between_user_turns_encodes_to_a_valid_request() -> None:
    decoded = RESPONSES.decode([
        {"type": "message", "role": "user", "content": "q"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "message", "role": "user", "content": "again"},
    ])
    items = RESPONSES.encode(decoded)
    RESPONSES.validate(items)
    assert [item.get("content") for item in items] == ["q", "again"]


def test_reasoning_followed_by_what_it_produced_is_kept() -> None:
    history = [Message.user("q"),
               Message("assistant", (ThinkingPart("why", encrypted="enc"), TextPart("answer")))]
    items = RESPONSES.encode(history)
    RESPONSES.validate(items)
    assert [item["type"] for item in items] == ["message", "reasoning", "message"]


def test_an_unknown_responses_item_type_is_refused_at_decode_by_name() -> None:
    with pytest.raises(InvalidHistory, match="unknown item type 'frobnicate'") as caught:
        RESPONSES.decode([{"type": "message", "role": "user", "content": "q"}, {"type": "frobnicate", "x": 1}])
    assert (caught.value.index, caught.value.field) == (1, "type")


@pytest.mark.parametrize(
    ("items", "index", "field", "match"),
    [
        ([{"role": "user", "content": "q"},
          {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]}],
         1, "content[0].type", "an assistant turn cannot hold a tool_result block"),
        ([{"role": "user", "content": [{"type": "text", "text": "q"},
                                       {"type": "tool_use", "id": "x", "name": "f", "input": {}}]}],
         0, "content[1].type", "a user turn cannot hold a tool_use block"),
    ],
)
def test_anthropic_blocks_on_the_wrong_side_are_refused_at_decode(items: list[dict[str, Any]], index: int,
                                                                  field: str, match: str) -> None:
    with pytest.raises(InvalidHistory, match=match) as caught:
        ANTHROPIC.decode(items)
    assert (caught.value.index, caught.value.field) == (index, field)


def _chat(arguments: str, content: str | None = "r") -> list[dict[str, Any]]:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c", "content": content}]


@pytest.mark.parametrize(
    ("arguments", "field", "match"),
    [
        ("[1, 2]", "tool_calls[0].arguments", "must be a JSON object .*got list"),
        ('"text"', "tool_calls[0].arguments", "must be a JSON object .*got str"),
        ("5", "tool_calls[0].arguments", "must be a JSON object .*got int"),
        (DEEP, "tool_calls[0].function.arguments", "nested too deeply"),
    ],
)
def test_tool_arguments_that_are_not_an_object_are_refused_at_add_naming_the_field(arguments: str, field: str,
                                                                                    match: str) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=8_000)
    with pytest.raises(InvalidHistory, match=match) as caught:
        cm.add(_chat(arguments))
    assert (caught.value.index, caught.value.field) == (1, field)
    assert cm.messages() == []  # nothing half-added
    cm.close()


def test_a_deeply_nested_call_is_an_error_naming_the_call_for_messages_built_directly() -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=8_000)
    with pytest.raises(InvalidHistory, match="arguments of 'c' are not valid JSON") as caught:
        cm.add([Message.user("q"), Message.assistant("", [ToolCall("c", "f", DEEP)])])
    assert caught.value.field == "tool_calls[0].arguments"
    cm.close()


def test_a_chat_tool_result_of_null_content_is_sent_as_an_empty_string() -> None:
    # A framework's tool that returned None: the API refuses null there, so the request carries "".
    cm = ContextManager("gpt-4o", max_context_tokens=8_000)
    cm.add(_chat("{}", content=None))
    request = cm.prepare()
    CHAT.validate(request)
    assert request[-1] == {"role": "tool", "tool_call_id": "c", "content": ""}
    cm.close()


# -- found by the generated corpus (test_fmt_malformed_properties.py), pinned here one by one -----------------------
@pytest.mark.parametrize(
    ("format", "items", "index", "field", "match"),
    [
        ("openai_chat", [{"role": "system"}, {"role": "user", "content": "q"}], 0, "content",
         "content is required"),
        ("openai_chat", [{"role": "user", "content": [{"type": "", "text": "q"}]}], 0, "content[0].type",
         "must not be empty"),
        ("anthropic", [{"role": "user", "content": "q"},
                       {"role": "assistant", "content": [{"type": "text", "text": " "},
                                                         {"type": "text", "text": "x"}]},
                       {"role": "user", "content": "n"}], 1, "content[0].text", "non-whitespace"),
        ("anthropic", [{"role": "user", "content": " "}], 0, "content", "must not be empty"),
        ("anthropic", [{"role": "user", "content": 5}], 0, "content", "expected a string or an array"),
        ("anthropic", [{"role": "user", "content": True}], 0, "content", "expected a string or an array"),
    ],
)
def test_a_message_no_request_could_carry_is_refused_at_add_by_field(format: str, items: list[dict[str, Any]],
                                                                     index: int, field: str, match: str) -> None:
    # Each was accepted (or raised TypeError) and then made every request of the session invalid.
    cm = ContextManager("gpt-4o", max_context_tokens=8_000)
    with pytest.raises(InvalidHistory, match=match) as caught:
        cm.add(items, format=format)
    assert (caught.value.index, caught.value.field) == (index, field)
    assert cm.messages() == []
    cm.close()


def test_empty_call_arguments_are_no_arguments_and_an_audio_reply_is_taken() -> None:
    # OpenAI answers arguments "" for a tool without parameters: refusing them at add lost the paid reply and ended
    # the agent loop (a review found it after the intake checks landed). They are sent as {}.
    cm = ContextManager("gpt-4o", max_context_tokens=8_000)
    cm.add(_chat(""))
    assert cm.prepare()[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    cm.close()
    responses = ContextManager("gpt-4o", max_context_tokens=8_000)
    responses.add([{"type": "message", "role": "user", "content": "q"},
                   {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""},
                   {"type": "function_call_output", "call_id": "c", "output": "r"}], format="openai_responses")
    sent = responses.prepare("openai_responses")
    assert [item.get("arguments") for item in sent if item.get("type") == "function_call"] == ["{}"]
    responses.close()
    audio = ContextManager("gpt-4o", max_context_tokens=8_000)
    audio.add([{"role": "user", "content": "say hi"},
               {"role": "assistant", "content": None, "audio": {"id": "audio_abc123"}}])  # was: content is required
    audio.close()


def test_broken_pydantic_ai_parts_are_refused_by_field() -> None:
    pm = pytest.importorskip("pydantic_ai.messages")
    from contextfold.integrations.pydantic_ai import from_pydantic_ai

    for part, field in [(pm.TextPart(content=None), "parts[0].content"),
                        (pm.ToolCallPart(tool_name="f", args=5, tool_call_id="c"), "parts[0].args"),
                        (pm.ToolCallPart(tool_name="f", args={"b": object()}, tool_call_id="c"), "parts[0].args"),
                        (pm.ToolCallPart(tool_name=None, args={}, tool_call_id="c"), "parts[0].tool_name"),
                        (pm.ToolCallPart(tool_name="f", args={}, tool_call_id=7), "parts[0].tool_call_id")]:
        with pytest.raises(InvalidHistory) as caught:  # was: TypeError
            from_pydantic_ai([pm.ModelRequest(parts=[pm.UserPromptPart(content="q")]), pm.ModelResponse(parts=[part])])
        assert (caught.value.index, caught.value.field) == (1, field)


def test_tool_call_arguments_no_json_can_hold_get_a_tool_result() -> None:
    from contextfold.integrations._retrieval import answer

    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory")
    deep: Any = 1
    for _ in range(5_000):
        deep = {"k": deep}
    for arguments in ({"pattern": b"x"}, {"ref_id": {1}}, {"instructions": deep}):
        text = answer(cm, "tool_output_cache_grep", arguments)  # was: TypeError / RecursionError
        assert text.startswith("error: the arguments of tool_output_cache_grep"), text
    cm.close()


def test_a_chat_tool_call_without_type_is_sent_as_a_function_call_and_another_type_is_refused() -> None:
    items = _chat('{"a": 1}')
    del items[1]["tool_calls"][0]["type"]
    cm = ContextManager("gpt-4o", max_context_tokens=8_000)
    cm.add(items)
    request = cm.prepare()
    CHAT.validate(request)  # was: "tool_calls[0].type: type must be 'function', got None"
    assert request[1]["tool_calls"][0]["type"] == "function"
    cm.close()
    items[1]["tool_calls"][0]["type"] = "tool"
    other = ContextManager("gpt-4o", max_context_tokens=8_000)
    with pytest.raises(InvalidHistory, match="type must be 'function'") as caught:
        other.add(items)
    assert (caught.value.index, caught.value.field) == (1, "tool_calls[0].type")
    other.close()
