"""A masking turn swaps in the masked messages the read-ahead built, counted and encoded (issue 22).

The read-ahead builds each output's masked message with its placeholder (``cache.masking.placeholder_ahead``), then
counts it and encodes it alone in the view's formats (``View.encode_ahead``): the masking turn that takes the output
stores it and puts the message in place, and neither counts nor encodes it. What ``prepare()`` returns must be the
view encoded from scratch, turn after turn.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextfold import _background
from contextfold.formats import get_format, openai_chat
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import RecordingTelemetry
from contextfold.tokens import MessageCounter

NONCE = "mask-ahead-7e2b41"


def run_tests(i: int) -> list[Message]:
    call = ToolCall(f"c{i}", "bash", json.dumps({"command": f"pytest tests/test_{i}.py"}))
    body = "".join(f"tests/test_{i}.py::test_{n}_{NONCE} FAILED in {n * i} ms: KeyError('k{n}')\n" for n in range(90))
    return [Message.assistant(f"run batch {i}", (call,)), Message.tool(call.id, body)]


def test_a_masking_turn_neither_counts_nor_encodes_what_the_read_ahead_built(monkeypatch: pytest.MonkeyPatch) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory", session_id=NONCE,
                        policy={"clear_at_least": 3_000, "keep_tool_io_pairs": 1, "cache_aware": False,
                                "tool_output_budget_tokens": 5_800}, telemetry=RecordingTelemetry())
    cm.counter.wait_exact()
    encoded: list[Message] = []
    counted: list[Message] = []
    real_encode, real_count = openai_chat.encode_message, MessageCounter._count_uncached

    def watched_encode(message: Message, *ids: Any) -> Any:  # (ids: the history's wire ids of its calls)
        encoded.append(message)
        return real_encode(message, *ids)

    def watched_count(self: MessageCounter, message: Message) -> int:
        counted.append(message)
        return real_count(self, message)

    monkeypatch.setattr(openai_chat, "encode_message", watched_encode)
    monkeypatch.setattr(MessageCounter, "_count_uncached", watched_count)
    cm.add([Message.system("agent"), Message.user(f"make the tests pass {NONCE}")])
    masking_turns = 0
    for i in range(16):
        cm.add(run_tests(i))
        maskings = cm.maskings
        encoded.clear()
        counted.clear()
        sent = cm.prepare()
        if cm.maskings > maskings:
            masking_turns += 1
            assert [m for m in encoded if m.kind == "masked"] == []
            assert [m for m in counted if m.kind == "masked"] == []
        assert sent == get_format("openai_chat").encode(cm._view.normalized())
        _background.wait_idle()
    cm.close()
    assert masking_turns >= 2
