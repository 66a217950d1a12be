"""OpenAI Chat Completions messages <-> :class:`~contextfold.messages.Message`, losslessly.

Every role is a message of its own (system and developer included), tool calls ride on the assistant message
and each result is a ``tool`` message naming its ``tool_call_id``. Keys this module does not model (``refusal``,
``annotations``, ``reasoning_content``, a recorder's own keys) stay in ``extra`` and come back out unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..errors import InvalidHistory
from ..messages import (
    ROLES,
    DocumentPart,
    ImagePart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCall,
    UnknownPart,
)
from ._call_ids import (
    ANTHROPIC_FITS,
    ANTHROPIC_IDS,
    CHAT_IDS,
    UniqueCallIds,
    anthropic_call_id,
    chat_call_id,
    check_call_id,
    history_call_ids,
    rename_refused,
)
from ._common import (
    apply_hints,
    as_items,
    data_url,
    empty_hints,
    expect_list,
    expect_mapping,
    expect_str,
    json_arguments,
    make_extra,
    parse_data_url,
    placeholder,
    plain,
    role_of,
    split_extra,
    type_name,
)
from .opaque import portable

__all__ = ["NAME", "decode", "decode_message", "encode", "encode_message", "encode_request", "validate",
           "with_anthropic_call_ids"]

NAME = "openai_chat"

# Inline data without a media type (a part decoded from a format that does not name one) still needs a data URL.
DEFAULT_MEDIA_TYPE = "application/octet-stream"

_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
_IMAGE_URL_KEYS = frozenset({"url", "detail"})
_FILE_KEYS = frozenset({"file_id", "file_data", "filename"})
_CALL_KEYS = ("id", "type", "function")
_FUNCTION_KEYS = frozenset({"name", "arguments"})


# -- decode ---------------------------------------------------------------------------------------------------------
def decode(items: Iterable[Mapping[str, Any]]) -> list[Message]:
    """Messages from Chat Completions dicts; malformed input raises :class:`InvalidHistory` naming index and field."""
    return [decode_message(item, index) for index, item in enumerate(as_items(items))]


def _modelled(role: str) -> tuple[str, ...]:
    # tool_calls only mean something on assistant messages and tool_call_id on tool messages; elsewhere they are
    # the caller's own keys and pass through untouched.
    keys = ["role", "content", "name"]
    if role == "assistant":
        keys.append("tool_calls")
    if role == "tool":
        keys.append("tool_call_id")
    return tuple(keys)


def decode_message(raw: Mapping[str, Any], index: int = 0) -> Message:
    """One Chat Completions message dict as a Message."""
    raw = expect_mapping(raw, index, None)
    role = role_of(raw)
    if role not in ROLES:
        raise InvalidHistory(f"unknown role {role!r}; expected one of {sorted(ROLES)}", index=index, field="role")
    content = _decode_content(raw.get("content"), index)
    tool_calls: tuple[ToolCall, ...] = ()
    if role == "assistant" and raw.get("tool_calls") is not None:
        calls = expect_list(raw["tool_calls"], index, "tool_calls")
        tool_calls = tuple(_decode_call(call, index, f"tool_calls[{k}]") for k, call in enumerate(calls))
    tool_call_id = None
    if role == "tool":
        tool_call_id = expect_str(raw.get("tool_call_id"), index, "tool_call_id", nonempty=True)
    name = raw.get("name")
    if name is not None:
        expect_str(name, index, "name")
    modelled = _modelled(role)
    message = Message(
        role,
        content,
        tool_calls,
        tool_call_id=tool_call_id,
        name=name,
        extra=make_extra(NAME, raw, modelled),
    )
    # A tool result of null content (a framework's tool that returned None) is sent as "": the API refuses null
    # there, so that spelling is not kept for the round trip.
    hinted = tuple(k for k in modelled if not (k == "content" and role == "tool" and raw.get("content") is None))
    hints = empty_hints(raw, encode_message(message), hinted)
    if hints:
        message = replace(message, extra=make_extra(NAME, raw, modelled, hints))
    return message


def _decode_content(value: Any, index: int) -> str | tuple[Part, ...]:
    if value is None or isinstance(value, str):
        return value or ""
    parts = expect_list(value, index, "content")
    return tuple(decode_part(part, index, f"content[{k}]") for k, part in enumerate(parts))


def decode_part(raw: Any, index: int, field: str) -> Part:
    """One content part; kinds contextfold does not model (audio, refusal, …) become :class:`UnknownPart`."""
    raw = expect_mapping(raw, index, field)
    kind = raw.get("type")
    if kind == "text":
        text = expect_str(raw.get("text"), index, f"{field}.text")
        return TextPart(text, raw.get("cache_control"), make_extra(NAME, raw, ("type", "text", "cache_control")))
    if kind == "image_url":
        image = raw.get("image_url")
        if isinstance(image, Mapping) and set(image) <= _IMAGE_URL_KEYS and isinstance(image.get("url"), str):
            extra = make_extra(NAME, raw, ("type", "image_url", "cache_control"))
            detail = image.get("detail")
            inline = parse_data_url(image["url"])
            if inline is not None:
                return ImagePart(None, inline[1], inline[0], detail, raw.get("cache_control"), extra)
            return ImagePart(image["url"], None, None, detail, raw.get("cache_control"), extra)
    if kind == "file":
        file = raw.get("file")
        if isinstance(file, Mapping) and set(file) <= _FILE_KEYS and _is_document(file):
            inline = parse_data_url(file["file_data"]) if "file_data" in file else None
            return DocumentPart(
                file_id=file.get("file_id"),
                data=inline[1] if inline else None,
                media_type=inline[0] if inline else None,
                title=file.get("filename"),
                cache_control=raw.get("cache_control"),
                extra=make_extra(NAME, raw, ("type", "file", "cache_control")),
            )
    if not isinstance(kind, str):
        raise InvalidHistory(f"expected a string part type, got {type_name(kind)}", index=index, field=f"{field}.type")
    return UnknownPart(plain(raw), NAME)


def _is_document(file: Mapping[str, Any]) -> bool:
    # Only shapes that come back byte for byte: string values, file_data a base64 data URL, something to point at.
    if not all(isinstance(v, str) for v in file.values()):
        return False
    if "file_data" in file and parse_data_url(file["file_data"]) is None:
        return False
    return "file_id" in file or "file_data" in file


def _decode_call(raw: Any, index: int, field: str) -> ToolCall:
    raw = expect_mapping(raw, index, field)
    call_id = expect_str(raw.get("id"), index, f"{field}.id", nonempty=True)
    function = expect_mapping(raw.get("function"), index, f"{field}.function")
    name = expect_str(function.get("name"), index, f"{field}.function.name", nonempty=True)
    arguments = json_arguments(function.get("arguments"), index, f"{field}.function.arguments", allow_empty=True)
    hints: dict[str, Any] = {}
    if "type" not in raw:
        hints["absent"] = ["type"]
    elif raw["type"] != "function":
        hints["raw"] = {"type": plain(raw["type"])}
    more = {k: plain(v) for k, v in function.items() if k not in _FUNCTION_KEYS}
    if more:
        hints["function"] = more
    return ToolCall(call_id, name, arguments, make_extra(NAME, raw, _CALL_KEYS, hints))


# -- encode ---------------------------------------------------------------------------------------------------------
def encode(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Chat Completions dicts, one per message (system and developer included); reasoning has no place in them."""
    history = portable(messages, NAME)
    ids = history_call_ids(history, CHAT_IDS, chat_call_id)
    return [encode_message(m, ids) for m in history]


