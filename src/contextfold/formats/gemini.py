"""Gemini ``contents`` <-> :class:`~contextfold.messages.Message`, losslessly.

Roles are ``user`` and ``model``; the system prompt travels apart (``system_instruction``). A model turn carries
``functionCall`` parts; the next user turn answers each with a ``functionResponse`` part. Gemini ids are
optional: when absent, calls and responses are paired by order and name and get a synthetic id derived from their
position, so converting to a format that needs ids keeps every pair (and encoding back leaves the id out again).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import InvalidHistory
from ..messages import Message, Part, ToolCall
from ._common import (
    WIRE_KEY,
    as_items,
    expect_list,
    expect_mapping,
    expect_str,
    make_extra,
    plain,
    role_of,
    split_extra,
)
from ._gemini_parts import NAME, check_camel_case, decode_part, decode_parts, encode_part, encode_parts, is_plain_text
from ._gemini_validate import validate
from .opaque import portable

__all__ = ["NAME", "decode", "encode", "encode_request", "synthetic_call_id", "validate"]

_APART = frozenset({"system", "developer"})
_TURN_KEYS = ("role", "parts")
# Name sent for a response whose call is not in the history (Gemini requires one).
UNKNOWN_TOOL_NAME = "unknown_tool"


def synthetic_call_id(index: int, part: int) -> str:
    """The id given to a Gemini call that has none: content ``index``, part ``part``.

    Derived from the position alone so decoding the same history twice gives the same ids; changing the scheme
    would break the pairing of histories already converted and stored in another format.
    """
    return f"gemini_call_{index}_{part}"


# -- decode ---------------------------------------------------------------------------------------------------------
def decode(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Messages from Gemini contents (plus ``system``/``developer`` items of the JSONL form)."""
    out: list[Message] = []
    pending: list[ToolCall] = []  # calls of the last model turn not yet answered, for pairing by order and name
    for index, raw in enumerate(as_items(items)):
        role = role_of(raw)
        if role in _APART:
            parts = decode_parts(raw.get("parts"), index, "parts")
            out.append(Message(role, _as_text(parts), extra=make_extra(NAME, raw, _TURN_KEYS)))
        elif role == "model":
            message = _decode_model(raw, index)
            pending = list(message.tool_calls)
            out.append(message)
        elif role == "user":
            out.extend(_decode_user(raw, index, pending, after_tool=bool(out) and out[-1].role == "tool"))
        else:
            expected = ["developer", "model", "system", "user"]
            raise InvalidHistory(f"unknown role {role!r}; expected one of {expected}", index=index, field="role")
    return out


def decode_request(body: Mapping[str, Any]) -> list[Message]:
    """Messages from a request body ``{"system_instruction": {...}, "contents": [...]}``."""
    system = body.get("system_instruction", body.get("systemInstruction"))
    head = [] if system is None else [{"role": "system", **expect_mapping(system, 0, "system_instruction")}]
    return decode([*head, *expect_list(body.get("contents", []), 0, "contents")])


def _as_text(parts: tuple[Part, ...]) -> str | tuple[Part, ...]:
    # One plain text part is how a string is sent; read it back as one.
    if len(parts) == 1 and is_plain_text(parts[0]):
        return parts[0].text  # type: ignore[union-attr]
    return parts


def _decode_model(raw: Mapping[str, Any], index: int) -> Message:
    parts: list[Part] = []
    calls: list[ToolCall] = []
    order = ""
    for k, part in enumerate(expect_list(raw.get("parts"), index, "parts")):
        field = f"parts[{k}]"
        part = expect_mapping(part, index, field)
        check_camel_case(part, index, field)
        if "functionCall" in part:
            calls.append(_decode_call(part, index, k))
            order += "t"
        else:
            parts.append(decode_part(part, index, field))
            order += "p"
    hints = {"order": order} if order != "p" * len(parts) + "t" * len(calls) else None
    content: str | tuple[Part, ...] = _as_text(tuple(parts))
    if calls and not parts:
        content = ""
    return Message("assistant", content, tuple(calls), extra=make_extra(NAME, raw, _TURN_KEYS, hints))


