"""Malformed messages, generated (issue 21 §4: "4 of 113 malformed messages are accepted and then produce an
invalid view"; the issue's corpus is not ours, so hypothesis builds one).

A valid history of each format the manager takes (OpenAI Chat, Responses, Anthropic, LangChain and pydantic-ai
messages) is broken in one to three places: a field deleted, set to a value of the wrong type (null, numbers, NaN,
booleans, empty and blank strings, odd unicode, a 5 KB string, lists, mappings, deep nesting) or given an unknown
key, a whole message replaced. ``ContextManager.add`` must refuse it with :class:`InvalidHistory` naming the message
(and the field, when the break is inside a message), or accept it and then prepare a request the library's own
validator accepts. Never another exception, never an accepted-then-invalid view.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.errors import InvalidHistory
from contextfold.formats import get_format
from contextfold.manager import ContextManager

PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": [value]}
    return value


ODD = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
    st.text(max_size=12),
    st.sampled_from(["", " ", "\n\t", "\u202e\u0000\ud800", "\U0001f600" * 3, "x" * 5_000, "[" * 3_000,
                     '{"a": 1}', "null", "tout_0123456789abcdef"]),
    st.just([]), st.just({}), st.just([None]), st.just([[["deep"]]]), st.just({"type": "zz", "text": 1}),
    st.just(_nested(70)), st.dictionaries(st.text(max_size=4), st.none(), max_size=2),
)

BASES: dict[str, list[dict[str, Any]]] = {
    "openai_chat": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        {"role": "user", "content": [{"type": "text", "text": "more"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
    ],
    "openai_responses": [
        {"type": "message", "role": "developer", "content": "be brief"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "q"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "s"}],
         "encrypted_content": "e"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "r"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
        {"type": "message", "role": "user", "content": "more"},
    ],
    "anthropic": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "sig"},
                                          {"type": "text", "text": "x"},
                                          {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": [{"type": "text", "text": "r"}]},
                                     {"type": "text", "text": "more"}]},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "next"},
    ],
}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    if len(prefix) >= 5:
        return  # (a planted deep value is broken as a whole, not walked)
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield from _paths(inner, (*prefix, i))


@st.composite
def broken(draw: st.DrawFn, base: Any) -> tuple[Any, tuple[tuple[Any, ...], ...]]:
    """``base`` broken in one to three places; returns it and the paths broken."""
    value = copy.deepcopy(base)
    broke = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = list(_paths(value))
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        holder = value
        for step in path[:-1]:
            holder = holder[step]
        mode = draw(st.sampled_from(["set", "set", "delete", "extra"]))
        odd = copy.deepcopy(draw(ODD))  # (st.just hands out one object: a later break must not change it)
        if mode == "delete":
            del holder[path[-1]]
        elif mode == "extra" and isinstance(holder[path[-1]], dict):
            holder[path[-1]]["zz_unknown"] = odd
        else:
            holder[path[-1]] = odd
        broke.append(path)
    return value, tuple(broke)


def _sent_is_valid(cm: ContextManager, fmt: str) -> None:
    request = cm.prepare(fmt)
    get_format(fmt).validate(request["messages"] if fmt == "anthropic" else request)


def _refused_or_valid(fmt: str, add: Any, *, validate_as: str) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=100_000, store="memory", archive=None)
    try:
        try:
            add(cm)
        except InvalidHistory as exc:
            assert exc.index is not None, f"the refusal names no message: {exc}"
            assert str(exc).startswith("message "), str(exc)
            return
        _sent_is_valid(cm, validate_as)
    finally:
        cm.close()


@pytest.mark.parametrize("fmt", sorted(BASES))
def test_the_unbroken_histories_are_valid(fmt: str) -> None:
    _refused_or_valid(fmt, lambda cm: cm.add(BASES[fmt], format=fmt), validate_as=fmt)


@pytest.mark.parametrize("fmt", sorted(BASES))
@PROPERTY
@given(data=st.data())
def test_a_broken_provider_history_is_refused_by_field_or_sent_valid(fmt: str, data: st.DataObject) -> None:
    items, broke = data.draw(broken(BASES[fmt]))
    cm = ContextManager("gpt-4o", max_context_tokens=100_000, store="memory", archive=None)
    try:
        try:
            cm.add(items, format=fmt)
        except InvalidHistory as exc:
            assert exc.index is not None, f"the refusal names no message: {exc}"
            inside = [p for p in broke if len(p) > 1 and isinstance(p[0], int)]
            if inside and len(broke) == 1:
                assert exc.field, f"a break inside message {inside[0][0]} is refused without a field: {exc}"
            return
        _sent_is_valid(cm, fmt)
    finally:
        cm.close()


# -- framework messages ---------------------------------------------------------------------------------------------
@PROPERTY
@given(content=ODD | st.lists(ODD, max_size=3), args=ODD | st.dictionaries(st.text(max_size=5), ODD, max_size=3),
       call_id=ODD, result=ODD | st.lists(ODD, max_size=3), name=ODD)
def test_broken_langchain_messages_are_refused_by_field_or_sent_valid(content: Any, args: Any, call_id: Any,
                                                                      result: Any, name: Any) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from contextfold.integrations._langchain_convert import from_langchain

    # LangChain validates its own messages at construction; what it lets through is ours to handle.
    built: list[Any] = [HumanMessage(content="q")]
    for make in (
        lambda: HumanMessage(content=content),
        lambda: AIMessage(content="", tool_calls=[{"id": call_id, "name": name, "args": args}]),
        lambda: ToolMessage(content=result, tool_call_id=call_id),
    ):
        try:
            built.append(make())
        except (ValueError, TypeError):  # pydantic's ValidationError is a ValueError: LangChain refused it
            continue
    _refused_or_valid("langchain", lambda cm: cm.add(from_langchain(built)), validate_as="openai_chat")


@PROPERTY
@given(content=ODD | st.lists(ODD, max_size=3), args=ODD | st.dictionaries(st.text(max_size=5), ODD, max_size=3),
       call_id=ODD, result=ODD, name=ODD, text=ODD)
def test_broken_pydantic_ai_messages_are_refused_by_field_or_sent_valid(content: Any, args: Any, call_id: Any,
                                                                        result: Any, name: Any, text: Any) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import messages as pm

    from contextfold.integrations.pydantic_ai import from_pydantic_ai

    # pydantic-ai checks some values at construction (a user prompt's content); what it lets through is ours.
    def made(make: Any) -> list[Any]:
        try:
            return [make()]
        except (ValueError, TypeError):
            return []

    history = [
        pm.ModelRequest(parts=[pm.UserPromptPart(content="q"), *made(lambda: pm.UserPromptPart(content=content))]),
        pm.ModelResponse(parts=[*made(lambda: pm.TextPart(content=text)),
                                *made(lambda: pm.ToolCallPart(tool_name=name, args=args, tool_call_id=call_id))]),
        pm.ModelRequest(parts=made(lambda: pm.ToolReturnPart(tool_name=name, content=result, tool_call_id=call_id))
                        or [pm.UserPromptPart(content="go on")]),
    ]
    _refused_or_valid("pydantic_ai", lambda cm: cm.add(from_pydantic_ai(history)), validate_as="openai_chat")


def test_odd_values_serialise() -> None:
    json.dumps(_nested(10))  # (the strategy's own sanity: nesting is built iteratively)
