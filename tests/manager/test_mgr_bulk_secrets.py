"""A bulk add learns the secrets of every message it adds (issue 22: cold compaction).

An add() of more than 3,000 messages (a resumed or imported history) reads only the two ends of it for the summary
(all a compaction reads), but the archive redacts all of it: the secrets of the middle were learned by the first
compaction, a third of its time. They are learned by the add now, and nothing is left for the compaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

PASSWORD = "Qz7!pK2mVx9wLr4T"  # found only by its context (`password: ...`)


def _history(steps: int) -> list[Message]:
    history = [Message("system", "You are a coding agent.")]
    for i in range(steps):
        body = f"file {i}: " + " ".join(f"word{j}" for j in range(8))
        if i == steps // 2:
            body += f"\ndb:\n  password: {PASSWORD}\n"  # in the middle: not among the ends read for the summary
        if i == steps - 1:
            body += f"\nconnecting with {PASSWORD}\n"  # bare: only the memory knows it
        call = ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"cat f{i}"}))
        history += [Message.user(f"step {i}"), Message("assistant", "", tool_calls=(call,)),
                    Message.tool(f"c{i}", body, name="bash")]
    return history


def test_a_bulk_add_learns_the_secrets_of_its_middle_and_the_compaction_learns_nothing() -> None:
    cm = ContextManager(model="gpt-4o", max_context_tokens=60_000, store="memory", archive="memory",
                        session_id="bulk", policy={"auto": False, "tool_output_budget_tokens": 1_000_000})
    cm.add(_history(1_001))  # 3,004 messages, past half the soft threshold
    redactor = cm.redactor
    assert redactor is not None
    assert PASSWORD in redactor.memory.table  # learned by add(), before any compaction
    learned = redactor.memory.generation
    calls: list[int] = []
    learn_from = redactor.learn_from

    def counting(messages: Iterable[Message]) -> None:
        items = list(messages)
        calls.append(sum(1 for m in items if not redactor._ledger.recorded(m)))
        learn_from(items)

    redactor.learn_from = counting
    report = cm.compact()
    assert report.compacted > 0
    assert redactor.memory.generation == learned and all(n == 0 for n in calls)  # (nothing left to read)
    archive = cm.archive
    assert archive is not None
    texts = [m.text for m in archive.transcript("bulk", 1)]
    assert len(texts) == 3_004 and "password: [REDACTED:password]" in texts[1_503]
    assert not any(PASSWORD in text for text in texts)