def _decode_call(part: Mapping[str, Any], index: int, k: int) -> ToolCall:
    field = f"parts[{k}].functionCall"
    call = expect_mapping(part["functionCall"], index, field)
    name = expect_str(call.get("name"), index, f"{field}.name", nonempty=True)
    args = expect_mapping(call.get("args", {}), index, f"{field}.args")
    hints: dict[str, Any] = {}
    call_id = call.get("id")
    if call_id is None:
        call_id = synthetic_call_id(index, k)
        hints["id_absent"] = True
    expect_str(call_id, index, f"{field}.id", nonempty=True)
    if "args" not in call:
        hints["args_absent"] = True
    inner = {key: plain(v) for key, v in call.items() if key not in ("name", "args", "id")}
    if inner:
        hints["call"] = inner
    extra = make_extra(NAME, part, ("functionCall",), hints)
    return ToolCall(call_id, name, json.dumps(args, ensure_ascii=False), extra)


def _decode_user(raw: Mapping[str, Any], index: int, pending: list[ToolCall], *, after_tool: bool) -> list[Message]:
    raw_parts = expect_list(raw.get("parts"), index, "parts")
    if not any(isinstance(p, Mapping) and "functionResponse" in p for p in raw_parts):
        content = _as_text(decode_parts(raw_parts, index, "parts"))
        own = {"own_turn": True} if after_tool and not isinstance(content, str) else None
        return [Message("user", content, extra=make_extra(NAME, raw, _TURN_KEYS, own))]
    results: list[Message] = []
    rest: list[Part] = []
    order = ""
    for k, part in enumerate(raw_parts):
        field = f"parts[{k}]"
        part = expect_mapping(part, index, field)
        check_camel_case(part, index, field)
        if "functionResponse" in part:
            results.append(_decode_response(part, index, k, pending))
            order += "t"
        else:
            rest.append(decode_part(part, index, field))
            order += "p"
    turn = {key: plain(v) for key, v in raw.items() if key not in _TURN_KEYS}
    if turn:
        first = results[0]
        passthrough, hints = split_extra(first.extra, NAME)
        results[0] = replace(first, extra={**passthrough, WIRE_KEY: {"format": NAME, **hints, "turn": turn}})
    if not rest:
        return results
    hints_rest = {"order": order} if order != "t" * len(results) + "p" * len(rest) else None
    return [*results, Message("user", tuple(rest), extra=make_extra(NAME, {}, (), hints_rest))]


def _decode_response(part: Mapping[str, Any], index: int, k: int, pending: list[ToolCall]) -> Message:
    field = f"parts[{k}].functionResponse"
    response = expect_mapping(part["functionResponse"], index, field)
    name = expect_str(response.get("name"), index, f"{field}.name", nonempty=True)
    body = expect_mapping(response.get("response", {}), index, f"{field}.response")
    hints: dict[str, Any] = {}
    call_id = response.get("id")
    if call_id is None:
        hints["id_absent"] = True
        match = next((c for c in pending if c.name == name), None)
        call_id = match.id if match is not None else synthetic_call_id(index, k)
    expect_str(call_id, index, f"{field}.id", nonempty=True)
    pending[:] = [c for c in pending if c.id != call_id]
    if set(body) == {"output"} and isinstance(body["output"], str):
        content = body["output"]
    else:
        content = json.dumps(body, ensure_ascii=False)
        hints["response_json"] = True
    inner = {key: plain(v) for key, v in response.items() if key not in ("name", "response", "id")}
    if inner:
        hints["response"] = inner
    extra = make_extra(NAME, part, ("functionResponse",), hints)
    return Message("tool", content, tool_call_id=call_id, name=name, extra=extra)


