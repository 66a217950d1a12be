"""A decision made on counts the tokenizer's arrival interrupted: only exact counts may decide to act."""

from __future__ import annotations

from typing import Any

import pytest
from _held_tokenizer import HeldTokenizer

from contextfold import ContextManager
from contextfold.compaction import Action
from contextfold.messages import Message
from contextfold.tokens import MessageCounter


def test_a_view_counted_in_bytes_as_the_tokenizer_arrives_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = HeldTokenizer()
    cm = ContextManager("gpt-4o", max_context_tokens=40_000, store="memory", archive=False, session_id="arrives",
                        counter=MessageCounter(tokenizer, lazy=True), policy={"emergency_message_count": 100_000})
    words = "word " * 200  # (about 1,000 bytes and 200 tokens a message: 60 of them pass the hard threshold in bytes)
    cm.add([Message.system("system")] + [Message.user(f"q{n} {words}") if n % 2 == 0 else
                                         Message.assistant(f"a{n} {words}") for n in range(60)])
    view = cm._view
    count_view, plan = view.totals, cm._plan
    planning = [False]
    actions: list[Action] = []

    def counted_as_the_tokenizer_arrives() -> tuple[int, int, int]:
        totals = count_view()  # (byte bounds: the tokenizer has not arrived) ...
        if planning[0] and not tokenizer.arrived:
            tokenizer.arrive()  # ... and it arrives just after (its load finishing on its own thread)
            assert not cm.counter.provisional
        return totals

    def planned() -> tuple[Any, ...]:  # (the arrival placed in the decision's own count, not an earlier one)
        planning[0] = True
        decided = plan()
        actions.append(decided[0].action)
        return decided

    monkeypatch.setattr(view, "totals", counted_as_the_tokenizer_arrives)
    monkeypatch.setattr(cm, "_plan", planned)
    bounds, _, _ = count_view()
    assert bounds > cm.budgets.hard
    cm.prepare()
    # The bounds said "act"; counted exactly, the view is far below the soft threshold: every decision (the one
    # counted as the tokenizer arrived included) is to do nothing. (It said "hard" on the bounds; the compaction
    # runner's own check then did nothing, but the decision was made on bounds.)
    assert actions and set(actions) == {Action.NONE}
    assert cm.last_plan is not None and cm.last_plan.action is Action.NONE
    assert count_view()[0] < cm.budgets.soft
