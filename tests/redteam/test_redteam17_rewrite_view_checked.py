"""A rewrite of the view that returns something no history can hold is refused, and the view stays as it was.

Found by the seventeenth red team (pre-existing; the view's ``checked`` flag of the fourteenth session only records
that such messages were not checked): ``ContextManager.rewrite_view`` archived the view, put whatever the rewrite
returned in its place, and failed only then, half way through the view's own bookkeeping. A rewrite returning a dict
among the messages (a caller's slip, an adapter's ``pop_item`` given a provider item) left a view that every later
call failed on (``'dict' object has no attribute 'role'``): ``prepare()``, ``messages()``, ``close()``; the agent's
history was gone from the manager. A rewrite is checked as ``add()`` checks what it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextfold.errors import InvalidHistory
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

NONCE = "rt17-rewrite-8d2f"

_BAD: dict[str, Callable[[list[Any]], list[Any]]] = {
    "dict": lambda view: [*view, {"role": "user", "content": "x"}],
    "role": lambda view: [*view, Message("robot", "x")],  # type: ignore[arg-type]
    "arguments": lambda view: [*view, Message.assistant("", [ToolCall("c9", "f", "{not json")])],
    "result without id": lambda view: [*view, Message("tool", "x")],
}


@pytest.mark.parametrize("bad", sorted(_BAD))
def test_a_bad_rewrite_is_refused_and_the_view_kept(bad: str) -> None:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=f"{NONCE}-{bad}")
    cm.add([Message.user(f"What failed? {NONCE}"), Message.assistant("The build.")])
    before = cm.prepare()
    with pytest.raises(InvalidHistory):
        cm.rewrite_view(_BAD[bad], reason="test")
    assert cm.prepare() == before
    cm.add(Message.user("next"))
    assert [m["content"] for m in cm.prepare()] == [f"What failed? {NONCE}", "The build.", "next"]
    assert cm.rewrite_view(lambda view: view[1:], reason="test") == 1
    texts = [m.text for m in cm.messages()]
    assert texts[-2:] == ["The build.", "next"]
    assert not [t for t in texts if NONCE in t]
    cm.close()
