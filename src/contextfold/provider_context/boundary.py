"""A provider's compaction item is a visibility boundary: what it replaced is not sent again.

OpenAI's Responses API returns a ``compaction`` item (``encrypted_content``) when ``context_management`` compacts
the input; Anthropic's Messages API returns a ``compaction`` block (readable ``content``) at the head of the reply
when ``compact_20260112`` does. Either stands for everything that came before it in the request. So contextfold
keeps, of what precedes the latest boundary, only the standing prompt (system and developer messages: Anthropic
takes them apart from the conversation, and OpenAI's compaction item is not a reliable carrier of them, see
DESIGN.md), and its own compaction works on what follows the boundary only: it never summarizes across it.

An Anthropic compaction block whose ``content`` is null is a compaction that failed: the provider treats it as a
no-op, and so does contextfold (it is carried, it hides nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message, Part, UnknownPart, is_compaction
from ..pairing import BOUNDARY_KIND, pair_list

__all__ = ["BOUNDARY_KIND", "boundary_index", "drop_before_boundary", "is_boundary", "is_boundary_part", "mark",
           "split_at_boundary"]

# Roles kept from before a boundary: the standing prompt, which every request carries.
_STANDING = frozenset({"system", "developer"})


def is_boundary_part(part: Part) -> bool:
    """Whether ``part`` is a compaction item that replaces what came before it (not a failed, empty one)."""
    if not is_compaction(part):
        return False
    assert isinstance(part, UnknownPart)  # (is_compaction says so)
    data, fmt = part.data, part.format
    content, encrypted = data.get("content"), data.get("encrypted_content")
    if fmt == "anthropic" or (fmt != "openai_responses" and "content" in data):
        # Anthropic's block: the readable summary; null (or left out) when the compaction failed, a no-op
        return isinstance(content, str) and bool(content)
    return isinstance(encrypted, str) and bool(encrypted)  # OpenAI's item: the encrypted summary


def is_boundary(message: Message) -> bool:
    """Whether ``message`` holds a provider compaction item (marked, or recognised from its parts)."""
    if message.kind == BOUNDARY_KIND:
        return True
    return not isinstance(message.content, str) and any(is_boundary_part(p) for p in message.content)


def mark(message: Message) -> Message:
    """``message`` with ``meta["kind"]`` saying it is a boundary, when it is one (else ``message`` itself)."""
    if message.kind == BOUNDARY_KIND or isinstance(message.content, str):
        return message
    if any(is_boundary_part(p) for p in message.content):
        return message.with_meta(kind=BOUNDARY_KIND)
    return message


def boundary_index(messages: Sequence[Message]) -> int | None:
    """Index of the latest boundary message, or None."""
    for index in range(len(messages) - 1, -1, -1):
        m = messages[index]
        # (is_boundary inlined for the common message, text with no kind: a compaction scans the whole view)
        if m.meta.get("kind") == BOUNDARY_KIND or (type(m.content) is not str and is_boundary(m)):
            return index
    return None


def drop_before_boundary(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(the view the provider still reads, the messages the latest boundary replaced).

    The standing prompt before the boundary stays (in order); everything else before it goes. Without a boundary,
    or with nothing to drop, the messages come back whole and nothing is removed.
    """
    index = boundary_index(messages)
    if index is None:
        return list(messages), []
    kept = [m for m in messages[:index] if m.role in _STANDING]
    removed = [m for m in messages[:index] if m.role not in _STANDING]
    return [*kept, *messages[index:]], removed


def split_at_boundary(messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """(head, rest): the standing prompt and the latest boundary with its tool results, then what follows.

    contextfold's own compaction works on ``rest`` only, and puts ``head`` back in front of what it returns, so no
    summary ever covers the boundary or what it stands for. Without a boundary the head is empty.
    """
    index = boundary_index(messages)
    if index is None:
        return [], list(messages)
    end = index + 1
    # An Anthropic boundary is an assistant turn that may call tools: its results stay with it in the head.
    calls = {c.id for c in messages[index].tool_calls}
    if calls:
        answered = {p.result_index for p in pair_list(messages) if p.call_index == index and p.result_index}
        while end < len(messages) and end in answered:
            end += 1
    return list(messages[:end]), list(messages[end:])
