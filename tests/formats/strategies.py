"""Hypothesis strategies for message histories, shared by the property tests of several modules.

Import as ``from strategies import histories`` from tests/formats, or ``from tests.formats.strategies import``
(or ``formats.strategies``) from elsewhere, depending on whether ``tests/`` is a package.

``histories()`` draws valid conversations: an optional system (and developer) prompt, then user turns, each
answered by assistant steps that may carry thinking and one or more tool calls, every call answered right after
by a tool message, call ids unique. Texts are never blank, so every provider accepts them.
``broken_histories()`` draws the same and then breaks pair integrity in one of the ways agents do.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from contextfold.messages import Message, TextPart, ThinkingPart, ToolCall

__all__ = ["DEFECTS", "broken_histories", "histories", "json_arguments", "texts"]

# Printable text with some non-ASCII, never blank (Anthropic rejects blank text blocks).
texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\u2028\u2029"),
    min_size=1,
    max_size=30,
).filter(lambda s: bool(s.strip()))

_json_leaf = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=10)
_json_value = st.recursive(
    _json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
# Arguments as Anthropic and Gemini re-serialise them (json.dumps defaults), so every format keeps the string.
json_arguments = st.dictionaries(st.text(min_size=1, max_size=8), _json_value, max_size=3).map(
    lambda d: json.dumps(d, ensure_ascii=False)
)
_tool_names = st.sampled_from(["bash", "read_file", "search", "get_user_details", "edit"])


@st.composite
def _assistant_step(draw: Any, counter: list[int], *, thinking: bool) -> list[Message]:
    n_calls = draw(st.integers(0, 3))
    calls = []
    for _ in range(n_calls):
        counter[0] += 1
        calls.append(ToolCall(f"call_{counter[0]}", draw(_tool_names), draw(json_arguments)))
    text = draw(texts) if not n_calls or draw(st.booleans()) else ""
    content: str | tuple[Any, ...] = text
    if thinking and draw(st.booleans()):
        reasoning = ThinkingPart(draw(texts), signature=draw(st.text("abcdef0123456789", min_size=8, max_size=16)))
        content = (reasoning, TextPart(text)) if text else (reasoning,)
    out = [Message("assistant", content, tuple(calls))]
    for call in calls:
        output = draw(texts | st.just(""))
        name = call.name if draw(st.booleans()) else None
        out.append(Message("tool", output, tool_call_id=call.id, name=name))
    return out


@st.composite
def _user(draw: Any) -> Message:
    if draw(st.integers(0, 4)) == 0:
        return Message("user", tuple(TextPart(t) for t in draw(st.lists(texts, min_size=1, max_size=3))))
    return Message("user", draw(texts))


@st.composite
def histories(
    draw: Any, *, min_turns: int = 1, max_turns: int = 4, thinking: bool = True, developer: bool = True
) -> list[Message]:
    """A valid conversation: every tool call answered right after it, unique call ids, no blank text."""
    out: list[Message] = []
    if draw(st.booleans()):
        out.append(Message("system", draw(texts)))
    if developer and draw(st.integers(0, 3)) == 0:
        out.append(Message("developer", draw(texts)))
    counter = [0]
    for _ in range(draw(st.integers(min_turns, max_turns))):
        out.append(draw(_user()))
        for _ in range(draw(st.integers(1, 3))):
            out.extend(draw(_assistant_step(counter, thinking=thinking)))
        # Most real turns end with the assistant speaking; some end right after a tool result.
        if out[-1].role == "tool" and draw(st.booleans()):
            out.append(Message("assistant", draw(texts)))
    return out


DEFECTS = ("missing_output", "orphan_output", "displaced_output", "dropped_call_message", "duplicate_output")


@st.composite
def broken_histories(draw: Any, *, defects: tuple[str, ...] = DEFECTS) -> list[Message]:
    """A history from :func:`histories` with pair integrity broken once (or left whole when no call was drawn)."""
    history = draw(histories(min_turns=2, max_turns=4, thinking=True))
    tools = [i for i, m in enumerate(history) if m.role == "tool"]
    callers = [i for i, m in enumerate(history) if m.tool_calls]
    if not tools:
        return history
    defect = draw(st.sampled_from(defects))
    i = draw(st.sampled_from(tools))
    if defect == "missing_output":
        return history[:i] + history[i + 1 :]
    if defect == "orphan_output":
        j = draw(st.sampled_from(callers))
        return [*history[:j], replace(history[j], tool_calls=()), *history[j + 1 :]]
    if defect == "dropped_call_message":
        j = draw(st.sampled_from(callers))
        return history[:j] + history[j + 1 :]
    if defect == "duplicate_output":
        return [*history[: i + 1], history[i], *history[i + 1 :]]
    # displaced_output: the result arrives after a later user message (or at the very end)
    moved = history[i]
    rest = history[:i] + history[i + 1 :]
    later_users = [k for k in range(i, len(rest)) if rest[k].role == "user"]
    at = later_users[0] + 1 if later_users else len(rest)
    return [*rest[:at], moved, *rest[at:]]
