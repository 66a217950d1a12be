"""OpenAI Responses API input items <-> :class:`~contextfold.messages.Message`, losslessly.

The Responses API spreads one assistant turn over several items: ``reasoning`` items, an assistant ``message``
and ``function_call`` (or ``custom_tool_call``) items, in that order. Decoding groups such a run into one assistant
Message (reasoning as leading :class:`ThinkingPart`), each ``function_call_output`` (``custom_tool_call_output``)
becomes a tool Message, and encoding splits them back in the same order. Item ids and statuses stay in ``extra`` so
the items come back byte for byte.

A custom tool takes free-form text, not JSON: its call is a :class:`ToolCall` whose ``arguments`` are the object
``{"input": <the text>}`` (what every format's tool call can carry, and what another provider's model reads), marked
custom so that it goes back as a ``custom_tool_call`` with that text. Its output is a tool Message like any other
(paired, counted, masked); it is sent as a ``custom_tool_call_output`` when it answers a custom call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import InvalidHistory
from ..messages import Message, Part, Role, TextPart, ThinkingPart, ToolCall, UnknownPart
from ._call_ids import RESPONSES_IDS, check_call_id, history_call_ids, responses_call_id
from ._common import (
    CUSTOM_HINT,
    CUSTOM_INPUT_KEY,
    WIRE_KEY,
    apply_hints,
    as_items,
    custom_input,
    empty_hints,
    expect_list,
    expect_mapping,
    expect_str,
    json_arguments,
    make_extra,
    plain,
    role_of,
    split_extra,
)
from ._responses_parts import decode_content, encode_content, encode_thinking
from .opaque import portable, tag_origin

__all__ = ["NAME", "decode", "encode", "encode_request", "validate"]

NAME = "openai_responses"

_MESSAGE_ROLES = frozenset({"user", "assistant", "system", "developer"})
# Item types the API accepts that contextfold carries through verbatim (built-in tools, MCP, references).
_OPAQUE_TYPES = frozenset(
    {
        "item_reference",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "shell_call",
        "shell_call_output",
        "apply_patch_call",
        "apply_patch_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "compaction",
    }
)
# Position of each item kind inside one assistant turn: reasoning, then the message, then the calls (either kind).
_STAGE = {"reasoning": 0, "assistant": 1, "function_call": 2, "custom_tool_call": 2}
_CALL_KEYS = ("type", "call_id", "name", "arguments")
_CUSTOM_CALL_KEYS = ("type", "call_id", "name", "input")
_OUTPUT_KEYS = ("type", "call_id", "output")
# The output item type answering each call item type (the API pairs them by call_id and kind).
_OUTPUT_OF = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
_CUSTOM = CUSTOM_HINT
_MESSAGE_KEYS = ("type", "role", "content")


def _kind(raw: Mapping[str, Any], index: int) -> str:
    kind = raw.get("type")
    if kind is None and "role" in raw:
        kind = "message"
    kind = expect_str(kind, index, "type", nonempty=True)
    if kind == "message" and raw.get("role") == "assistant":
        return "assistant"
    return kind


# -- decode ---------------------------------------------------------------------------------------------------------
def decode(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Messages from Responses input items; malformed items raise :class:`InvalidHistory` naming index and field."""
    raw_items = as_items(items)
    kinds = [_kind(raw, i) for i, raw in enumerate(raw_items)]
    out: list[Message] = []
    i = 0
    while i < len(raw_items):
        kind = kinds[i]
        if kind in _STAGE:
            end = i + 1
            while end < len(kinds) and _continues(kinds[end - 1], kinds[end]):
                end += 1
            out.append(_decode_turn(raw_items[i:end], kinds[i:end], i))
            i = end
            continue
        if kind == "message":
            out.append(_decode_message(raw_items[i], i))
        elif kind in _OUTPUT_OF.values():
            out.append(_decode_output(raw_items[i], i))
        elif kind in _OPAQUE_TYPES:
            out.append(_decode_opaque(raw_items[i], i))
        else:
            # Kept, it would make every later request fail validate() (and the API): refused here, by name.
            raise InvalidHistory(f"unknown item type {kind!r}; the Responses item types contextfold reads are "
                                 f"message, function_call, function_call_output, custom_tool_call, "
                                 f"custom_tool_call_output, reasoning and "
                                 f"{', '.join(sorted(_OPAQUE_TYPES))}", index=i, field="type")
        i += 1
    return out


