"""Anthropic Messages <-> :class:`~contextfold.messages.Message`, losslessly.

Anthropic keeps the system prompt apart, puts tool calls (``tool_use``) in the assistant turn and their results
(``tool_result``) at the head of the next user turn, several results in one turn. Decoding splits such a user turn
into one tool Message per result (plus a user Message for any other blocks); encoding joins consecutive tool
Messages, and a block-content user Message right after them, back into one turn. Thinking blocks are
:class:`ThinkingPart` and stay first in their assistant turn. Tool ``input`` objects become JSON strings.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import InvalidHistory
from ..messages import Message, Part, TextPart, ToolCall
from ._anthropic_marks import keep_latest_marks
from ._anthropic_parts import NAME, decode_block, decode_blocks, encode_block, encode_content
from ._anthropic_validate import validate
from ._call_ids import UniqueCallIds, anthropic_call_id
from ._common import (
    WIRE_KEY,
    apply_hints,
    as_items,
    empty_hints,
    expect_list,
    expect_mapping,
    expect_str,
    make_extra,
    plain,
    role_of,
    split_extra,
)
from .opaque import portable

__all__ = ["NAME", "decode", "encode", "encode_request", "validate"]

_APART = frozenset({"system", "developer"})
_TURN_KEYS = ("role", "content")
_RESULT_KEYS = ("type", "tool_use_id", "content")
_USE_KEYS = ("type", "id", "name", "input")


# -- decode ---------------------------------------------------------------------------------------------------------
def decode(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Messages from Anthropic message dicts (plus ``system``/``developer`` items of the JSONL form)."""
    out: list[Message] = []
    for index, raw in enumerate(as_items(items)):
        role = role_of(raw)
        if role in _APART or role == "assistant":
            content = decode_blocks(raw.get("content"), index, "content")
            if role == "assistant":
                out.append(_decode_assistant(raw, content, index))
            else:
                out.append(Message(role, content, extra=make_extra(NAME, raw, _TURN_KEYS)))
        elif role == "user":
            out.extend(_decode_user(raw, index, after_tool=bool(out) and out[-1].role == "tool"))
        else:
            expected = ["assistant", "developer", "system", "user"]
            raise InvalidHistory(f"unknown role {role!r}; expected one of {expected}", index=index, field="role")
    return out


def decode_request(body: Mapping[str, Any]) -> list[Message]:
    """Messages from a request body ``{"system": ..., "messages": [...]}``."""
    system = body.get("system")
    head = [] if system is None else [{"role": "system", "content": system}]
    return decode([*head, *expect_list(body.get("messages", []), 0, "messages")])


def _decode_assistant(raw: Mapping[str, Any], content: str | tuple[Part, ...], index: int) -> Message:
    if isinstance(content, str):
        return Message("assistant", content, extra=make_extra(NAME, raw, _TURN_KEYS))
    blocks = raw["content"]
    parts: list[Part] = []
    calls: list[ToolCall] = []
    order = ""
    for k, (block, part) in enumerate(zip(blocks, content, strict=True)):
        if block.get("type") == "tool_result":
            raise InvalidHistory("an assistant turn cannot hold a tool_result block (results go in the next user "
                                 "turn)", index=index, field=f"content[{k}].type")
        if block.get("type") == "tool_use":
            calls.append(_decode_use(block, index, f"content[{k}]"))
            order += "t"
        else:
            parts.append(part)
            order += "p"
    hints: dict[str, Any] = {}
    if order != "p" * len(parts) + "t" * len(calls):
        hints["order"] = order
    body: str | tuple[Part, ...] = tuple(parts)
    if calls and _plain_text(parts):
        # Beside tool calls, a lone plain text block is how a string reply is sent: read it back as one.
        body = parts[0].text if parts else ""  # type: ignore[union-attr]
    message = Message("assistant", body, tuple(calls), extra=make_extra(NAME, raw, _TURN_KEYS, hints))
    empties = empty_hints(raw, _encode_assistant(message), ("content",))
    if empties:
        message = replace(message, extra=make_extra(NAME, raw, _TURN_KEYS, {**hints, **empties}))
    return message


