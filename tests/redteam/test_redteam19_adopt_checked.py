"""``adopt()`` checks the messages it takes as ``add()`` does, before anything changes; call ids are strings.

Found by the fifteenth session's red team (lane E), confirmed by the nineteenth: ``adopt()`` put a caller's stored
messages in the view unchecked, leaving the check to a compaction. A message with an unknown role was dropped from
the view without a word (the history the provider read was not the one adopted) and a call whose arguments are not
JSON went to the provider as it was. Separately, ``check_messages`` took a ``tool_call_id`` or ``ToolCall.id``
given as an int (a Message built in code; the format decoders take strings only), and the int went to the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextfold.errors import InvalidHistory
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

NONCE = "rt19-adopt-5c1e"


def _call(call_id: Any = "c1", arguments: str = "{}") -> list[Message]:
    return [Message.user(f"run it {NONCE}"), Message.assistant("", [ToolCall(call_id, "bash", arguments)]),
            Message.tool("c1", f"done {NONCE}")]


BAD: dict[str, tuple[Callable[[], list[Message]], int, str]] = {
    "unknown role": (lambda: [Message.user(f"hi {NONCE}"), Message("wizard", f"abracadabra {NONCE}")], 1, "role"),
    "arguments not JSON": (lambda: _call(arguments="{nope"), 1, "tool_calls[0].arguments"),
    "arguments not an object": (lambda: _call(arguments="[1]"), 1, "tool_calls[0].arguments"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_adopt_refuses_what_add_refuses_and_adopts_nothing(case: str) -> None:
    # Fails on f63f2d6: adopt() took each of these; the role's message vanished from prepare(), the arguments were sent.
    build, index, field = BAD[case]
    with pytest.raises(InvalidHistory) as caught:
        ContextManager(model="gpt-4o").add(build())
    cm = ContextManager(model="gpt-4o", session_id=f"{NONCE}-{len(case)}")
    with pytest.raises(InvalidHistory) as adopted:
        cm.adopt(build())
    assert (adopted.value.index, adopted.value.field) == (caught.value.index, caught.value.field) == (index, field)
    assert cm.messages() == []
    cm.add(Message.user(f"fresh start {NONCE}"))  # (nothing was adopted: the manager is still fresh)
    assert [m["content"] for m in cm.prepare()] == [f"fresh start {NONCE}"]


def test_adopt_refuses_a_dict_naming_its_index() -> None:
    cm = ContextManager(model="gpt-4o")
    with pytest.raises(InvalidHistory, match="expected a Message, got dict") as caught:
        cm.adopt([Message.user(NONCE), {"role": "user", "content": NONCE}])  # type: ignore[list-item]
    assert caught.value.index == 1
    assert cm.messages() == []


def test_adopted_messages_are_marked_checked_and_sent_as_adopted() -> None:
    stored = _call()
    cm = ContextManager(model="gpt-4o")
    cm.adopt(stored)
    assert cm._view.checked  # (planning need not check the view again: adopt did, as add() does)
    assert [m["role"] for m in cm.prepare()] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("where", ["call", "result"])
def test_a_call_id_that_is_not_a_string_is_refused_naming_the_field(where: str) -> None:
    # Fails on f63f2d6: ids 7 were accepted and prepare() sent {"id": 7} and {"tool_call_id": 7}.
    call_id: Any = 7 if where == "call" else "c1"
    messages = [Message.user(NONCE), Message.assistant("", [ToolCall(call_id, "bash", "{}")]),
                Message("tool", f"ok {NONCE}", tool_call_id=7 if where == "result" else "c1")]
    cm = ContextManager(model="gpt-4o")
    with pytest.raises(InvalidHistory, match="must be a string, got int") as caught:
        cm.add(messages)
    assert (caught.value.index, caught.value.field) == ((1, "tool_calls[0].id") if where == "call"
                                                        else (2, "tool_call_id"))
    with pytest.raises(InvalidHistory):
        ContextManager(model="gpt-4o").adopt(messages)