# -- encode ---------------------------------------------------------------------------------------------------------
def encode(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Gemini contents; system and developer messages stay items of their own (the JSONL form)."""
    history = portable(messages, NAME)  # another provider's state is dropped, never sent
    names: dict[str, str] = {}  # call id -> function name, for results that do not carry the name
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(history):
        message = history[i]
        if message.role == "tool":
            end = i
            while end < len(history) and history[end].role == "tool":
                end += 1
            joined = end < len(history) and _joins(history[end])
            out.append(_encode_results(history[i:end], history[end] if joined else None, names))
            i = end + 1 if joined else end
            continue
        passthrough, hints = split_extra(message.extra, NAME)
        if message.role == "assistant":
            names.update((c.id, c.name) for c in message.tool_calls)
            parts = _model_parts(message, hints)
            turn = {"role": "model", "parts": parts}
        else:
            turn = {"role": message.role, "parts": encode_parts(message.content)}
        turn.update((k, v) for k, v in passthrough.items() if k not in turn)
        out.append(turn)
        i += 1
    return out


def encode_request(messages: Iterable[Message]) -> dict[str, Any]:
    """The request body ``{"system_instruction": {"parts": [...]}, "contents": [...]}`` (system text hoisted)."""
    history = portable(messages, NAME)
    system = [p for m in history if m.role in _APART for p in encode_parts(m.content)]
    body: dict[str, Any] = {}
    if system:
        body["system_instruction"] = {"parts": system}
    body["contents"] = encode(m for m in history if m.role not in _APART)
    return body


def _joins(message: Message) -> bool:
    if message.role != "user" or isinstance(message.content, str) or not message.content:
        return False
    return not split_extra(message.extra, NAME)[1].get("own_turn")


def _interleave(first: list[dict[str, Any]], second: list[dict[str, Any]], order: Any, a: str, b: str) -> list[Any]:
    # ``order`` restores parts the provider interleaved; without it, ``first`` then ``second``.
    if not isinstance(order, str) or order.count(a) != len(first) or order.count(b) != len(second):
        return [*first, *second]
    queues = {a: iter(first), b: iter(second)}
    return [next(queues[c]) for c in order]


def _model_parts(message: Message, hints: Mapping[str, Any]) -> list[dict[str, Any]]:
    if message.tool_calls and message.content == "":
        parts: list[dict[str, Any]] = []
    else:
        parts = encode_parts(message.content)
    calls = [_encode_call(c) for c in message.tool_calls]
    return _interleave(parts, calls, hints.get("order"), "p", "t")


def _encode_call(call: ToolCall) -> dict[str, Any]:
    passthrough, hints = split_extra(call.extra, NAME)
    inner: dict[str, Any] = {"name": call.name}
    if not hints.get("args_absent") or call.parsed_arguments():
        inner["args"] = call.parsed_arguments()
    if not hints.get("id_absent"):
        inner["id"] = call.id
    inner.update((k, v) for k, v in hints.get("call", {}).items() if k not in inner)
    part: dict[str, Any] = {"functionCall": inner}
    part.update((k, v) for k, v in passthrough.items() if k not in part)
    return part


def _encode_response(message: Message, names: Mapping[str, str]) -> dict[str, Any]:
    passthrough, hints = split_extra(message.extra, NAME)
    call_id = message.tool_call_id or ""
    name = message.name or names.get(call_id, UNKNOWN_TOOL_NAME)
    inner: dict[str, Any] = {"name": name, "response": _response_body(message, hints)}
    if not hints.get("id_absent") and message.tool_call_id is not None:
        inner["id"] = message.tool_call_id
    inner.update((k, v) for k, v in hints.get("response", {}).items() if k not in inner)
    part: dict[str, Any] = {"functionResponse": inner}
    part.update((k, v) for k, v in passthrough.items() if k not in part)
    return part


def _response_body(message: Message, hints: Mapping[str, Any]) -> dict[str, Any]:
    text = message.text
    if hints.get("response_json"):
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict):
            return body
    # Gemini reads the "output" key as the function's result.
    return {"output": text}


def _encode_results(results: Sequence[Message], user: Message | None, names: Mapping[str, str]) -> dict[str, Any]:
    parts = [_encode_response(m, names) for m in results]
    turn_hints = split_extra(results[0].extra, NAME)[1]
    if user is not None:
        user_hints = split_extra(user.extra, NAME)[1]
        parts = _interleave(parts, [encode_part(p) for p in user.parts], user_hints.get("order"), "t", "p")
    turn: dict[str, Any] = {"role": "user", "parts": parts}
    turn.update((k, v) for k, v in turn_hints.get("turn", {}).items() if k not in turn)
    return turn
