"""A prepare() that compacts reads ahead after the compaction, and only what the view still holds (issue 22).

The read-ahead of a turn (the new messages read as the coming maskings will) was submitted before the policy
acted: when a compaction was due, the background thread read the messages the compaction was taking away (they
are never masked), and it took the GIL whenever the compaction's C calls let it go. The first prepare() after
add() of 100,000 recorded messages spent ~0.5 s of CPU on it, and the compaction itself ran slower.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from contextfold import _background
from contextfold.manager import ContextManager, _compactor
from contextfold.messages import Message, ToolCall


def _history(nonce: str, steps: int) -> list[Message]:
    out = [Message.system("You are a coding agent.")]
    for i in range(steps):
        body = "\n".join(f"/srv/{nonce}/module_{i}.py:{n}: KeyError in load_{n}() took {n} ms" for n in range(30))
        out.append(Message.user(f"step {i}: look at module_{i}.py ({nonce})"))
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"cat module_{i}.py"})),)))
        out.append(Message("tool", body, tool_call_id=f"c{i}", name="bash"))
    return out


def _read_ahead(monkeypatch: pytest.MonkeyPatch, cm: ContextManager) -> list[tuple[int, list[Message]]]:
    """(compactions done when submitted, the messages read) for each read-ahead of the new messages."""
    read: list[tuple[int, list[Message]]] = []
    submit = _background.submit
    warm = _compactor.warm_for_compaction

    def noted(job: Callable[..., Any], *args: Any) -> bool:
        for part, part_args in args[0] if args else ():
            if part is warm:
                read.append((cm._compactions, list(part_args[0])))
        return submit(job, *args)

    monkeypatch.setattr(_background, "submit", noted)
    return read


def test_a_compacting_prepare_reads_ahead_after_it_only_what_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                        session_id=f"ahead-{nonce}", message_id_prefix="a")
    read = _read_ahead(monkeypatch, cm)
    cm.add(_history(nonce, 40))
    assert cm.tokens() > cm.budgets.hard
    cm.prepare()
    _background.wait_idle()
    assert cm._compactions == 1
    assert [done for done, _ in read] == [1]  # (submitted once the compaction was applied: before it on 8db957b)
    in_view = {m.meta.get("id") for m in cm.messages()}
    assert read[0][1] and all(m.meta["id"] in in_view for m in read[0][1])
    cm.close()


def test_a_prepare_that_does_not_compact_reads_ahead_every_new_message(monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory",
                        session_id=f"ahead-{nonce}", message_id_prefix="b")
    read = _read_ahead(monkeypatch, cm)
    history = _history(nonce, 8)
    cm.add(history)
    assert cm.budgets.soft // 2 < cm.tokens() < cm.budgets.soft
    cm.prepare()
    _background.wait_idle()
    assert cm._compactions == 0
    assert [(done, len(messages)) for done, messages in read] == [(0, len(history))]
    cm.close()
