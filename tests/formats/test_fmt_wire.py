"""Exact wire shapes: what each decoder builds and each encoder writes, for the cases that need care."""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.errors import InvalidHistory
from contextfold.formats import convert, get_format
from contextfold.messages import DocumentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart

chat = get_format("openai_chat")
responses = get_format("openai_responses")
anthropic = get_format("anthropic")
gemini = get_format("gemini")


def _same(fmt: Any, items: list[dict[str, Any]]) -> list[Message]:
    messages = fmt.decode(items)
    assert fmt.encode(messages) == items
    return messages


# -- OpenAI chat ----------------------------------------------------------------------------------------------------
def test_chat_keeps_every_spelling_of_nothing() -> None:
    items = [
        {"role": "user", "content": None},
        {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": ""}}]},
        {"role": "assistant", "content": "", "tool_calls": None},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "tool_call_id": "a", "content": ""},
    ]
    messages = _same(chat, items)
    assert [m.content for m in messages] == ["", "", "", "", ""]
    assert messages[1].tool_calls[0].arguments == ""


def test_chat_extras_round_trip_and_stay_out_of_other_formats() -> None:
    items = [
        {"role": "user", "content": "hi", "agent": "main", "message_type": "observation", "cache_control": {"t": 1}},
        {
            "role": "assistant",
            "content": "x",
            "thought": "x",
            "reasoning_content": "because",
            "refusal": None,
            "tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "a", "name": "f", "content": "ok"},
    ]
    messages = _same(chat, items)
    assert messages[0].extra["agent"] == "main"
    assert messages[1].extra["reasoning_content"] == "because"
    assert messages[1].tool_calls[0].extra["index"] == 0
    assert messages[2].name == "f"
    assert convert(items, "openai_chat", "anthropic") == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "tool_use", "id": "a", "name": "f",
                                                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}]},
    ]


def test_chat_parts_become_model_parts_or_stay_verbatim() -> None:
    audio = {"type": "input_audio", "input_audio": {"data": "AAA", "format": "wav"}}
    items = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look", "cache_control": {"type": "ephemeral"}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO", "detail": "low"}},
                {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"}},
                {"type": "file", "file": {"file_id": "file-1"}},
                audio,
            ],
        },
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
    ]
    parts = _same(chat, items)[0].content
    assert parts[0] == TextPart("look", {"type": "ephemeral"})
    assert parts[1] == ImagePart(data="iVBO", media_type="image/png", detail="low")
    assert parts[2] == ImagePart(url="https://x/y.png")
    assert parts[3] == DocumentPart(data="JVBE", media_type="application/pdf", title="a.pdf")
    assert parts[4] == DocumentPart(file_id="file-1")
    assert parts[5] == UnknownPart(audio, "openai_chat")
    # elsewhere, a part that format cannot carry leaves a visible trace instead of vanishing
    blocks = convert(items, "openai_chat", "anthropic")[0]["content"]
    assert blocks[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
    assert blocks[5]["type"] == "text" and "input_audio" in blocks[5]["text"]


def test_hints_never_overwrite_edited_content() -> None:
    message = chat.decode([{"role": "user", "content": None}])[0]
    assert chat.encode([message.with_content("edited")]) == [{"role": "user", "content": "edited"}]
    absent = chat.decode([{"role": "assistant", "tool_calls": [{"id": "a", "type": "function", "function": {
        "name": "f", "arguments": "{}"}}]}])[0]
    assert chat.encode([absent.with_content("now text")])[0]["content"] == "now text"


# -- OpenAI Responses -----------------------------------------------------------------------------------------------
RESPONSES_ITEMS = [
    {"role": "developer", "content": "be brief"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "a"},
                                                    {"type": "summary_text", "text": "b"}], "encrypted_content": "E"},
    {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
     "content": [{"type": "output_text", "text": "ok", "annotations": []}]},
    {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": '{"x":1}'},
    {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "g", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "r1"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "r2"}]},
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {"type": "function_call", "call_id": "c3", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c3", "output": "r3"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    {"role": "assistant", "content": "done"},
]