def _plain_text(parts: Sequence[Part]) -> bool:
    if not parts:
        return True
    part = parts[0]
    return len(parts) == 1 and isinstance(part, TextPart) and part.cache_control is None and not part.extra


def _decode_use(block: Mapping[str, Any], index: int, field: str) -> ToolCall:
    call_id = expect_str(block.get("id"), index, f"{field}.id", nonempty=True)
    name = expect_str(block.get("name"), index, f"{field}.name", nonempty=True)
    arguments = expect_mapping(block.get("input"), index, f"{field}.input")
    return ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False), make_extra(NAME, block, _USE_KEYS))


def _decode_user(raw: Mapping[str, Any], index: int, *, after_tool: bool) -> list[Message]:
    content = raw.get("content")
    if not isinstance(content, list | tuple) or not any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
    ):  # (a string, or what decode_blocks refuses by name: a number, a mapping, null)
        _no_tool_use(content, index)
        parts = decode_blocks(content, index, "content")
        own = {"own_turn": True} if after_tool and not isinstance(parts, str) else None
        return [Message("user", parts, extra=make_extra(NAME, raw, _TURN_KEYS, own))]
    blocks = expect_list(content, index, "content")
    results: list[Message] = []
    rest: list[Part] = []
    order = ""
    for k, block in enumerate(blocks):
        field = f"content[{k}]"
        block = expect_mapping(block, index, field)
        if block.get("type") == "tool_result":
            results.append(_decode_result(block, index, field))
            order += "t"
        else:
            rest.append(decode_block(block, index, field))
            order += "p"
    turn = {k: plain(v) for k, v in raw.items() if k not in _TURN_KEYS}
    if turn:
        results[0] = _with_hint(results[0], "turn", turn)
    if not rest:
        return results
    hints: dict[str, Any] | None = None
    if order != "t" * len(results) + "p" * len(rest):
        hints = {"order": order}
    return [*results, Message("user", tuple(rest), extra=make_extra(NAME, {}, (), hints))]


def _no_tool_use(content: Any, index: int) -> None:
    """A user turn holding a ``tool_use`` block is refused: only the assistant calls tools."""
    for k, block in enumerate(content if isinstance(content, list) else ()):
        if isinstance(block, Mapping) and block.get("type") == "tool_use":
            raise InvalidHistory("a user turn cannot hold a tool_use block (only the assistant calls tools)",
                                 index=index, field=f"content[{k}].type")


def _with_hint(message: Message, key: str, value: Any) -> Message:
    passthrough, hints = split_extra(message.extra, NAME)
    return replace(message, extra={**passthrough, WIRE_KEY: {"format": NAME, **hints, key: value}})


def _decode_result(block: Mapping[str, Any], index: int, field: str) -> Message:
    call_id = expect_str(block.get("tool_use_id"), index, f"{field}.tool_use_id", nonempty=True)
    content = decode_blocks(block.get("content", ""), index, f"{field}.content")
    message = Message("tool", content, tool_call_id=call_id, extra=make_extra(NAME, block, _RESULT_KEYS))
    empties = empty_hints(block, _encode_result(message), ("content",))
    if empties:
        message = replace(message, extra=make_extra(NAME, block, _RESULT_KEYS, empties))
    return message


