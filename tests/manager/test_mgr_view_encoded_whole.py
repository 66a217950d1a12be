"""View.encoded for Anthropic equals encoding the whole view when a call id comes back in a later turn.

Anthropic names a call reusing an earlier call's id after the calls before it (``<id>_2``): a piece of the view
encoded alone cannot know them, so the settled prefix's pieces would send the id twice.
"""

from __future__ import annotations

import json

from contextfold.formats import get_format
from contextfold.manager._view import View
from contextfold.messages import Message, ToolCall
from contextfold.tokens import EstimatingCounter, MessageCounter


def turn(number: int) -> list[Message]:
    return [Message("assistant", "", (ToolCall("a", "bash", json.dumps({"n": number})),)),
            Message("tool", str(number), tool_call_id="a")]


def test_anthropic_pieces_equal_the_whole_with_an_id_used_again() -> None:
    wire = get_format("anthropic")
    view = View(MessageCounter(EstimatingCounter()))
    view.append([Message("user", "go"), *turn(0)])
    view.encoded(wire)  # settles a prefix between the turns
    view.append([*turn(1), Message("assistant", "done"), Message("user", "more")])
    view.encoded(wire)
    view.append(turn(2))
    encoded = view.encoded(wire)
    assert encoded == wire.encode(view.normalized())
    assert [b["id"] for item in encoded if item["role"] == "assistant" and isinstance(item["content"], list)
            for b in item["content"] if b["type"] == "tool_use"] == ["a", "a_2", "a_3"]
