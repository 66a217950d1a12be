"""A message whose content tuple holds something that is no part is refused by ``add()``, and the view stays whole.

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
from contextfold.messages import Message, TextPart
from contextfold.pairing import check_messages

NONCE = "rt17-parts-c4e1"


@pytest.mark.parametrize("content", [({"type": "text", "text": "x"},), ("a string in a tuple",), (TextPart("ok"), 5)])
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
