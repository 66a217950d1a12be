"""Each validator rejects what its API rejects, naming the item index (and field); decoders reject bad input."""

from __future__ import annotations

from typing import Any

import pytest
from _fmt_helpers import FORMAT_NAMES
from hypothesis import given, settings
from strategies import broken_histories, histories

from contextfold.errors import InvalidHistory
from contextfold.formats import get_format
from contextfold.messages import Message

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
CHAT_OK = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "r"},
    {"role": "assistant", "content": "done"},
]


def _rejects(fmt: str, items: list[dict[str, Any]], index: int, field: str | None = None, match: str = "") -> None:
    with pytest.raises(InvalidHistory, match=match) as caught:
        get_format(fmt).validate(items)
    assert caught.value.index == index, str(caught.value)
    if field is not None:
        assert caught.value.field == field, str(caught.value)
    assert f"message {index}" in str(caught.value)


def _chat_call(call_id: str, arguments: Any = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": arguments}}


# -- OpenAI chat ----------------------------------------------------------------------------------------------------
def test_chat_accepts_a_valid_history() -> None:
    get_format("openai_chat").validate(CHAT_OK)


@pytest.mark.parametrize(
    ("items", "index", "field", "match"),
    [
        ([*CHAT_OK[:3], {"role": "user", "content": "next"}], 2, "tool_calls", "c1"),
        ([*CHAT_OK[:3]], 2, "tool_calls", "c1"),
        ([CHAT_OK[1], {"role": "tool", "tool_call_id": "c9", "content": "r"}], 1, "tool_call_id", "c9"),
        ([*CHAT_OK[:4], {"role": "tool", "tool_call_id": "c1", "content": "again"}], 4, "tool_call_id", "c1"),
        ([{"role": "robot", "content": "x"}], 0, "role", "unknown role"),
        ([CHAT_OK[1], {"role": "assistant", "content": None, "tool_calls": [_chat_call("c1", {"a": 1})]}], 1,
         "tool_calls[0].function.arguments", "expected a string"),
        ([CHAT_OK[1], {"role": "assistant", "content": None, "tool_calls": [_chat_call("c1", "{oops")]}], 1,
         "tool_calls[0].function.arguments", "not valid JSON"),
        ([CHAT_OK[1], {"role": "assistant", "content": None, "tool_calls": [_chat_call("c1", "")]}], 1,
         "tool_calls[0].function.arguments", "not valid JSON"),
        ([CHAT_OK[1], {"role": "tool", "content": "r"}], 1, "tool_call_id", "expected a string"),
        ([{"role": "user", "content": None}], 0, "content", "required"),
        ([{"role": "user", "content": 5}], 0, "content", "expected an array"),
        ([CHAT_OK[1], {"role": "assistant", "content": None, "tool_calls": [_chat_call("c1"), _chat_call("c1")]}],
         1, "tool_calls[1].id", "duplicate"),
    ],
)
def test_chat_rejects(items: list[dict[str, Any]], index: int, field: str, match: str) -> None:
    _rejects("openai_chat", items, index, field, match)


# -- OpenAI Responses -----------------------------------------------------------------------------------------------
FC = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
FCO = {"type": "function_call_output", "call_id": "c1", "output": "r"}
USER = {"role": "user", "content": "u"}


def test_responses_accepts_a_valid_history() -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    get_format("openai_responses").validate([USER, reasoning, FC, FCO, {"role": "assistant", "content": "ok"}])


@pytest.mark.parametrize(
    ("items", "index", "field", "match"),
    [
        ([USER, FCO], 1, "call_id", "no function_call"),
        ([USER, FC], 1, "call_id", "no function_call_output"),
        ([USER, FC, USER], 1, "call_id", "no function_call_output"),
        ([USER, FC, FCO, FCO], 3, "call_id", "no function_call"),
        ([USER, {**FC, "arguments": "nope"}, FCO], 1, "arguments", "not valid JSON"),
        ([USER, {"type": "reasoning", "summary": []}, USER], 1, "type", "reasoning"),
        ([{"role": "robot", "content": "x"}], 0, "role", "unknown role"),
        ([USER, {"type": "teleport"}], 1, "type", "unknown item type"),
        ([USER, {**FCO, "output": 3}], 1, "output", None),
    ],
)
def test_responses_rejects(items: list[dict[str, Any]], index: int, field: str, match: str | None) -> None:
    if match is None:  # output of an unanswered call: either check may fire first, both name index 1
        with pytest.raises(InvalidHistory) as caught:
            get_format("openai_responses").validate(items)
        assert caught.value.index == index
        return
    _rejects("openai_responses", items, index, field, match)


# -- Anthropic ------------------------------------------------------------------------------------------------------
USE = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "t1", "content": "r"}
THINK = {"type": "thinking", "thinking": "hmm", "signature": "sig"}


