"""Custom tools of the Responses API (free-form input): their call and output items are a tool call and a tool
Message like a function call's, so they are paired, counted and masked, and come back byte for byte."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import ContextManager
from contextfold.errors import InvalidHistory
from contextfold.formats import anthropic, openai_chat, openai_responses
from contextfold.messages import Message
from contextfold.pairing import pair_list

PATCH = "*** Begin Patch\n*** Update File: app.py\n@@\n-print('hi')\n+print(\"hello\")\n*** End Patch"


def custom_turn(call_id: str, text: str = PATCH, output: Any = "Done: 1 file updated") -> list[dict[str, Any]]:
    """An assistant turn calling the custom tool ``apply_patch`` (with encrypted reasoning first), and its output."""
    return [
        {"type": "reasoning", "id": f"rs_{call_id}", "summary": [], "encrypted_content": f"gAAAA{call_id}"},
        {"type": "custom_tool_call", "id": f"ctc_{call_id}", "status": "completed", "call_id": call_id,
         "name": "apply_patch", "input": text},
        {"type": "custom_tool_call_output", "call_id": call_id, "output": output},
    ]


def history() -> list[dict[str, Any]]:
    """A user request, a turn with a custom call beside a function call, and another custom call."""
    return [
        {"type": "message", "role": "user", "content": "rename the greeting and run the tests"},
        {"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": "patch, then test"}]},
        {"type": "custom_tool_call", "call_id": "call_a", "name": "apply_patch", "input": PATCH},
        {"type": "function_call", "id": "fc_b", "call_id": "call_b", "name": "bash",
         "arguments": '{"cmd": "pytest -q"}'},
        {"type": "custom_tool_call_output", "id": "ctco_a", "call_id": "call_a",
         "output": [{"type": "input_text", "text": "Done"}]},
        {"type": "function_call_output", "call_id": "call_b", "output": "3 passed"},
        *custom_turn("call_c", text=""),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Renamed."}]},
    ]


def dumps(items: list[dict[str, Any]]) -> str:
    return json.dumps(items, sort_keys=True, ensure_ascii=False)


def test_custom_tool_items_come_back_byte_for_byte_and_are_accepted() -> None:
    items = history()
    messages = openai_responses.decode(items)
    assert dumps(openai_responses.encode(messages)) == dumps(items)
    openai_responses.validate(items)  # (refused a reasoning item followed by a custom call before)


def test_a_custom_call_and_its_output_are_a_paired_tool_call_and_tool_message() -> None:
    messages = openai_responses.decode(history())
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    pairs = [(p.call_id, p.name, p.call_index, p.result_index) for p in pair_list(messages)]
    assert pairs == [("call_a", "apply_patch", 1, 2), ("call_b", "bash", 1, 3), ("call_c", "apply_patch", 4, 5)]
    call = messages[1].tool_calls[0]
    assert json.loads(call.arguments) == {"input": PATCH}
    assert (messages[2].tool_call_id, messages[2].text) == ("call_a", "Done")


def test_other_formats_carry_a_custom_call_as_a_call_with_its_input() -> None:
    messages = openai_responses.decode(history())
    chat = openai_chat.encode(messages)
    openai_chat.validate(chat)
    assert json.loads(chat[1]["tool_calls"][0]["function"]["arguments"]) == {"input": PATCH}
    claude = anthropic.encode(messages)
    anthropic.validate(claude)
    assert claude[1]["content"][-2] == {"type": "tool_use", "id": "call_a", "name": "apply_patch",
                                        "input": {"input": PATCH}}


def test_an_output_answers_with_the_kind_of_its_call_even_when_rebuilt_without_its_marks() -> None:
    messages = openai_responses.decode(history())
    rebuilt = [Message.tool(m.tool_call_id or "", "[masked]") if m.role == "tool" else m for m in messages]
    items = openai_responses.encode(rebuilt)
    kinds = {item["call_id"]: item["type"] for item in items if item["type"].endswith("_output")}
    assert kinds == {"call_a": "custom_tool_call_output", "call_b": "function_call_output",
                     "call_c": "custom_tool_call_output"}
    openai_responses.validate(items)


def test_edited_arguments_of_a_custom_call_are_sent_as_its_free_form_input() -> None:
    messages = openai_responses.decode(history())
    turn = messages[1]
    edited = replace(turn.tool_calls[0], arguments='{"cmd": "[REDACTED]"}')  # (a redactor's edit, say)
    items = openai_responses.encode([messages[0], replace(turn, tool_calls=(edited, turn.tool_calls[1])),
                                     *messages[2:]])
    assert items[2] == {"type": "custom_tool_call", "call_id": "call_a", "name": "apply_patch",
                        "input": '{"cmd": "[REDACTED]"}'}


@pytest.mark.parametrize(("items", "index", "problem"), [
    ([{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "x"},
      {"type": "function_call_output", "call_id": "c", "output": "ok"}], 1, "no function_call with call_id 'c'"),
    ([{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
      {"type": "custom_tool_call_output", "call_id": "c", "output": "ok"}], 1, "no custom_tool_call with call_id"),
    ([{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "x"}], 0,
     "custom_tool_call 'c' has no custom_tool_call_output"),
])
def test_validate_pairs_custom_calls_with_custom_outputs(items: list[dict[str, Any]], index: int,
                                                         problem: str) -> None:
    with pytest.raises(InvalidHistory, match=problem) as info:
        openai_responses.validate(items)
    assert info.value.index == index and info.value.field == "call_id"


@pytest.mark.parametrize(("item", "field"), [
    ({"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": 7}, "input"),
    ({"type": "custom_tool_call", "call_id": "c", "name": "", "input": "x"}, "name"),
    ({"type": "custom_tool_call_output", "call_id": None, "output": "x"}, "call_id"),
])
def test_a_malformed_custom_item_is_refused_by_name(item: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidHistory) as info:
        openai_responses.decode([{"type": "message", "role": "user", "content": "go"}, item])
    assert (info.value.index, info.value.field) == (1, field)


def test_an_unknown_item_type_is_still_refused_naming_its_index_and_type() -> None:
    with pytest.raises(InvalidHistory, match="unknown item type 'tool_search_call'") as info:
        openai_responses.decode([*history(), {"type": "tool_search_call", "id": "x"}])
    assert (info.value.index, info.value.field) == (len(history()), "type")


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=200), output=st.text(min_size=1, max_size=50))
def test_any_free_form_input_round_trips(text: str, output: str) -> None:
    items = [{"type": "message", "role": "user", "content": "go"}, *custom_turn("call_1", text, output)]
    messages = openai_responses.decode(items)
    assert dumps(openai_responses.encode(messages)) == dumps(items)
    openai_responses.validate(openai_responses.encode(messages))


def test_a_manager_masks_old_custom_tool_outputs_and_sends_them_back_as_custom_outputs() -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive=False,
                        policy={"clear_at_least": 1_000})
    cm.add([{"type": "message", "role": "user", "content": "apply every patch"}], format="openai_responses")
    listing = "\n".join(f"{n:4d}  patched_{n} = apply({n}) + offset_{n * 3}" for n in range(1, 70))
    for n in range(20):
        cm.add(custom_turn(f"call_{n}", f"*** patch {n}", listing.replace("apply", f"apply{n}")),
               format="openai_responses")
        cm.prepare(format="openai_responses")
    assert cm.maskings
    items = cm.prepare(format="openai_responses")
    openai_responses.validate(items)
    outputs = [item for item in items if item.get("call_id") == "call_0" and item["type"].endswith("_output")]
    assert [item["type"] for item in outputs] == ["custom_tool_call_output"]
    masked = outputs[0]["output"]
    masked_text = masked if isinstance(masked, str) else "".join(p.get("text", "") for p in masked)
    assert "apply0(1)" not in masked_text and len(masked_text) < len(listing) // 4


def test_a_history_of_plain_messages_and_custom_tool_items_is_detected_as_responses() -> None:
    from contextfold.formats import detect_format

    items = [{"role": "user", "content": "apply it"}, *custom_turn("call_1")[1:]]
    assert detect_format(items) == "openai_responses"


@pytest.mark.parametrize("counter", ["estimate", "exact"])
def test_a_custom_call_is_counted_on_the_text_it_sends(counter: str) -> None:
    from contextfold.messages import ToolCall
    from contextfold.tokens import EstimatingCounter, MessageCounter, TiktokenCounter

    text = "".join(f'+    print("line {i}: \\"quoted\\" \\t tab")\n' for i in range(50))
    call_message = openai_responses.decode(custom_turn("c1", text))[0]
    messages = MessageCounter(EstimatingCounter() if counter == "estimate" else TiktokenCounter("o200k_base"))
    as_sent = replace(call_message, tool_calls=(ToolCall("c1", "apply_patch", text),))
    assert messages.count_message(call_message) == messages.count_message(as_sent)
    # a function call's JSON arguments are what it sends: counted as they are
    function_call = replace(call_message, tool_calls=(replace(call_message.tool_calls[0], extra={}),))
    assert messages.count_message(function_call) > messages.count_message(as_sent)
