"""A message whose content tuple holds something that is no part is refused by ``add()``, and the view stays whole.

So is one whose name, a part's text field or a call's name is no string, or whose part's or call's ``extra`` is no
mapping (each failed every later call the same way: a ``name=5`` failed ``add()`` half way, with the message in the
view; an ``ImagePart(url=5)`` or a ``TextPart(extra=[...])`` at every ``prepare()``).

Found by the seventeenth red team (pre-existing): ``check_messages`` checked that content is a string or a tuple,
not what the tuple holds. ``Message("user", ({"type": "text", "text": "x"},))`` (a provider's block where a
``TextPart`` belongs) passed, was put in the view, and ``add()`` failed only after that, counting it
(``AttributeError``); every later ``prepare()``, ``messages()`` and ``close()`` failed on it: the history was lost to
the manager. It is refused as a malformed message is (``InvalidHistory``, naming the part), before anything changes.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextfold.errors import InvalidHistory
from contextfold.manager import ContextManager
from contextfold.messages import ImagePart, Message, TextPart, ToolCall, UnknownPart
from contextfold.pairing import check_messages

NONCE = "rt17-parts-c4e1"


@pytest.mark.parametrize("content", [({"type": "text", "text": "x"},), ("a string in a tuple",), (TextPart("ok"), 5),
                                     (TextPart("ok"), UnknownPart("not a mapping"))])
def test_a_content_tuple_of_no_parts_is_refused_and_the_view_kept(content: tuple[Any, ...]) -> None:
    cm = ContextManager(model="gpt-4o", session_id=NONCE, max_context_tokens=4_000)
    cm.add([Message.user(f"first {NONCE}"), Message.assistant("answer")])
    with pytest.raises(InvalidHistory) as raised:
        cm.add([Message.user("fine"), Message("user", content)])
    assert raised.value.index == 3
    assert [m.text for m in cm.messages()] == [f"first {NONCE}", "answer"]
    cm.add(Message.user("next"))
    assert [m["content"] for m in cm.prepare()] == [f"first {NONCE}", "answer", "next"]
    cm.close()


def test_parts_pass_the_check() -> None:
    m = Message("user", (TextPart("a"), TextPart("b")))
    assert check_messages([m]) == [m]


_WRONG_TYPES: dict[str, list[Message]] = {
    "name": [Message("user", "x", name=5)],  # type: ignore[arg-type]
    "call name": [Message.assistant("", [ToolCall("c1", 3, "{}")]), Message.tool("c1", "r")],  # type: ignore[arg-type]
    "image url": [Message("user", (ImagePart(url=5),))],  # type: ignore[arg-type]
    "text": [Message("user", (TextPart(None),))],  # type: ignore[arg-type]
    "part extra": [Message("user", (TextPart("a", extra=["x"]),))],  # type: ignore[arg-type]
    "call extra": [Message.assistant("", [ToolCall("c1", "f", "{}", extra=["x"])]),  # type: ignore[arg-type]
                   Message.tool("c1", "r")],
}


@pytest.mark.parametrize("case", sorted(_WRONG_TYPES))
def test_a_field_of_the_wrong_type_is_refused_and_the_manager_goes_on(case: str) -> None:
    cm = ContextManager(model="gpt-4o", session_id=f"{NONCE}-{case}", archive="memory", max_context_tokens=4_000)
    cm.add([Message.user(f"first {NONCE}"), Message.assistant("answer")])
    with pytest.raises(InvalidHistory):
        cm.add(_WRONG_TYPES[case])
    for i in range(12):  # (past a compaction, which reads and writes every message)
        cm.add([Message.user(f"question {i} " + "word " * 300), Message.assistant("answer")])
        cm.prepare()
    assert cm.compactions >= 1
    cm.close()
