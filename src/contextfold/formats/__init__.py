"""Lossless converters between provider message dicts and :class:`~contextfold.messages.Message`.

One module per wire format, none importing an SDK. Each exposes ``NAME``, ``decode(items)``, ``encode(messages)``
(the JSONL/list form: system and developer messages stay items of their own), ``encode_request(messages)`` (the
body fragment the API takes) and ``validate(items)`` (raises :class:`~contextfold.errors.InvalidHistory` for what
that API rejects).

>>> from contextfold.formats import convert
>>> convert([{"role": "user", "content": "hi"}], "openai_chat", "gemini")
[{'role': 'user', 'parts': [{'text': 'hi'}]}]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from importlib import import_module
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..errors import InvalidHistory

if TYPE_CHECKING:
    from ..messages import Message

__all__ = ["FORMATS", "WireFormat", "convert", "detect_format", "get_format"]


class WireFormat(Protocol):
    """What every format module provides (the modules themselves satisfy this protocol)."""

    NAME: str

    def decode(self, items: Iterable[Mapping[str, Any]]) -> list[Message]:
        """Messages from provider dicts."""
        ...

    def encode(self, messages: Iterable[Message]) -> list[dict[str, Any]]:
        """Provider dicts (the JSONL form) from Messages."""
        ...

    def encode_request(self, messages: Iterable[Message]) -> dict[str, Any]:
        """The request body fragment the provider's API takes."""
        ...

    def validate(self, items: Iterable[Mapping[str, Any]]) -> None:
        """Raise InvalidHistory for what the provider's API rejects."""
        ...


_NAMES = ("anthropic", "gemini", "openai_chat", "openai_responses")  # each the NAME of the module of that name


class _Formats(Mapping[str, WireFormat]):
    """The format modules by name, each imported when first asked for.

    A session uses one or two of the four, and importing all of them was a sixth of a cold start (issue 15).
    """

    def __init__(self) -> None:
        self._loaded: dict[str, WireFormat] = {}

    def __getitem__(self, name: str) -> WireFormat:
        module = self._loaded.get(name)
        if module is None:
            if name not in _NAMES:
                raise KeyError(name)
            module = self._loaded[name] = cast(WireFormat, import_module(f".{name}", __name__))
        return module

    def __iter__(self) -> Iterator[str]:
        return iter(_NAMES)

    def __len__(self) -> int:
        return len(_NAMES)


FORMATS: Mapping[str, WireFormat] = _Formats()

# Enough leading items to see a tool call or a typed part in any real history, few enough to stay O(1).
DETECT_WINDOW = 50

_RESPONSES_TYPES = frozenset({"message", "function_call", "function_call_output", "custom_tool_call",
                             "custom_tool_call_output", "reasoning", "item_reference"})
_RESPONSES_PARTS = frozenset({"input_text", "output_text", "input_image", "input_file", "input_audio"})
_ANTHROPIC_PARTS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"})
_CHAT_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})


def get_format(name: str) -> WireFormat:
    """The format module called ``name``; an unknown name is a ValueError listing the valid ones."""
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; expected one of {sorted(FORMATS)}") from None


def detect_format(items: Iterable[Mapping[str, Any]]) -> str:
    """The wire format of ``items``, judged from the first items.

    Plain ``{"role", "content": str}`` messages fit several formats; they are read as ``openai_chat``.
    Items that fit none raise :class:`InvalidHistory` naming the first one.
    """
    seen = False
    for index, item in enumerate(items):
        if index >= DETECT_WINDOW:
            break
        if not isinstance(item, Mapping):
            raise InvalidHistory("expected a message object", index=index)
        found = _detect_one(item)
        if found == "unknown":
            raise InvalidHistory("not a message of any known wire format (no role, type or parts)", index=index)
        if found is not None:
            return found
        seen = True
    if not seen:
        raise InvalidHistory("no messages to detect a format from")
    return "openai_chat"


def _detect_one(item: Mapping[str, Any]) -> str | None:
    kind = item.get("type")
    if isinstance(kind, str) and kind in _RESPONSES_TYPES:
        return "openai_responses"
    if "parts" in item or item.get("role") == "model":
        return "gemini"
    if item.get("role") == "tool" or "tool_calls" in item or "tool_call_id" in item:
        return "openai_chat"
    if "role" not in item:
        return "unknown"
    content = item.get("content")
    if isinstance(content, list):
        kinds = {p.get("type") for p in content if isinstance(p, Mapping)}
        if kinds & _RESPONSES_PARTS:
            return "openai_responses"
        if kinds & _ANTHROPIC_PARTS:
            return "anthropic"
        if kinds & _CHAT_PARTS:
            return "openai_chat"
    return None


def convert(items: Iterable[Mapping[str, Any]], src: str, dst: str) -> list[dict[str, Any]]:
    """Re-encode ``items`` from format ``src`` (or ``"auto"``) to format ``dst``, keeping every tool pair."""
    items = list(items)
    source = get_format(detect_format(items) if src == "auto" else src)
    return get_format(dst).encode(source.decode(items))