def encode_request(messages: Iterable[Message]) -> dict[str, Any]:
    """The request body fragment: ``{"messages": [...]}``."""
    return {"messages": encode(messages)}


def with_anthropic_call_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat ``items`` with their tool call ids as the native Anthropic encoder names them, calls and results alike.

    For a view in Chat's shape that a gateway (litellm) sends on to Anthropic: an id with a character Anthropic
    refuses gets :func:`~contextfold.formats._call_ids.history_call_ids`'s rename (no two ids meet), and a call
    reusing an earlier call's id gets :class:`~contextfold.formats._call_ids.UniqueCallIds`' (``<id>_2``). ``items``
    come back as they are when nothing is renamed; else the items holding a renamed id are copies.
    """
    calls: list[str] = []
    results: list[str] = []
    for item in items:
        for call in item.get("tool_calls") or ():
            if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                calls.append(call["id"])
        if isinstance(item.get("tool_call_id"), str):
            results.append(item["tool_call_id"])
    renamed = rename_refused([*calls, *results], ANTHROPIC_IDS, anthropic_call_id)
    if not renamed and len(set(calls)) == len(calls):
        return items
    names = UniqueCallIds(lambda call_id: renamed.get(call_id, call_id), ANTHROPIC_FITS)
    return [_renamed(item, names) for item in items]


def _renamed(item: dict[str, Any], names: UniqueCallIds) -> dict[str, Any]:
    calls = item.get("tool_calls")
    if isinstance(calls, list) and calls:
        item = {**item, "tool_calls": [{**c, "id": names.call(c["id"])}
                                       if isinstance(c, Mapping) and isinstance(c.get("id"), str) else c
                                       for c in calls]}
    result_id = item.get("tool_call_id")
    if isinstance(result_id, str):
        item = {**item, "tool_call_id": names.result(result_id)}
    return item


def encode_message(message: Message, ids: Callable[[str], str] = chat_call_id) -> dict[str, Any]:
    """One Message as a Chat Completions dict; ``ids`` gives the wire id of a tool call id (its history's)."""
    extra = message.extra
    passthrough, hints = split_extra(extra, NAME) if extra else _NO_EXTRA
    role = message.role
    out: dict[str, Any] = {"role": role}
    content: str | list[dict[str, Any]] | None = _encode_content(message.content)
    calls = message.tool_calls if role == "assistant" else ()
    if calls and content == "":
        # OpenAI's own replies spell "no text beside the calls" as null.
        content = None
    out["content"] = content
    if calls:
        out["tool_calls"] = [_encode_call(c, ids) for c in calls]
    if message.tool_call_id is not None and role == "tool":
        out["tool_call_id"] = ids(message.tool_call_id)
    if message.name is not None:
        out["name"] = message.name
    if passthrough:
        for key, value in passthrough.items():
            out.setdefault(key, value)
    if hints:
        apply_hints(out, hints)
    return out


# What split_extra gives a message or call without extras (most of them): neither is changed by the encoders.
_NO_EXTRA: tuple[dict[str, Any], dict[str, Any]] = ({}, {})


def _encode_content(content: str | tuple[Part, ...]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts = [encode_part(p) for p in content if not isinstance(p, ThinkingPart)]
    if not parts and content:
        # Chat cannot carry reasoning back; a message that held only reasoning has no text left.
        return ""
    return parts


def encode_part(part: Part) -> dict[str, Any]:
    """One part as a Chat Completions content part (a visible placeholder for what chat cannot carry)."""
    passthrough, _ = split_extra(part.extra, NAME)
    out: dict[str, Any]
    if isinstance(part, TextPart):
        out = {"type": "text", "text": part.text}
    elif isinstance(part, ImagePart):
        url = part.url if part.url is not None else data_url(part.media_type or DEFAULT_MEDIA_TYPE, part.data or "")
        image: dict[str, Any] = {"url": url}
        if part.detail is not None:
            image["detail"] = part.detail
        out = {"type": "image_url", "image_url": image}
    elif isinstance(part, DocumentPart) and (part.file_id is not None or part.data is not None):
        file: dict[str, Any] = {}
        if part.file_id is not None:
            file["file_id"] = part.file_id
        if part.data is not None:
            file["file_data"] = data_url(part.media_type or DEFAULT_MEDIA_TYPE, part.data)
        if part.title is not None:
            file["filename"] = part.title
        out = {"type": "file", "file": file}
    elif isinstance(part, UnknownPart) and part.format in (NAME, ""):
        return plain(part.data)  # type: ignore[no-any-return]
    else:
        kind = part.data.get("type", "part") if isinstance(part, UnknownPart) else part.type
        return {"type": "text", "text": placeholder(f"{kind} part", NAME)}
    if part.cache_control is not None:
        out["cache_control"] = plain(part.cache_control)
    for key, value in passthrough.items():
        out.setdefault(key, value)
    return out


def _encode_call(call: ToolCall, ids: Callable[[str], str]) -> dict[str, Any]:
    extra = call.extra
    if not extra:
        return {"id": ids(call.id), "type": "function",
                "function": {"name": call.name, "arguments": call.arguments}}
    passthrough, hints = split_extra(extra, NAME)
    function = {"name": call.name, "arguments": call.arguments, **hints.get("function", {})}
    out: dict[str, Any] = {"id": ids(call.id), "type": "function", "function": function}
    for key, value in passthrough.items():
        out.setdefault(key, value)
    apply_hints(out, hints, constant=("type",))
    return out


# -- validate -------------------------------------------------------------------------------------------------------
def validate(items: Iterable[Mapping[str, Any]]) -> None:
    """Raise :class:`InvalidHistory` for what the Chat Completions API rejects.

    Checked: known roles; content types; tool calls well formed with JSON arguments; every assistant tool call
    answered by ``tool`` messages before the next non-tool message; no ``tool`` message without a pending call.
    """
    messages = as_items(items)
    pending: dict[str, int] = {}  # call id -> index of the assistant message that made it
    for index, raw in enumerate(messages):
        role = role_of(raw)
        if role not in ROLES:
            raise InvalidHistory(f"unknown role {role!r}; expected one of {sorted(ROLES)}", index=index, field="role")
        if role != "tool" and pending:
            _missing_result(pending)
        calls = raw.get("tool_calls") if role == "assistant" else None
        _check_content(raw, index, has_calls=bool(calls))
        if role == "assistant" and calls is not None:
            pending = _check_calls(calls, index)
        elif role == "tool":
            call_id = expect_str(raw.get("tool_call_id"), index, "tool_call_id", nonempty=True)
            if call_id not in pending:
                raise InvalidHistory(
                    f"tool message answers {call_id!r}, which no preceding assistant tool call awaits",
                    index=index,
                    field="tool_call_id",
                )
            del pending[call_id]
    if pending:
        _missing_result(pending)


def _missing_result(pending: Mapping[str, int]) -> None:
    call_id, index = next(iter(pending.items()))
    raise InvalidHistory(
        f"tool call {call_id!r} has no tool message answering it before the next non-tool message",
        index=index,
        field="tool_calls",
    )


def _check_content(raw: Mapping[str, Any], index: int, *, has_calls: bool) -> None:
    content = raw.get("content")
    if content is None:
        if raw.get("role") == "assistant" and (has_calls or raw.get("refusal") or raw.get("audio")):
            return  # (an audio reply carries its content in ``audio``)
        raise InvalidHistory("content is required", index=index, field="content")
    if isinstance(content, str):
        return
    for k, part in enumerate(expect_list(content, index, "content")):
        part = expect_mapping(part, index, f"content[{k}]")
        expect_str(part.get("type"), index, f"content[{k}].type", nonempty=True)
        if part.get("type") == "text":
            expect_str(part.get("text"), index, f"content[{k}].text")


def _check_calls(calls: Any, index: int) -> dict[str, int]:
    pending: dict[str, int] = {}
    for k, call in enumerate(expect_list(calls, index, "tool_calls")):
        field = f"tool_calls[{k}]"
        call = expect_mapping(call, index, field)
        call_id = expect_str(call.get("id"), index, f"{field}.id", nonempty=True)
        check_call_id(call_id, CHAT_IDS, index, f"{field}.id")
        if call.get("type") != "function":
            problem = f"type must be 'function', got {call.get('type')!r}"
            raise InvalidHistory(problem, index=index, field=f"{field}.type")
        function = expect_mapping(call.get("function"), index, f"{field}.function")
        expect_str(function.get("name"), index, f"{field}.function.name", nonempty=True)
        json_arguments(function.get("arguments"), index, f"{field}.function.arguments", allow_empty=False)
        if call_id in pending:
            raise InvalidHistory(f"duplicate tool call id {call_id!r}", index=index, field=f"{field}.id")
        pending[call_id] = index
    if not pending:
        raise InvalidHistory("tool_calls must not be an empty array", index=index, field="tool_calls")
    return pending

