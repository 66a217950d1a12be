"""The read-ahead redacts only what add() did not (issue 22: it looked every message up again, ~40 ms of CPU per 1M
tokens in the lm32b loop). Past half the soft threshold add() redacts what it adds; the messages added before are
redacted on the background thread, and a compaction after it archives and summarizes no secret."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from contextfold import _background
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor

_NONCE = "r4nd0m-b7c2"
_SECRET = "sk-proj-" + "Xy7dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eG"


def _steps(first: int, count: int) -> list[Message]:
    out = []
    for i in range(first, first + count):
        body = "\n".join(f"/testbed/{_NONCE}/module_{i}.py:{n}: ValueError in parse_{n}()" for n in range(30))
        if i == 3:
            body += f"\nOPENAI_API_KEY={_SECRET}\n"
        out.append(Message.user(f"step {i}: look at module_{i}.py"))
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"cat module_{i}.py"})),)))
        out.append(Message("tool", body, tool_call_id=f"c{i}", name="bash"))
    return out


def test_the_read_ahead_redacts_only_the_messages_added_before_add_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    ahead: list[str] = []
    plain = Redactor.redact_ahead

    def recording(self: Redactor, messages: list[Message], *, paced: bool = True) -> int:
        messages = list(messages)
        if paced:
            ahead.extend(str(m.meta.get("id")) for m in messages)
        return plain(self, messages, paced=paced)

    monkeypatch.setattr(Redactor, "redact_ahead", recording)
    cm = ContextManager(model="gpt-4o", max_context_tokens=40_000, store="memory", archive="memory",
                        session_id="once", message_id_prefix="o", clock=lambda: datetime(2025, 1, 1, tzinfo=UTC),
                        policy={"auto": False, "tool_output_budget_tokens": 1_000_000})
    cm.counter.wait_exact()  # (an estimate counts more: add() would read these already)
    cm.add(_steps(0, 4))
    assert not cm._intake.reading
    early = {str(m.meta["id"]) for m in cm.messages()}
    cm.add(_steps(4, 10))  # past half the soft threshold: add() redacts these itself
    assert cm._intake.reading
    cm.prepare()
    _background.wait_idle()
    assert set(ahead) == early
    cm.compact()
    archived = "".join(m.text for _, messages in cm.archive.transcripts("once") for m in messages)
    assert _SECRET not in archived and "[REDACTED:openai_key]" in archived
