"""A call that answers no output cut at write time works out nothing of the widening (issue 22).

Its limit, the cache economics' say and the room were worked out on every ``prepare()`` before the tail was read for
an output to widen (~7 us of a no-op call's ~100). Now only a call answering a cut output weighs them; that one
still widens it.
"""

from __future__ import annotations

import json

import pytest

from contextfold.manager import ContextManager
from contextfold.manager._answered_view import WIDENED_META, AnsweredWidening
from contextfold.messages import Message, ToolCall

NONCE = "widen-skipped-83f0a2"


def turn(i: int, lines: int) -> list[Message]:
    call = ToolCall(f"c{i}", "bash", json.dumps({"command": f"cat src/mod_{i}.py"}))
    body = "".join(f"line {n} of mod_{i} {NONCE}: value_{n} = {n * i}\n" for n in range(lines))
    return [Message.assistant(f"read module {i}", (call,)), Message.tool(call.id, body)]


def test_only_a_call_answering_a_cut_output_weighs_the_widening(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=200_000, store="memory", archive="memory", session_id=NONCE)
    cm.counter.wait_exact()
    weighed: list[int] = []
    real_limit = AnsweredWidening.limit

    def watched_limit(self: AnsweredWidening, configured: int | None, window: int) -> int:
        weighed.append(window)
        return real_limit(self, configured, window)

    monkeypatch.setattr(AnsweredWidening, "limit", watched_limit)
    cm.add([Message.system("agent"), Message.user(f"read the modules {NONCE}")])
    for i in range(4):
        cm.add(turn(i, lines=5))  # whole outputs: nothing to widen
        cm.prepare()
    assert weighed == []
    cm.add(turn(9, lines=4_000))  # cut at write time, and answered by the coming call
    assert cm._view.raw[-1].kind == "truncated"
    cm.prepare()
    assert len(weighed) == 1
    assert cm._view.raw[-1].meta.get(WIDENED_META)
    cm.close()