def _continues(previous: str, kind: str) -> bool:
    if kind not in _STAGE:
        return False
    # one message per turn; several reasoning items or calls (of either kind) in a row are one turn
    stage, before = _STAGE[kind], _STAGE[previous]
    return stage > before or (stage == before and kind != "assistant")


def _decode_message(raw: Mapping[str, Any], index: int) -> Message:
    role = role_of(raw)
    if role not in _MESSAGE_ROLES:
        problem = f"unknown role {role!r}; expected one of {sorted(_MESSAGE_ROLES)}"
        raise InvalidHistory(problem, index=index, field="role")
    content = decode_content(raw.get("content"), index, "content", role, NAME)
    hints = {"absent": ["type"]} if "type" not in raw else None
    return Message(role, content, extra=make_extra(NAME, raw, _MESSAGE_KEYS, hints))


def _decode_turn(group: Sequence[Mapping[str, Any]], kinds: Sequence[str], start: int) -> Message:
    thinking: list[Part] = []
    calls: list[ToolCall] = []
    message: Mapping[str, Any] | None = None
    message_content: str | tuple[Part, ...] = ""
    for offset, (raw, kind) in enumerate(zip(group, kinds, strict=True)):
        index = start + offset
        if kind == "reasoning":
            thinking.append(_decode_reasoning(raw, index))
        elif kind == "assistant":
            message = raw
            message_content = decode_content(raw.get("content"), index, "content", "assistant", NAME)
        elif kind == "custom_tool_call":
            calls.append(_decode_custom_call(raw, index))
        else:
            calls.append(_decode_call(raw, index))
    hints: dict[str, Any] = {}
    content: str | tuple[Part, ...] = message_content
    if thinking:
        if isinstance(message_content, str):
            if message is not None:
                hints["string_content"] = True
            message_content = (TextPart(message_content),) if message_content else ()
        content = (*thinking, *message_content)
    if message is not None:
        if "type" not in message:
            hints["absent"] = ["type"]
        if not message_content and (thinking or calls):
            hints["message_item"] = True
    return Message("assistant", content, tuple(calls), extra=make_extra(NAME, message or {}, _MESSAGE_KEYS, hints))


def _decode_reasoning(raw: Mapping[str, Any], index: int) -> ThinkingPart:
    summary = expect_list(raw.get("summary", []), index, "summary")
    texts = []
    for k, entry in enumerate(summary):
        entry = expect_mapping(entry, index, f"summary[{k}]")
        texts.append(expect_str(entry.get("text"), index, f"summary[{k}].text"))
    encrypted = raw.get("encrypted_content")
    if encrypted is not None:
        expect_str(encrypted, index, "encrypted_content")
    part = ThinkingPart("\n\n".join(texts), encrypted=encrypted)
    keys = ("type", "summary", "encrypted_content")
    part = replace(part, extra=tag_origin(make_extra(NAME, raw, keys), NAME))
    hints = empty_hints(raw, encode_thinking(part, NAME), keys)
    if summary != _summary(part.text):
        hints["summary"] = plain(summary)
    # Tagged even without hints: a reasoning item (its id, its encrypted content) is for Responses only.
    return replace(part, extra=make_extra(NAME, raw, keys, hints)) if hints else part


def _summary(text: str) -> list[dict[str, Any]]:
    return [{"type": "summary_text", "text": text}] if text else []


def _decode_call(raw: Mapping[str, Any], index: int) -> ToolCall:
    call_id = expect_str(raw.get("call_id"), index, "call_id", nonempty=True)
    name = expect_str(raw.get("name"), index, "name", nonempty=True)
    arguments = json_arguments(raw.get("arguments"), index, "arguments", allow_empty=True)
    return ToolCall(call_id, name, arguments, make_extra(NAME, raw, _CALL_KEYS))


