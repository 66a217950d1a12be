"""The manager tells messages apart by identity: a session's turns never compare two messages by value.

``Message`` is a frozen dataclass: ``==``, ``in``, ``list.index`` and ``list.remove`` compare every field (its text
included) of each element, and take an equal but distinct message (a repeated tool output, a copy) for the one
meant. The closing note of the thirteenth session named ``None in messages`` as one such comparison (tried in a
branch, never merged); none is in the turn's path (a guard: the count is what grows with the history).
"""

from __future__ import annotations

import pytest

from contextfold import ContextManager
from contextfold.messages import Message, ToolCall

NONCE = "r14id"
OUTPUT = "\n".join(f"{n:4d}  value_{n} = compute_{NONCE}({n})" for n in range(1, 120))


def test_a_session_with_maskings_and_compactions_compares_no_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    compared = [0]
    by_value = Message.__eq__

    def counted(self: Message, other: object) -> bool:
        compared[0] += 1
        return by_value(self, other)

    monkeypatch.setattr(Message, "__eq__", counted)
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory",
                        session_id=f"{NONCE}-session")
    cm.add([Message.system("You are a coding agent."), Message.user(f"compute every value {NONCE}")])
    for n in range(30):
        cm.prepare()
        # (the same output every turn: equal messages but for their ids and calls)
        cm.add([Message.assistant(f"step {n}", [ToolCall(f"c{n}", "compute", f'{{"n": {n}}}')]),
                Message.tool(f"c{n}", OUTPUT)])
        cm.record_usage({"prompt_tokens": 1_000 + 50 * n, "completion_tokens": 20})
    cm.prepare()
    assert cm.compactions >= 1 or cm.status().maskings >= 1
    assert compared[0] == 0
