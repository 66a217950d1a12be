"""SWE-agent ``.traj`` files: ``{"environment", "history", "info"}`` with the conversation in ``history``.

Two variants exist in the wild and both are read here:

* **Native tool calls** (SWE-agent 1.1 with function calling): assistant messages carry ``tool_calls``; results are
  ``role: "tool"`` messages whose ``tool_call_ids`` is a *list*; content is a string or a list of text blocks,
  sometimes with a message-level ``cache_control``.
* **Text tool calls** (models driven by SWE-agent's XML-style parser, e.g. SWE-agent-LM-32B): the call is written
  inside the assistant text as ``<function=NAME><parameter=P>value</parameter>...</function>``, ``tool_calls`` is
  null, and the output is the next ``role: "user"`` message (``OBSERVATION: ...``). These are parsed into real
  :class:`ToolCall` / tool-result pairs, so that pair-aware compaction treats them like any other call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidHistory
from ..formats._common import expect_mapping, type_name
from ..messages import Message
from ._chat import decode_chat, decode_role
from ._session import RecordedSession, Source

__all__ = ["TextCall", "looks_like_swe_agent", "parse_swe_agent", "parse_text_call"]

SOURCE: Source = "swe_agent"

# Recorder-only keys of a history entry: what the agent framework logged next to the message. They never reach a
# provider, so they go to ``meta["source_extra"]`` rather than ``extra`` (which the wire formats send back out).
_RECORDER_KEYS = ("agent", "message_type", "thought", "action", "is_demo")

# An observation is what the environment answered; SWE-agent marks those entries with this message_type.
_OBSERVATION_TYPE = "observation"

_FUNCTION_OPEN = re.compile(r"<function=([A-Za-z_][\w.\-]*)>")
_FUNCTION_CLOSE = "</function>"
# A parameter is read where the previous one ended (after whitespace): its opening tag there, its value up to the
# next closing tag. (A search for whole ``<parameter=P>…</parameter>`` elements anywhere in the body tried every
# opening tag against the rest of the body: a message of 80,000 unclosed tags, 1 MB, took minutes to import.)
_PARAMETER_OPEN = re.compile(r"\s*<parameter=([A-Za-z_][\w.\-]*)>")
_PARAMETER_CLOSE = "</parameter>"
_ONLY_SPACE = re.compile(r"\s*\Z")


@dataclass(frozen=True, slots=True)
class TextCall:
    """A tool call written as text: the function name, its parameters, and the text around the block."""

    name: str
    parameters: dict[str, str]
    before: str
    after: str

    @property
    def arguments(self) -> str:
        """The parameters as a JSON object string, in the order written (values stay strings, as the model wrote)."""
        return json.dumps(self.parameters, ensure_ascii=False)

    @property
    def text(self) -> str:
        """The message text without the call block."""
        before, after = self.before.rstrip(), self.after.strip()
        return f"{before}\n\n{after}" if before and after else before or after


def parse_text_call(content: str) -> TextCall | None:
    """The first ``<function=NAME>...</function>`` block of ``content``, or None when there is no well-formed one.

    Well-formed means: closed by ``</function>``, and nothing but whitespace between the ``<parameter=P>...
    </parameter>`` elements, each parameter named once. A half-written block (the model ran out of tokens) is not a
    call: SWE-agent itself rejected those, and the next observation reports the format error as a user message.
    """
    opened = _FUNCTION_OPEN.search(content)
    if opened is None:
        return None
    end = content.find(_FUNCTION_CLOSE, opened.end())
    if end < 0:
        return None
    body = content[opened.end() : end]
    parameters: dict[str, str] = {}
    position = 0
    while (tag := _PARAMETER_OPEN.match(body, position)) is not None:
        name, start = tag.group(1), tag.end()
        closed = body.find(_PARAMETER_CLOSE, start)
        if closed < 0 or name in parameters:
            return None
        parameters[name] = body[start:closed]
        position = closed + len(_PARAMETER_CLOSE)
    if not _ONLY_SPACE.match(body, position):
        return None
    return TextCall(opened.group(1), parameters, content[: opened.start()], content[end + len(_FUNCTION_CLOSE) :])


def looks_like_swe_agent(data: Any) -> bool:
    """Whether parsed JSON has the shape of a SWE-agent trajectory."""
    return isinstance(data, Mapping) and isinstance(data.get("history"), list)


def _recorder_meta(entry: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: entry[k] for k in _RECORDER_KEYS if k in entry}
    return {"source_extra": kept} if kept else {}


def _without(entry: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in keys}


def _tool_results(entry: Mapping[str, Any], index: int) -> list[Message]:
    """A ``role: "tool"`` entry: one result per id in ``tool_call_ids`` (SWE-agent writes a list)."""
    ids = entry.get("tool_call_ids", entry.get("tool_call_id"))
    if ids is None:
        raise InvalidHistory("tool result without tool_call_ids", index=index, field="tool_call_ids")
    if isinstance(ids, str):
        ids = [ids]
    if not isinstance(ids, list) or not ids:
        problem = "is empty" if isinstance(ids, list) else f"expected a list of ids, got {type_name(ids)}"
        raise InvalidHistory(problem, index=index, field="tool_call_ids")
    wire = _without(entry, (*_RECORDER_KEYS, "tool_call_ids", "tool_call_id"))
    if isinstance(wire.get("cache_control"), Mapping):
        wire = _cache_control_on_last_block(wire)
    meta = _recorder_meta(entry)
    if len(ids) > 1:
        meta["shared_output"] = len(ids)
    results = []
    for j, call_id in enumerate(ids):
        if not isinstance(call_id, str) or not call_id:
            problem = f"expected a non-empty string, got {type_name(call_id)}"
            raise InvalidHistory(problem, index=index, field=f"tool_call_ids[{j}]")
        results.append(decode_chat({**wire, "tool_call_id": call_id}, index, meta=meta))
    return results


def _cache_control_on_last_block(wire: dict[str, Any]) -> dict[str, Any]:
    """SWE-agent puts the prompt-cache breakpoint on the message; providers read it from the last text block."""
    content = wire.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list) or not blocks:
        return wire
    last = blocks[-1]
    if not isinstance(last, Mapping) or last.get("type") != "text" or "cache_control" in last:
        return wire
    moved = {k: v for k, v in wire.items() if k != "cache_control"}
    moved["content"] = [*blocks[:-1], {**last, "cache_control": wire["cache_control"]}]
    return moved


def _text_call_message(entry: Mapping[str, Any], index: int, call: TextCall) -> Message:
    wire = _without(entry, (*_RECORDER_KEYS, "content", "tool_calls"))
    wire["content"] = call.text
    wire["tool_calls"] = [
        {"id": f"call_{index}", "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
    ]
    meta = {**_recorder_meta(entry), "raw_content": entry["content"]}
    return decode_chat(wire, index, meta=meta)


def _observation_result(entry: Mapping[str, Any], index: int, call_id: str) -> Message:
    wire = {**_without(entry, _RECORDER_KEYS), "role": "tool", "tool_call_id": call_id}
    return decode_chat(wire, index, meta={**_recorder_meta(entry), "raw_role": "user"})


def _is_observation(entry: Any) -> bool:
    if not isinstance(entry, Mapping) or entry.get("role") != "user":
        return False
    kind = entry.get("message_type")
    return kind is None or kind == _OBSERVATION_TYPE


def parse_history(history: Sequence[Any]) -> list[Message]:
    """Messages from a SWE-agent ``history`` list; errors name the history index and the field."""
    messages: list[Message] = []
    pending: str | None = None  # id of a text call whose observation is the next entry
    for index, raw in enumerate(history):
        entry = expect_mapping(raw, index, None)
        role = decode_role(entry.get("role"), index, "role")
        if pending is not None:
            messages.append(_observation_result(entry, index, pending))
            pending = None
        elif role == "tool":
            messages.extend(_tool_results(entry, index))
        elif (call := _answered_text_call(history, index)) is not None:
            messages.append(_text_call_message(entry, index, call))
            pending = f"call_{index}"
        else:
            messages.append(decode_chat(_without(entry, _RECORDER_KEYS), index, meta=_recorder_meta(entry)))
    return messages


def _answered_text_call(history: Sequence[Any], index: int) -> TextCall | None:
    """The text call of assistant entry ``index`` if the next entry is its observation.

    A call only becomes a ToolCall when its output follows; an unanswered one stays text, so that the import never
    creates a call without a result.
    """
    entry = history[index]
    content = entry.get("content")
    if entry.get("role") != "assistant" or entry.get("tool_calls") is not None or not isinstance(content, str):
        return None
    if index + 1 >= len(history) or not _is_observation(history[index + 1]):
        return None
    return parse_text_call(content)


def parse_swe_agent(data: Any, *, session_id: str) -> RecordedSession:
    """A parsed ``.traj`` document as a :class:`RecordedSession` (metadata: ``info`` plus ``environment``)."""
    if not looks_like_swe_agent(data):
        raise InvalidHistory("not a SWE-agent trajectory: expected an object with a 'history' list", field="history")
    info = data.get("info")
    metadata: dict[str, Any] = dict(info) if isinstance(info, Mapping) else {}
    if "environment" in data:
        metadata["environment"] = data["environment"]
    return RecordedSession(session_id, SOURCE, parse_history(data["history"]), "openai_chat", metadata)
