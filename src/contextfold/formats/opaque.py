"""Provider state in a history: which format can read a part, and what converting to another format drops.

Some parts are a provider's own opaque state (:func:`contextfold.messages.is_opaque`): a signed Anthropic thinking
block, a redacted one, an OpenAI reasoning item with ``encrypted_content``, a Gemini thought with its signature, a
compaction item or block. Each goes back to the provider that produced it byte for byte, or not at all: another
provider cannot verify a signature or decrypt a blob, and rejects the request (or, worse, reads a placeholder as
text). Decoders tag such parts with their format (:func:`tag_origin`); every encoder first passes its messages
through :func:`portable`, which keeps what the target format can read and drops the rest. :func:`unreadable` says
what would be dropped, so a caller can report it (the manager emits ``provider.item_dropped``).

Reasoning without provider state (thinking text with no signature) is dropped the same way where the API needs a
signature or an id to accept it (Anthropic, Responses) and where it has no place at all (Chat Completions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..messages import Message, Part, ThinkingPart, UnknownPart, freeze, is_compaction, is_opaque
from ._common import WIRE_KEY

__all__ = ["DroppedPart", "kinds", "origin", "portable", "readable", "tag_origin", "unreadable"]

# Formats whose APIs take reasoning back only as the provider's own state (a signature or an item id).
_SIGNED_REASONING = frozenset({"anthropic", "openai_responses"})
# Formats with no place for reasoning in a request.
_NO_REASONING = frozenset({"openai_chat"})


@dataclass(frozen=True, slots=True)
class DroppedPart:
    """A part a format cannot read: the index of its message, the part, and what it is (for events)."""

    index: int
    part: Part
    kind: str
    origin: str | None


def tag_origin(extra: Mapping[str, Any], fmt: str) -> Mapping[str, Any]:
    """``extra`` tagged with ``fmt`` (the round-trip tag the decoders write), so a part knows where it came from.

    Extras that hold the tag already keep it (and their hints); an empty extra gets the bare tag.
    """
    wire = extra.get(WIRE_KEY)
    if isinstance(wire, Mapping) and wire.get("format") == fmt:
        return extra
    return freeze({**extra, WIRE_KEY: {"format": fmt}})


def origin(part: Part) -> str | None:
    """The format a part was decoded from, when its extra says so (None for parts built by hand)."""
    wire = part.extra.get(WIRE_KEY) if part.extra else None
    if isinstance(wire, Mapping) and isinstance(wire.get("format"), str):
        return str(wire["format"])
    if isinstance(part, UnknownPart) and part.format:
        return part.format
    return None


def _kind(part: Part) -> str:
    if is_compaction(part):
        return "compaction"
    if isinstance(part, ThinkingPart):
        if part.redacted:
            return "redacted_thinking"
        return "reasoning" if part.encrypted is not None else "thinking"
    return part.type


def readable(part: Part, fmt: str) -> bool:
    """Whether ``fmt``'s API can take ``part`` back as what it is.

    Provider state is readable by the format it came from only; a part built by hand (no origin tag) by the
    formats whose fields it fills (a signature: Anthropic and Gemini; a redacted block: Anthropic; encrypted
    reasoning: Responses). Other parts are every format's business, except reasoning text (see the module).
    """
    if is_opaque(part):
        source = origin(part)
        if source is not None:
            return source == fmt
        if isinstance(part, ThinkingPart):
            if part.redacted:
                return fmt == "anthropic"
            if part.signature is not None:
                return fmt in ("anthropic", "gemini")
            return fmt == "openai_responses"
        return False  # a compaction item of unknown origin belongs to no provider we could name
    if isinstance(part, ThinkingPart):
        if fmt in _NO_REASONING:
            return False
        if fmt in _SIGNED_REASONING:
            return origin(part) == fmt  # a Responses reasoning item without encrypted content still has its id
    return True


def unreadable(messages: Sequence[Message], fmt: str) -> list[DroppedPart]:
    """Every part of ``messages`` that ``fmt`` cannot read, in order."""
    out: list[DroppedPart] = []
    for index, m in enumerate(messages):
        if isinstance(m.content, str):
            continue
        for part in m.content:
            if isinstance(part, ThinkingPart | UnknownPart) and not readable(part, fmt):
                out.append(DroppedPart(index, part, _kind(part), origin(part)))
    return out


def portable(messages: Iterable[Message], fmt: str) -> list[Message]:
    """``messages`` without the parts ``fmt`` cannot read; a message left with nothing to say goes too.

    Messages with nothing to drop come back as the same objects (encoding stays byte for byte).
    """
    out: list[Message] = []
    for m in messages:
        if isinstance(m.content, str) or not any(
            isinstance(p, ThinkingPart | UnknownPart) and not readable(p, fmt) for p in m.content
        ):
            out.append(m)
            continue
        kept = tuple(p for p in m.content if not isinstance(p, ThinkingPart | UnknownPart) or readable(p, fmt))
        if kept or m.tool_calls or m.role == "tool":
            # Emptied content is spelled "" (what each format writes for "nothing beside the calls").
            out.append(replace(m, content=kept or ""))
    return out


def kinds(dropped: Iterable[DroppedPart]) -> dict[str, int]:
    """How many parts of each kind ``dropped`` holds (for an event's figures)."""
    counts: dict[str, int] = {}
    for d in dropped:
        counts[d.kind] = counts.get(d.kind, 0) + 1
    return counts