def _decode_custom_call(raw: Mapping[str, Any], index: int) -> ToolCall:
    call_id = expect_str(raw.get("call_id"), index, "call_id", nonempty=True)
    name = expect_str(raw.get("name"), index, "name", nonempty=True)
    text = expect_str(raw.get("input"), index, "input")
    arguments = json.dumps({CUSTOM_INPUT_KEY: text}, ensure_ascii=False)
    return ToolCall(call_id, name, arguments, make_extra(NAME, raw, _CUSTOM_CALL_KEYS, {_CUSTOM: True}))


def _decode_output(raw: Mapping[str, Any], index: int) -> Message:
    call_id = expect_str(raw.get("call_id"), index, "call_id", nonempty=True)
    content = decode_content(raw.get("output"), index, "output", "tool", NAME)
    hints = {_CUSTOM: True} if raw.get("type") == "custom_tool_call_output" else None
    return Message("tool", content, tool_call_id=call_id, extra=make_extra(NAME, raw, _OUTPUT_KEYS, hints))


def _decode_opaque(raw: Mapping[str, Any], index: int) -> Message:
    # Built-in tool items have no Message shape; carry them whole so the next request still holds them.
    role: Role = raw["role"] if raw.get("role") in _MESSAGE_ROLES else "assistant"
    return Message(role, (UnknownPart(plain(raw), NAME),), extra={WIRE_KEY: {"format": NAME, "item": True}})