# -- encode ---------------------------------------------------------------------------------------------------------
def encode(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Anthropic message dicts; system and developer messages stay items of their own (the JSONL form)."""
    history = portable(messages, NAME)  # another provider's state is dropped, never sent
    ids = UniqueCallIds.anthropic(history)
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(history):
        message = history[i]
        if message.role == "tool":
            end = i
            while end < len(history) and history[end].role == "tool":
                end += 1
            joined = end < len(history) and _joins(history[end])
            out.append(_encode_results(history[i:end], history[end] if joined else None, ids.result))
            i = end + 1 if joined else end
            continue
        if message.role == "assistant":
            out.append(_encode_assistant(message, ids.call))
        else:
            passthrough, hints = split_extra(message.extra, NAME)
            turn = {"role": message.role, "content": encode_content(message.content)}
            turn.update((k, v) for k, v in passthrough.items() if k not in turn)
            apply_hints(turn, hints)
            out.append(turn)
        i += 1
    return out


def encode_request(messages: Iterable[Message]) -> dict[str, Any]:
    """The request body fragment ``{"system": ..., "messages": [...]}``; system and developer text is hoisted."""
    history = portable(messages, NAME)
    apart = [m for m in history if m.role in _APART]
    body: dict[str, Any] = {}
    if len(apart) == 1 and isinstance(apart[0].content, str):
        body["system"] = apart[0].content
    elif apart:
        blocks: list[dict[str, Any]] = []
        for m in apart:
            content = encode_content(m.content)
            blocks.extend([{"type": "text", "text": content}] if isinstance(content, str) else content)
        body["system"] = blocks
    body["messages"] = encode(m for m in history if m.role not in _APART)
    return keep_latest_marks(body)


def _joins(message: Message) -> bool:
    if message.role != "user" or isinstance(message.content, str) or not message.content:
        return False
    return not split_extra(message.extra, NAME)[1].get("own_turn")


def _encode_assistant(message: Message, ids: Callable[[str], str] = anthropic_call_id) -> dict[str, Any]:
    passthrough, hints = split_extra(message.extra, NAME)
    content: str | list[dict[str, Any]] = encode_content(message.content)
    if message.tool_calls:
        text_block = [{"type": "text", "text": content}] if content else []
        parts: list[dict[str, Any]] = text_block if isinstance(content, str) else content
        uses = [_encode_use(c, ids) for c in message.tool_calls]
        content = _interleave(parts, uses, hints.get("order"), "p", "t")
    turn = {"role": "assistant", "content": content}
    turn.update((k, v) for k, v in passthrough.items() if k not in turn)
    apply_hints(turn, hints)
    return turn


def _interleave(
    first: list[dict[str, Any]], second: list[dict[str, Any]], order: Any, a: str, b: str
) -> list[dict[str, Any]]:
    # ``order`` (e.g. "ptpt") restores blocks a provider interleaved; without it, ``first`` then ``second``.
    if not isinstance(order, str) or order.count(a) != len(first) or order.count(b) != len(second):
        return [*first, *second]
    queues = {a: iter(first), b: iter(second)}
    return [next(queues[c]) for c in order]


def _encode_use(call: ToolCall, ids: Callable[[str], str]) -> dict[str, Any]:
    passthrough, _ = split_extra(call.extra, NAME)
    block = {"type": "tool_use", "id": ids(call.id), "name": call.name,
             "input": call.parsed_arguments()}
    block.update((k, v) for k, v in passthrough.items() if k not in block)
    return block


def _encode_result(message: Message, ids: Callable[[str], str] = anthropic_call_id) -> dict[str, Any]:
    passthrough, hints = split_extra(message.extra, NAME)
    call_id = message.tool_call_id
    block = {"type": "tool_result", "tool_use_id": None if call_id is None else ids(call_id),
             "content": encode_content(message.content)}
    block.update((k, v) for k, v in passthrough.items() if k not in block)
    apply_hints(block, hints)
    return block


def _encode_results(results: Sequence[Message], user: Message | None, ids: Callable[[str], str]) -> dict[str, Any]:
    blocks = [_encode_result(m, ids) for m in results]
    first_hints = split_extra(results[0].extra, NAME)[1]
    if user is not None:
        user_hints = split_extra(user.extra, NAME)[1]
        blocks = _interleave(blocks, [encode_block(p) for p in user.parts], user_hints.get("order"), "t", "p")
    turn: dict[str, Any] = {"role": "user", "content": blocks}
    turn.update((k, v) for k, v in first_hints.get("turn", {}).items() if k not in turn)
    return turn