def test_anthropic_accepts_a_valid_history() -> None:
    get_format("anthropic").validate(
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": [THINK, {"type": "text", "text": "x"}, USE]},
            {"role": "user", "content": [RESULT, {"type": "text", "text": "and also"}]},
            {"role": "assistant", "content": ""},  # an empty final assistant turn is a prefill
        ]
    )


@pytest.mark.parametrize(
    ("items", "index", "field", "match"),
    [
        ([{"role": "assistant", "content": "hi"}], 0, "role", "first message"),
        ([{"role": "user", "content": ""}], 0, "content", "empty"),
        ([{"role": "user", "content": []}], 0, "content", "empty"),
        ([{"role": "user", "content": [{"type": "text", "text": "  "}]}], 0, "content[0].text", "non-whitespace"),
        ([USER, {"role": "assistant", "content": [USE]}, USER], 1, "content", "t1"),
        ([USER, {"role": "assistant", "content": [USE]}], 1, "content", "t1"),
        ([USER, {"role": "assistant", "content": [USE]}, {"role": "assistant", "content": "x"}], 1, "content", "t1"),
        ([{"role": "user", "content": [RESULT]}], 0, "content[0].tool_use_id", "does not answer"),
        ([USER, {"role": "assistant", "content": [USE]}, USER, {"role": "user", "content": [RESULT]}], 1, "content",
         "t1"),
        ([USER, {"role": "assistant", "content": [USE]}, {"role": "user", "content": [{"type": "text", "text": "x"},
                                                                                    RESULT]}],
         2, "content[1]", "must come before"),
        ([USER, {"role": "assistant", "content": [{"type": "text", "text": "x"}, THINK, USE]}], 1, "content[1]",
         "thinking"),
        ([USER, {"role": "assistant", "content": [{**USE, "input": "{}"}]}], 1, "content[0].input", "object"),
        ([{"role": "model", "content": "x"}], 0, "role", "unknown role"),
    ],
)
def test_anthropic_rejects(items: list[dict[str, Any]], index: int, field: str, match: str) -> None:
    _rejects("anthropic", items, index, field, match)


# -- Gemini ---------------------------------------------------------------------------------------------------------
GCALL = {"functionCall": {"name": "f", "args": {}}}
GRESP = {"functionResponse": {"name": "f", "response": {"output": "r"}}}
GUSER = {"role": "user", "parts": [{"text": "u"}]}


def test_gemini_accepts_a_valid_history() -> None:
    get_format("gemini").validate(
        [GUSER, {"role": "model", "parts": [GCALL]}, {"role": "user", "parts": [GRESP]},
         {"role": "model", "parts": [{"text": "ok"}]}]
    )