# -- encode ---------------------------------------------------------------------------------------------------------
def encode(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Responses input items; an assistant Message may become several (reasoning, message, function calls)."""
    out: list[dict[str, Any]] = []
    history = portable(messages, NAME)  # another provider's state is dropped, never sent
    ids = history_call_ids(history, RESPONSES_IDS, responses_call_id)
    call_kinds: dict[str, bool] = {}  # each call id met so far -> whether it is a custom tool's (its output's kind)
    for message in history:
        passthrough, hints = split_extra(message.extra, NAME)
        content = message.content
        if hints.get("item") and len(content) == 1 and isinstance(content[0], UnknownPart):
            out.append(plain(content[0].data))
        elif message.role == "tool":
            out.append(_encode_output(message, passthrough, hints, ids, call_kinds))
        elif message.role == "assistant":
            out.extend(_encode_turn(message, passthrough, hints, ids, call_kinds))
        else:
            item = {"type": "message", "role": message.role, "content": encode_content(content, message.role, NAME)}
            item.update((k, v) for k, v in passthrough.items() if k not in item)
            apply_hints(item, hints, constant=("type",))
            out.append(item)
    return _without_orphan_reasoning(out)


def _without_orphan_reasoning(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``items`` without reasoning items that nothing they produced follows (the API refuses those).

    A response cut short (or a history that ends in one) leaves reasoning with no message or call after it: it
    stays in the view and the archive, but no request can carry it.
    """
    kept: list[dict[str, Any]] = []
    produced = False  # whether an item a reasoning chain can precede follows the position being looked at
    for item in reversed(items):
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message" and item.get("role") == "assistant":
            kind = "assistant"
        if kind == "reasoning":
            if produced:
                kept.append(item)
            continue
        produced = kind in _STAGE
        kept.append(item)
    kept.reverse()
    return kept


def encode_request(messages: Iterable[Message]) -> dict[str, Any]:
    """The request body fragment: ``{"input": [...]}`` (system and developer messages stay input items)."""
    return {"input": encode(messages)}


def _encode_output(message: Message, passthrough: Mapping[str, Any], hints: Mapping[str, Any],
                   ids: Callable[[str], str], call_kinds: Mapping[str, bool]) -> dict[str, Any]:
    # The kind of the call it answers decides (a masked or rebuilt output may have lost its own mark); an output
    # whose call is not in the history keeps the kind it was decoded as.
    custom = call_kinds.get(message.tool_call_id or "")
    if custom is None:
        custom = bool(hints.get(_CUSTOM))
    item: dict[str, Any] = {"type": "custom_tool_call_output" if custom else "function_call_output"}
    if message.tool_call_id is not None:
        item["call_id"] = ids(message.tool_call_id)
    item["output"] = encode_content(message.content, "tool", NAME)
    item.update((k, v) for k, v in passthrough.items() if k not in item)
    return item


def _encode_turn(message: Message, passthrough: Mapping[str, Any], hints: Mapping[str, Any],
                 ids: Callable[[str], str], call_kinds: dict[str, bool]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    rest: str | tuple[Part, ...] = message.content
    if not isinstance(message.content, str):
        out.extend(encode_thinking(p, NAME) for p in message.content if isinstance(p, ThinkingPart))
        rest = tuple(p for p in message.content if not isinstance(p, ThinkingPart))
        has_thinking = len(rest) != len(message.content)
        if hints.get("string_content") and len(rest) == 1 and isinstance(rest[0], TextPart):
            rest = rest[0].text
        elif hints.get("string_content") and not rest:
            rest = ""
    else:
        has_thinking = False
    bare = not has_thinking and not message.tool_calls
    if rest or bare or hints.get("message_item"):
        item = {"type": "message", "role": "assistant", "content": encode_content(rest, "assistant", NAME)}
        item.update((k, v) for k, v in passthrough.items() if k not in item)
        apply_hints(item, hints, constant=("type",))
        out.append(item)
    for call in message.tool_calls:
        call_extra, call_hints = split_extra(call.extra, NAME)
        fc: dict[str, Any]
        custom = call_kinds[call.id] = bool(call_hints.get(_CUSTOM))
        if custom:
            fc = {"type": "custom_tool_call", "call_id": ids(call.id), "name": call.name,
                  "input": custom_input(call.arguments)}
        else:
            fc = {"type": "function_call", "call_id": ids(call.id), "name": call.name, "arguments": call.arguments}
        fc.update((k, v) for k, v in call_extra.items() if k not in fc)
        out.append(fc)
    return out


# -- validate -------------------------------------------------------------------------------------------------------
def validate(items: Iterable[Mapping[str, Any]]) -> None:
    """Raise :class:`InvalidHistory` for what the Responses API rejects.

    Checked: known item types and message roles; function and custom tool calls well formed (function arguments
    JSON, a custom call's input text) with unique ``call_id``; every ``function_call_output`` answers an earlier
    ``function_call`` and every ``custom_tool_call_output`` an earlier ``custom_tool_call``, and every call has an
    output; a ``reasoning`` item is followed by the assistant output it belongs to.
    """
    raw_items = as_items(items)
    pending: dict[str, tuple[int, str]] = {}  # call_id -> index and type of the call still waiting for its output
    for index, raw in enumerate(raw_items):
        kind = _kind(raw, index)
        if kind in ("message", "assistant"):
            _decode_message(raw, index)
        elif kind in _OUTPUT_OF:
            call = _decode_custom_call(raw, index) if kind == "custom_tool_call" else _decode_call(raw, index)
            if kind == "function_call":
                json_arguments(call.arguments, index, "arguments", allow_empty=False)
            check_call_id(call.id, RESPONSES_IDS, index, "call_id")
            if call.id in pending:
                problem = f"call_id {call.id!r} is already waiting for its output"
                raise InvalidHistory(problem, index=index, field="call_id")
            pending[call.id] = (index, kind)
        elif kind in _OUTPUT_OF.values():
            call_id = expect_str(raw.get("call_id"), index, "call_id", nonempty=True)
            waiting = pending.get(call_id)
            if waiting is None or _OUTPUT_OF[waiting[1]] != kind:
                call_kind = next(k for k, v in _OUTPUT_OF.items() if v == kind)
                problem = f"no {call_kind} with call_id {call_id!r} awaits this output"
                raise InvalidHistory(problem, index=index, field="call_id")
            decode_content(raw.get("output"), index, "output", "tool", NAME)
            del pending[call_id]
        elif kind == "reasoning":
            _decode_reasoning(raw, index)
            following = _kind(raw_items[index + 1], index + 1) if index + 1 < len(raw_items) else None
            if following not in _STAGE:
                raise InvalidHistory(
                    "a reasoning item must be followed by the assistant message or tool call it produced",
                    index=index,
                    field="type",
                )
        elif kind not in _OPAQUE_TYPES:
            raise InvalidHistory(f"unknown item type {kind!r}", index=index, field="type")
    if pending:
        call_id, (index, kind) = next(iter(pending.items()))
        raise InvalidHistory(f"{kind} {call_id!r} has no {_OUTPUT_OF[kind]}", index=index, field="call_id")
