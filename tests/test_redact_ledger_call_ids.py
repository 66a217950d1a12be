"""Ledger keys of assistant messages making the same call under different ids do not collide (issue 22).

``SameMessage`` hashed a tool call's arguments but not its id; messages that differ only there (an agent running
``ls`` 1,500 times) all shared one hash while comparing unequal, so a dict of them compared each with all before it:
a 3,000-message compaction made 4.2M comparisons (~2 s CPU).
"""

from __future__ import annotations

import pytest

from contextfold.messages import Message, ToolCall
from contextfold.redact import _ledger


def test_the_same_call_under_distinct_ids_gets_distinct_keys_without_pairwise_comparisons(
        monkeypatch: pytest.MonkeyPatch) -> None:
    compared = 0
    same_but_id = _ledger._same_but_id

    def counting(a: Message, b: Message) -> bool:
        nonlocal compared
        compared += 1
        return same_but_id(a, b)

    monkeypatch.setattr(_ledger, "_same_but_id", counting)
    calls = [Message.assistant("", tool_calls=(ToolCall(f"call_ledger7f3_{i}", "bash", '{"cmd": "ls"}'),))
             for i in range(1_500)]
    keys = {_ledger.SameMessage(m): i for i, m in enumerate(calls)}
    assert len(keys) == 1_500
    assert compared < 50  # (hash collisions only: 1,124,250 comparisons before)
    again = Message.assistant("", tool_calls=(ToolCall("call_ledger7f3_7", "bash", '{"cmd": "ls"}'),))
    assert keys[_ledger.SameMessage(again)] == 7