def test_responses_groups_one_assistant_turn_and_splits_it_back() -> None:
    messages = _same(responses, RESPONSES_ITEMS)
    responses.validate(RESPONSES_ITEMS)
    assert [m.role for m in messages] == [
        "developer", "user", "assistant", "tool", "tool", "assistant", "tool", "assistant", "assistant",
    ]
    turn = messages[2]
    assert isinstance(turn.content, tuple)
    thinking, text = turn.content
    assert thinking == ThinkingPart("a\n\nb", encrypted="E", extra=thinking.extra)
    assert thinking.extra["id"] == "rs_1"
    assert text.text == "ok"
    assert [c.id for c in turn.tool_calls] == ["c1", "c2"]
    assert turn.extra["id"] == "msg_1"
    assert messages[3].tool_call_id == "c1"
    assert isinstance(messages[7].content[0], UnknownPart)
    # to chat and back keeps every pair
    again = chat.decode(convert(RESPONSES_ITEMS, "openai_responses", "openai_chat"))
    assert [(m.role, m.tool_call_id, m.text) for m in again if m.role == "tool"] == [
        ("tool", "c1", "r1"), ("tool", "c2", "r2"), ("tool", "c3", "r3")
    ]


def test_responses_edited_summary_replaces_the_split_one() -> None:
    turn = responses.decode(RESPONSES_ITEMS)[2]
    assert isinstance(turn.content, tuple)
    edited = turn.with_content((ThinkingPart("new", encrypted="E", extra=turn.content[0].extra), turn.content[1]))
    item = responses.encode([edited])[0]
    assert item["summary"] == [{"type": "summary_text", "text": "new"}]
    assert item["id"] == "rs_1"


# -- Anthropic ------------------------------------------------------------------------------------------------------
THINK = {"type": "thinking", "thinking": "plan", "signature": "sig"}
USE_A = {"type": "tool_use", "id": "a", "name": "read", "input": {"path": "x", "n": 1.5}}
USE_B = {"type": "tool_use", "id": "b", "name": "grep", "input": {"q": "é"}, "cache_control": {"type": "ephemeral"}}


def test_anthropic_results_share_one_user_turn_and_split_into_tool_messages() -> None:
    items = [
        {"role": "system", "content": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [THINK, {"type": "text", "text": "two calls"}, USE_A, USE_B]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "file"}]},
            {"type": "tool_result", "tool_use_id": "b", "content": "boom", "is_error": True},
            {"type": "text", "text": "also, hurry"},
        ]},
        {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "XYZ"}, {"type": "text", "text": "k"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz"}]},
    ]
    messages = _same(anthropic, items)
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "tool", "user", "assistant", "tool"]
    # signed thinking is Anthropic's state: tagged with its origin (formats/opaque.py), sent back unchanged
    assert messages[2].content[0] == ThinkingPart("plan", "sig", extra={"_wire": {"format": "anthropic"}})
    assert messages[2].tool_calls[0] == ToolCall("a", "read", '{"path": "x", "n": 1.5}')
    assert messages[2].tool_calls[1].arguments == '{"q": "é"}'
    assert messages[4].extra["is_error"] is True
    assert messages[5].text == "also, hurry"
    tagged = {"_wire": {"format": "anthropic"}}
    assert messages[6].content[0] == ThinkingPart(redacted=True, encrypted="XYZ", extra=tagged)
    assert messages[7].content == ""
    anthropic.validate(items[:5])


def test_anthropic_separate_turns_and_interleaved_blocks_stay_as_they_were() -> None:
    items = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "text", "text": "first"}, USE_A, {"type": "text", "text": "then"},
                                          USE_B]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1"},
                                     {"type": "tool_result", "tool_use_id": "b", "content": "2"}]},
        {"role": "user", "content": [{"type": "text", "text": "a separate turn"}]},
    ]
    messages = _same(anthropic, items)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert [c.id for c in messages[1].tool_calls] == ["a", "b"]


