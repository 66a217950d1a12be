"""Planning a compaction does not check a manager's view again when add() checked every message (issue 22).

The first ``prepare()`` of 100,000 recorded messages checked them all once more (~40 ms). ``adopt()`` checks a
caller's messages as ``add()`` does (red team 19), and ``rewrite_view()`` checks its own.
"""

from __future__ import annotations

import pytest

from contextfold.compaction import _compact
from contextfold.errors import InvalidHistory
from contextfold.manager import ContextManager
from contextfold.messages import Message


def _history(nonce: str) -> list[Message]:
    out: list[Message] = []
    for i in range(30):
        out.append(Message(role="user", content=f"{nonce} question {i} " + "word " * 40))
        out.append(Message(role="assistant", content=f"{nonce} answer {i} " + "text " * 40))
    return out


def _checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = _compact.check_messages

    def counted(messages: object, **options: object) -> list[Message]:
        found = real(messages, **options)  # type: ignore[arg-type]
        sizes.append(len(found))
        return found

    monkeypatch.setattr(_compact, "check_messages", counted)
    return sizes


def test_a_view_of_added_messages_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory", session_id="nonce-c41d")
    cm.add(_history("nonce-c41d"))
    sizes = _checks(monkeypatch)
    report = cm.compact()
    assert report.compacted > 0
    assert not [n for n in sizes if n >= 40]  # (the summary's few messages may be; not the view's 60)


def test_adopted_messages_are_checked_by_adopt_not_again_by_planning(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory", session_id="nonce-9b2e")
    cm.adopt(_history("nonce-9b2e"))
    sizes = _checks(monkeypatch)
    cm.compact()
    assert not [n for n in sizes if n >= 40]


def test_an_adopted_malformed_message_is_refused_by_adopt() -> None:
    cm = ContextManager("gpt-4o", store="memory", archive="memory", session_id="nonce-5a07")
    bad = Message(role="user", content="nonce-5a07 x")
    object.__setattr__(bad, "role", "robot")
    with pytest.raises(InvalidHistory):
        cm.adopt([*_history("nonce-5a07"), bad])
    assert cm.messages() == []
