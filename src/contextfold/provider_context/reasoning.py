"""Old reasoning: the thinking of earlier turns cleared the way Anthropic's ``clear_thinking_20251015`` does.

Reasoning helps the turn that produced it; once the turn has answered, its thinking blocks (Anthropic), reasoning
items (OpenAI Responses) and thoughts (Gemini) are mostly weight. ``Policy.keep_thinking_turns`` keeps those of the
last N turns (a turn is a user request and everything that answers it) and clears the rest; ``"all"`` (the
default) keeps every one, which is what the provider's prompt cache wants (a cleared block changes the prefix).

The turn still in its tool loop is always kept whole, whatever N: both providers require the reasoning of the
assistant turn whose calls are being answered (Anthropic rejects a final assistant turn with tool calls that does
not start with its thinking block while thinking is on; OpenAI rejects a function call without its reasoning item).

Clearing a Responses reasoning item also takes the ``id`` off the items of its turn (the message's ``status``
with it): OpenAI links an output item to the reasoning that produced it by id, and rejects an item whose reasoning
is missing. Without the id the item is plain input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..formats.opaque import origin
from ..messages import Message, ThinkingPart, ToolCall, freeze

__all__ = ["ClearedReasoning", "clear_old_reasoning", "holds_reasoning", "in_tool_loop", "opens_turn",
           "reasoning_turns", "without_reasoning"]

# Keys of a Responses output item that tie it to the reasoning item before it (and, for a message, its output form).
_LINK_KEYS = frozenset({"id", "status"})
_CALL_LINK_KEYS = frozenset({"id"})


@dataclass(frozen=True, slots=True)
class ClearedReasoning:
    """The view with old reasoning cleared, and what went: parts, messages touched, their indices."""

    messages: list[Message]
    parts: int
    indices: tuple[int, ...]


def opens_turn(message: Message) -> bool:
    """Whether a turn opens at ``message``: a user request (contextfold's own user messages open none)."""
    return message.role == "user" and message.kind is None


def holds_reasoning(message: Message) -> bool:
    """Whether ``message`` is an assistant message holding reasoning (what clearing takes)."""
    return (message.role == "assistant" and not isinstance(message.content, str)
            and any(isinstance(p, ThinkingPart) for p in message.content))


def _turn_starts(messages: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if opens_turn(m)]


def in_tool_loop(messages: Iterable[Message]) -> bool | None:
    """Whether the conversation ends in a tool loop, read from its end (``messages`` in reverse order).

    None when ``messages`` hold no tool result, assistant or user message (only system prompts): the answer is in
    what comes before them.
    """
    for m in messages:
        if m.role == "tool":
            return True
        if m.role == "assistant":
            return bool(m.tool_calls)
        if m.role == "user":
            return False
    return None


def _in_tool_loop(messages: Sequence[Message]) -> bool:
    return bool(in_tool_loop(reversed(messages)))


def reasoning_turns(messages: Sequence[Message], keep_turns: int) -> int:
    """Index from which reasoning is kept: the start of the last ``keep_turns`` turns, and always the turn in a loop."""
    starts = _turn_starts(messages)
    keep = keep_turns
    if _in_tool_loop(messages):
        keep = max(keep, 1)
    if keep <= 0:
        return len(messages)
    if len(starts) < keep:
        return 0
    return starts[-keep]


def without_reasoning(message: Message) -> Message:
    """``message`` (an assistant message holding reasoning) as clearing leaves it (see the module)."""
    cleared = _without_reasoning(message)
    if not cleared.content and not cleared.tool_calls:
        cleared = replace(cleared, content="")
    return cleared


def _without_reasoning(message: Message) -> Message:
    assert not isinstance(message.content, str)
    parts = tuple(p for p in message.content if not isinstance(p, ThinkingPart))
    responses = any(isinstance(p, ThinkingPart) and origin(p) == "openai_responses" for p in message.content)
    extra, calls = message.extra, message.tool_calls
    if responses:
        extra = freeze({k: v for k, v in extra.items() if k not in _LINK_KEYS})
        calls = tuple(replace(c, extra=_unlinked(c)) for c in calls)
    return replace(message, content=parts, extra=extra, tool_calls=calls)


def _unlinked(call: ToolCall) -> Mapping[str, Any]:
    return freeze({k: v for k, v in call.extra.items() if k not in _CALL_LINK_KEYS})


def clear_old_reasoning(messages: Sequence[Message], keep_turns: int) -> ClearedReasoning:
    """``messages`` with the reasoning of turns older than the last ``keep_turns`` removed (see the module).

    A message left with neither content nor calls keeps an empty text (a Responses turn that was all reasoning and
    calls keeps its calls); nothing else changes, and a view with nothing to clear comes back as it is.
    """
    since = reasoning_turns(messages, keep_turns)
    out = list(messages)
    touched: list[int] = []
    parts = 0
    for i in range(since):
        m = messages[i]
        if m.role != "assistant" or isinstance(m.content, str):
            continue
        found = sum(1 for p in m.content if isinstance(p, ThinkingPart))
        if not found:
            continue
        out[i] = without_reasoning(m)
        touched.append(i)
        parts += found
    return ClearedReasoning(out, parts, tuple(touched))