@pytest.mark.parametrize(
    ("items", "index", "field", "match"),
    [
        ([GUSER, {"role": "user", "parts": [GRESP]}], 1, "parts[0].functionResponse", "no matching functionCall"),
        ([GUSER, {"role": "model", "parts": [GCALL]}, {"role": "user", "parts": [
            {"functionResponse": {"name": "g", "response": {}}}]}], 2, "parts[0].functionResponse", "'g'"),
        ([GUSER, {"role": "model", "parts": [GCALL]}, GUSER], 1, "parts", "no functionResponse"),
        ([GUSER, {"role": "model", "parts": [{"functionCall": {"name": "f", "id": "a"}}]},
          {"role": "user", "parts": [{"functionResponse": {"name": "f", "id": "b", "response": {}}}]}],
         2, "parts[0].functionResponse", "no matching"),
        ([{"role": "assistant", "parts": [{"text": "x"}]}], 0, "role", "'user' or 'model'"),
        ([{"role": "user", "parts": []}], 0, "parts", "empty"),
        ([GUSER, {"role": "model", "parts": [{"function_call": {"name": "f"}}]}], 1, "parts[0]", "camelCase"),
        ([GUSER, {"role": "model", "parts": [{"functionCall": {"name": "f", "args": "{}"}}]}], 1,
         "parts[0].functionCall.args", "object"),
    ],
)
def test_gemini_rejects(items: list[dict[str, Any]], index: int, field: str, match: str) -> None:
    _rejects("gemini", items, index, field, match)


# -- properties -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@settings(max_examples=25, deadline=None)
@given(history=broken_histories(defects=("missing_output", "orphan_output", "dropped_call_message")))
def test_broken_pairing_is_rejected_by_every_format(fmt: str, history: list[Message]) -> None:
    calls = {c.id for m in history for c in m.tool_calls}
    results = [m.tool_call_id for m in history if m.role == "tool"]
    if calls == set(results) and len(results) == len(calls):
        return  # the draw had no tool call to break
    with pytest.raises(InvalidHistory) as caught:
        get_format(fmt).validate(get_format(fmt).encode(history))
    assert caught.value.index is not None


@pytest.mark.parametrize("fmt", FORMAT_NAMES)
@settings(max_examples=20, deadline=None)
@given(history=histories())
def test_every_valid_history_passes_every_validator(fmt: str, history: list[Message]) -> None:
    get_format(fmt).validate(get_format(fmt).encode(history))


# -- decoders reject malformed input --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fmt", "items", "index", "field"),
    [
        ("openai_chat", [USER, {"role": "wizard", "content": "x"}], 1, "role"),
        ("openai_chat", [USER, {"role": "tool", "content": "x"}], 1, "tool_call_id"),
        ("openai_chat", [USER, {"role": "assistant", "tool_calls": [_chat_call("c", "{bad")]}], 1,
         "tool_calls[0].function.arguments"),
        ("openai_chat", [USER, {"role": "assistant", "tool_calls": [_chat_call("c", 7)]}], 1,
         "tool_calls[0].function.arguments"),
        ("openai_chat", [USER, {"role": "assistant", "tool_calls": {"id": "c"}}], 1, "tool_calls"),
        ("openai_chat", [USER, {"role": "user", "content": [{"type": "text", "text": 3}]}], 1, "content[0].text"),
        ("openai_chat", [USER, "not a message"], 1, None),
        ("openai_responses", [USER, {**FC, "arguments": "{bad"}], 1, "arguments"),
        ("openai_responses", [USER, {"type": "function_call_output", "output": "x"}], 1, "call_id"),
        ("anthropic", [USER, {"role": "assistant", "content": [{**USE, "input": [1]}]}], 1, "content[0].input"),
        ("anthropic", [USER, {"role": "user", "content": [{"type": "tool_result", "content": "x"}]}], 1,
         "content[0].tool_use_id"),
        ("gemini", [GUSER, {"role": "model", "parts": [{"functionCall": {"args": {}}}]}], 1,
         "parts[0].functionCall.name"),
        ("gemini", [GUSER, {"role": "bot", "parts": [{"text": "x"}]}], 1, "role"),
        ("gemini", [GUSER, {"role": "model", "parts": [{"function_call": {"name": "f"}}]}], 1, "parts[0]"),
        ("gemini", [{"role": "user", "parts": [{"function_response": {"name": "f"}}]}], 0, "parts[0]"),
    ],
)
def test_decoders_reject_malformed_input(fmt: str, items: list[Any], index: int, field: str | None) -> None:
    with pytest.raises(InvalidHistory) as caught:
        get_format(fmt).decode(items)
    assert caught.value.index == index, str(caught.value)
    assert caught.value.field == field, str(caught.value)
