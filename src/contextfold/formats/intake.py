"""What a manager refuses at ``add`` that a codec keeps: one message the format's own validator would refuse.

The codecs round-trip every spelling they can read, sendable or not (``formats`` tests keep each spelling of
nothing), so that a conversion changes nothing it need not. A manager is different: what it accepts goes into every
later request, and a message the API refuses would make each of them fail long after the call that brought it
(issue 21 §4: malformed messages accepted, then an invalid view). :func:`check_intake` runs the checks of the
format's validator that concern one message alone (content present and well typed, text blocks not blank, call
arguments JSON) and raises :class:`~contextfold.errors.InvalidHistory` naming the message and the field; the
checks across messages (pairing, order) stay the manager's, which repairs what it can.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidHistory
from ._common import expect_list, expect_mapping, expect_str, json_arguments, role_of
from .openai_chat import _check_content

__all__ = ["UNPARSED_ARGUMENTS", "check_intake", "repair_reply_arguments"]

# Where a model's tool call keeps arguments that are not a JSON object (cut by max_tokens, a local model's broken
# JSON): an object every API takes back, and the model still reads what it wrote.
UNPARSED_ARGUMENTS = "unparsed_arguments"


def check_intake(format: str, items: Sequence[Mapping[str, Any]], *, start: int = 0) -> list[Mapping[str, Any]]:
    """``items`` (``format`` dicts) as the manager takes them; InvalidHistory for the first no request could carry.

    Two omissions are filled in rather than refused, as each has one meaning: a Chat tool call without ``type`` is
    a ``function`` call (the API wants the word; the codec would keep it absent), and empty call arguments are no
    arguments, ``{}`` (OpenAI itself answers ``""`` for a tool without parameters; some gateways refuse it back).
    """
    check = _CHECKS.get(format)
    if check is None:
        return list(items)
    out: list[Mapping[str, Any]] = []
    for offset, raw in enumerate(items):
        if format == "openai_chat":
            raw = _typed_calls(raw)
        elif format == "openai_responses" and raw.get("type") == "function_call" and raw.get("arguments") == "":
            raw = {**raw, "arguments": "{}"}
        try:
            check(raw, offset)
        except InvalidHistory as exc:
            raise InvalidHistory(exc.problem, index=start + offset, field=exc.field) from None
        out.append(raw)
    return out


def repair_reply_arguments(format: str, items: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A model's reply (``format`` items) with each tool call's arguments that are not a JSON object wrapped in one.

    :func:`check_intake` refuses such arguments (a request carrying them is refused by OpenAI-compatible servers),
    which is right for a history a caller built, but a reply is the model's own output: a call cut at
    ``max_tokens`` mid-argument must not make the reply impossible to add (the client wrappers raised after the
    call; the proxy refused every later request of the conversation). ``""`` stays (it means ``{}``).
    """
    if format == "openai_chat":
        return [_chat_repaired(item) for item in items]
    if format == "openai_responses":
        return [{**item, "arguments": _object_arguments(item["arguments"])}
                if item.get("type") == "function_call" and _unparsed(item.get("arguments")) else item
                for item in items]
    return list(items)


def _chat_repaired(item: Mapping[str, Any]) -> Mapping[str, Any]:
    calls = item.get("tool_calls")
    if item.get("role") != "assistant" or not isinstance(calls, list):
        return item
    repaired = [_call_repaired(call) if isinstance(call, Mapping) else call for call in calls]
    return item if all(a is b for a, b in zip(repaired, calls, strict=True)) else {**item, "tool_calls": repaired}


def _call_repaired(call: Mapping[str, Any]) -> Mapping[str, Any]:
    function = call.get("function")
    if not isinstance(function, Mapping) or not _unparsed(function.get("arguments")):
        return call
    return {**call, "function": {**function, "arguments": _object_arguments(function["arguments"])}}


def _unparsed(arguments: Any) -> bool:
    """Whether ``arguments`` is text that is not a JSON object (``""`` is no arguments)."""
    if not isinstance(arguments, str) or arguments == "":
        return False
    try:
        return not isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return True


def _object_arguments(text: str) -> str:
    return json.dumps({UNPARSED_ARGUMENTS: text}, ensure_ascii=False)


def _typed_calls(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    calls = raw.get("tool_calls")
    if raw.get("role") != "assistant" or not isinstance(calls, list) or \
            all(not isinstance(c, Mapping) or ("type" in c and _arguments_given(c)) for c in calls):
        return raw
    return {**raw, "tool_calls": [_typed_call(c) if isinstance(c, Mapping) else c for c in calls]}


def _arguments_given(call: Mapping[str, Any]) -> bool:
    function = call.get("function")
    return not isinstance(function, Mapping) or function.get("arguments") != ""


def _typed_call(call: Mapping[str, Any]) -> Mapping[str, Any]:
    typed = {"type": "function", **call}
    function = call.get("function")
    if isinstance(function, Mapping) and function.get("arguments") == "":
        typed["function"] = {**function, "arguments": "{}"}
    return typed


def _chat(raw: Mapping[str, Any], index: int) -> None:
    role = raw.get("role")
    calls = raw.get("tool_calls") if role == "assistant" else None
    if role == "tool" and raw.get("content") is None:
        return  # a tool that returned nothing: sent as "" (see openai_chat.decode_message)
    _check_content(raw, index, has_calls=bool(calls))
    for k, call in enumerate(calls if isinstance(calls, list) else ()):
        if isinstance(call, Mapping) and call.get("type") != "function":
            raise InvalidHistory(f"type must be 'function', got {call.get('type')!r}", index=index,
                                 field=f"tool_calls[{k}].type")
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            json_arguments(function.get("arguments"), index, f"tool_calls[{k}].function.arguments",
                           allow_empty=False)


def _responses(raw: Mapping[str, Any], index: int) -> None:
    if raw.get("type") == "function_call":
        json_arguments(raw.get("arguments"), index, "arguments", allow_empty=False)


def _anthropic(raw: Mapping[str, Any], index: int) -> None:
    role = role_of(raw)
    content = raw.get("content")
    if role == "user" and isinstance(content, str) and not content.strip():
        raise InvalidHistory("content must not be empty", index=index, field="content")
    if role not in ("user", "assistant") or not isinstance(content, list):
        return  # (a string reply, or a shape decode refuses by name)
    if role == "user" and not content:
        raise InvalidHistory("content must not be empty", index=index, field="content")
    for k, block in enumerate(expect_list(content, index, "content")):
        block = expect_mapping(block, index, f"content[{k}]")
        if block.get("type") == "text" and not expect_str(block.get("text"), index, f"content[{k}].text").strip():
            raise InvalidHistory("text content blocks must contain non-whitespace text", index=index,
                                 field=f"content[{k}].text")


_CHECKS = {"openai_chat": _chat, "openai_responses": _responses, "anthropic": _anthropic}