def test_anthropic_request_hoists_system_and_developer() -> None:
    history = [Message("system", "be kind"), Message("developer", "use tools"), Message("user", "hi")]
    body = anthropic.encode_request(history)
    assert body == {
        "system": [{"type": "text", "text": "be kind"}, {"type": "text", "text": "use tools"}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert anthropic.encode_request(history[::2]) == {"system": "be kind", "messages": body["messages"]}
    assert anthropic.encode_request([history[2]]) == {"messages": body["messages"]}
    assert anthropic.encode(history)[1] == {"role": "developer", "content": "use tools"}


def test_thinking_order_is_kept_and_a_late_thinking_block_is_refused() -> None:
    history = [
        Message("user", "go"),
        Message("assistant", (ThinkingPart("plan", "sig"), TextPart("x")), (ToolCall("a", "f", "{}"),)),
        Message("tool", "done", tool_call_id="a"),
    ]
    encoded = anthropic.encode(history)
    assert [b["type"] for b in encoded[1]["content"]] == ["thinking", "text", "tool_use"]
    anthropic.validate(encoded)
    late = [history[0], history[1].with_content(history[1].content[::-1]), history[2]]
    with pytest.raises(InvalidHistory, match="thinking") as caught:
        anthropic.validate(anthropic.encode(late))
    assert caught.value.index == 1


# -- Gemini ---------------------------------------------------------------------------------------------------------
def test_gemini_parts_thoughts_and_signatures_round_trip() -> None:
    items = [
        {"role": "system", "parts": [{"text": "sys"}]},
        {"role": "user", "parts": [{"text": "see"}, {"inlineData": {"mimeType": "image/jpeg", "data": "/9j"}},
                                   {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/a.pdf"}}]},
        {"role": "model", "parts": [
            {"text": "thinking...", "thought": True, "thoughtSignature": "S1"},
            {"functionCall": {"name": "f", "args": {"a": [1, 2]}, "id": "x1"}, "thoughtSignature": "S2"},
        ]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "id": "x1", "response": {"rows": [1]}}}]},
        {"role": "model", "parts": [{"executableCode": {"language": "PYTHON", "code": "1"}}]},
    ]
    messages = _same(gemini, items)
    assert messages[1].content[1] == ImagePart(data="/9j", media_type="image/jpeg")
    assert messages[1].content[2] == DocumentPart(url="gs://b/a.pdf", media_type="application/pdf")
    assert messages[2].content == (ThinkingPart("thinking...", "S1", extra={"_wire": {"format": "gemini"}}),)
    assert messages[2].tool_calls[0].extra["thoughtSignature"] == "S2"
    assert messages[3].text == '{"rows": [1]}'
    assert messages[3].name == "f"
    assert isinstance(messages[4].content[0], UnknownPart)


def test_gemini_request_and_results_for_foreign_tool_messages() -> None:
    history = [
        Message("system", "sys"),
        Message("user", "q"),
        Message("assistant", "", (ToolCall("c1", "lookup", '{"k": "v"}'),)),
        Message("tool", "plain text result", tool_call_id="c1"),
    ]
    body = gemini.encode_request(history)
    assert body["system_instruction"] == {"parts": [{"text": "sys"}]}
    assert body["contents"][1] == {"role": "model", "parts": [
        {"functionCall": {"name": "lookup", "args": {"k": "v"}, "id": "c1"}}]}
    assert body["contents"][2] == {"role": "user", "parts": [
        {"functionResponse": {"name": "lookup", "response": {"output": "plain text result"}, "id": "c1"}}]}
    gemini.validate(body["contents"])
    assert gemini.decode_request(body)[1:] == [*history[1:3], Message(
        "tool", "plain text result", tool_call_id="c1", name="lookup")]
