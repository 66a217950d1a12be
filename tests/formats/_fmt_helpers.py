"""What each wire format can express, and comparisons that ignore what a format cannot carry."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from contextfold.formats._common import WIRE_KEY
from contextfold.formats.opaque import readable

try:
    from conftest import TRAJECTORIES, all_session_files, require
except ModuleNotFoundError:  # tests/ made a package: its conftest is then tests.conftest
    from tests.conftest import TRAJECTORIES, all_session_files, require
from contextfold.messages import EMPTY, Message, Part, TextPart, ThinkingPart, ToolCall

__all__ = [
    "FORMAT_NAMES",
    "TRAJECTORIES",
    "all_session_files",
    "call",
    "comparable",
    "expressible",
    "require",
    "shape",
    "tool_pairs",
]

FORMAT_NAMES = ("openai_chat", "openai_responses", "anthropic", "gemini")


def _own(extra: Any, fmt: str) -> Any:
    """``extra`` without the round-trip tag, or nothing when it belongs to another format."""
    if not extra:
        return EMPTY
    wire = extra.get(WIRE_KEY)
    if isinstance(wire, dict) and wire.get("format") != fmt:
        return EMPTY
    return {k: v for k, v in extra.items() if k != WIRE_KEY}


def _part(part: Part, fmt: str) -> Part:
    return replace(part, extra=_own(part.extra, fmt))


def comparable(messages: list[Message], fmt: str) -> list[Message]:
    """Messages without ``meta`` and round-trip tags, keeping only the extras ``fmt`` sends back."""
    out = []
    for m in messages:
        content = m.content if isinstance(m.content, str) else tuple(_part(p, fmt) for p in m.content)
        calls = tuple(replace(c, extra=_own(c.extra, fmt)) for c in m.tool_calls)
        out.append(replace(m, content=content, tool_calls=calls, meta=EMPTY, extra=_own(m.extra, fmt)))
    return out


def expressible(messages: list[Message], fmt: str) -> list[Message]:
    """``messages`` (as drawn by ``histories()``) reduced to what ``fmt`` can carry."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for m in messages:
        names.update((c.id, c.name) for c in m.tool_calls)
        content = m.content
        name = m.name
        if not isinstance(content, str):
            # Reasoning a format cannot read (chat: none; Responses: not its own) is dropped (formats/opaque.py).
            kept = tuple(p for p in content if not isinstance(p, ThinkingPart) or readable(p, fmt))
            content = kept if kept or not content else ""
        if fmt == "openai_responses":
            if m.role == "tool":
                name = None
            if m.role == "assistant" and content == "" and m.tool_calls and out and out[-1].role == "assistant":
                # Responses items carry no turn boundary: calls right after an assistant turn join it.
                out[-1] = replace(out[-1], tool_calls=out[-1].tool_calls + m.tool_calls)
                continue
        if fmt == "anthropic" and m.role == "tool":
            name = None
        if fmt == "gemini":
            if m.role == "tool":
                name = names.get(m.tool_call_id or "", name)
            joined = m.role == "user" and bool(out) and out[-1].role == "tool"
            if not isinstance(content, str) and len(content) == 1 and isinstance(content[0], TextPart) and not joined:
                content = content[0].text
        out.append(replace(m, content=content, name=name))
    return out


def tool_pairs(messages: list[Message]) -> list[tuple[str, str, Any, str]]:
    """Every (call id, name, parsed arguments, output text), in call order."""
    outputs = {m.tool_call_id: m.text for m in messages if m.role == "tool"}
    return [
        (c.id, c.name, json.loads(c.arguments or "{}"), outputs.get(c.id, "<missing>"))
        for m in messages
        for c in m.tool_calls
    ]


def shape(messages: list[Message]) -> list[tuple[str, str]]:
    """(role, text) per message; developer counts as system for formats that fold it."""
    return [(m.role, m.text) for m in messages]


def call(call_id: str, name: str = "f", arguments: str = "{}") -> ToolCall:
    """A tool call for hand-written histories."""
    return ToolCall(call_id, name, arguments)
