"""Strict decoding of the OpenAI-Chat-shaped message dicts that recorders write.

SWE-agent and tau-bench both store their histories as (slightly extended) OpenAI Chat Completions messages. The
checks here turn a recording that no provider would accept into an :class:`InvalidHistory` that names the record
and the field, instead of a ``KeyError`` deep inside a replay.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from ..errors import InvalidHistory
from ..messages import ROLES, Message, Part, Role, TextPart, ToolCall, UnknownPart

__all__ = ["decode_chat_message", "decode_content", "decode_tool_calls", "expect_mapping", "type_name"]

# Keys of a Chat Completions message that map onto Message fields; anything else is kept in ``extra``.
_MODELLED_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "name"})
_TEXT_BLOCK_KEYS = frozenset({"type", "text", "cache_control"})
_CALL_KEYS = frozenset({"id", "type", "function"})


def type_name(value: Any) -> str:
    """The JSON name of ``value``'s type, for error messages a user who wrote JSON will understand."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _join(prefix: str, name: str) -> str:
    if not prefix:
        return name
    return f"{prefix}{name}" if name.startswith("[") else f"{prefix}.{name}"


def expect_mapping(value: Any, index: int, field: str) -> Mapping[str, Any]:
    """``value`` if it is a JSON object, else an error naming ``field`` of record ``index``."""
    if not isinstance(value, Mapping):
        raise InvalidHistory(f"expected an object, got {type_name(value)}", index=index, field=field or None)
    return cast(Mapping[str, Any], value)


def _expect_str(value: Any, index: int, field: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidHistory(f"expected a string, got {type_name(value)}", index=index, field=field)
    if nonempty and not value:
        raise InvalidHistory("must not be empty", index=index, field=field)
    return value


def decode_content(value: Any, index: int, field: str) -> str | tuple[Part, ...]:
    """Message content: a string, null (no text), or a list of ``{"type": "text", "text": ...}`` blocks.

    Blocks of other types are kept verbatim as :class:`UnknownPart` so that nothing in the recording is lost.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise InvalidHistory(
            f"expected a string, a list of parts or null, got {type_name(value)}", index=index, field=field
        )
    parts: list[Part] = []
    for j, raw in enumerate(value):
        block = expect_mapping(raw, index, f"{field}[{j}]")
        if block.get("type") == "text":
            text = _expect_str(block.get("text"), index, f"{field}[{j}].text")
            cache_control = block.get("cache_control")
            if cache_control is not None:
                cache_control = expect_mapping(cache_control, index, f"{field}[{j}].cache_control")
            extra = {k: v for k, v in block.items() if k not in _TEXT_BLOCK_KEYS}
            parts.append(TextPart(text, cache_control=cache_control, extra=extra))
        else:
            parts.append(UnknownPart(dict(block), format="openai_chat"))
    return tuple(parts)


def _decode_arguments(value: Any, index: int, field: str) -> str:
    arguments = _expect_str(value, index, field)
    if not arguments.strip():
        return "{}"
    try:
        json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise InvalidHistory(f"not valid JSON ({exc.msg} at char {exc.pos})", index=index, field=field) from None
    return arguments


def decode_tool_calls(value: Any, index: int, field: str) -> tuple[ToolCall, ...]:
    """``tool_calls`` in the Chat Completions shape (null or a list of ``{id, type, function}``)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidHistory(f"expected a list or null, got {type_name(value)}", index=index, field=field)
    calls: list[ToolCall] = []
    for j, raw in enumerate(value):
        at = f"{field}[{j}]"
        call = expect_mapping(raw, index, at)
        call_id = _expect_str(call.get("id"), index, f"{at}.id", nonempty=True)
        kind = call.get("type", "function")
        if kind != "function":
            raise InvalidHistory(f"unsupported tool call type {kind!r}", index=index, field=f"{at}.type")
        function = expect_mapping(call.get("function"), index, f"{at}.function")
        name = _expect_str(function.get("name"), index, f"{at}.function.name", nonempty=True)
        arguments = _decode_arguments(function.get("arguments", ""), index, f"{at}.function.arguments")
        extra = {k: v for k, v in call.items() if k not in _CALL_KEYS}
        calls.append(ToolCall(call_id, name, arguments, extra=extra))
    return tuple(calls)


def decode_role(value: Any, index: int, field: str) -> Role:
    """A role contextfold models, or an error listing the ones it does."""
    if value not in ROLES:
        shown = repr(value) if isinstance(value, str) else type_name(value)
        raise InvalidHistory(f"unknown role {shown} (expected one of {', '.join(sorted(ROLES))})", index=index, field=field)
    return cast(Role, value)


def decode_chat_message(
    raw: Any, index: int, *, prefix: str = "", meta: Mapping[str, Any] | None = None
) -> Message:
    """One Chat Completions message dict as a :class:`Message`.

    Args:
        raw: The parsed JSON value.
        index: The record index reported in errors.
        prefix: The field path of the message inside the record (``"traj[3]"``), or "" when it is the record.
        meta: contextfold annotations to attach (the importers keep recorder-only keys here).
    """
    obj = expect_mapping(raw, index, prefix)
    role = decode_role(obj.get("role"), index, _join(prefix, "role"))
    content = decode_content(obj.get("content"), index, _join(prefix, "content"))
    tool_calls = decode_tool_calls(obj.get("tool_calls"), index, _join(prefix, "tool_calls"))
    if tool_calls and role != "assistant":
        raise InvalidHistory(f"only assistant messages carry tool calls, not {role}", index=index, field=_join(prefix, "tool_calls"))
    tool_call_id = obj.get("tool_call_id")
    if role == "tool":
        if tool_call_id is None:
            raise InvalidHistory("tool result without a tool_call_id", index=index, field=_join(prefix, "tool_call_id"))
        _expect_str(tool_call_id, index, _join(prefix, "tool_call_id"), nonempty=True)
    elif tool_call_id is not None:
        raise InvalidHistory(f"only tool results carry a tool_call_id, not {role}", index=index, field=_join(prefix, "tool_call_id"))
    name = obj.get("name")
    if name is not None:
        _expect_str(name, index, _join(prefix, "name"))
    extra = {k: v for k, v in obj.items() if k not in _MODELLED_KEYS}
    return Message(
        role, content, tool_calls, tool_call_id=tool_call_id, name=name, meta=meta or {}, extra=extra
    )
