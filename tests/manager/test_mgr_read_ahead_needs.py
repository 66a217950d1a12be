"""The read-ahead reads what masking turns need, not what only a compaction needs (issue 22, ninth session).

Past half the soft threshold, ``prepare()`` hands the messages added before to the background thread: it learns their
secrets (a masking must know them all before it writes a digest) and builds the digests of the outputs a masking
will take. Reading those messages for a summary and serializing their transcript lines served only a compaction,
which reads them itself (cold compaction has its own bar); in the lm32b loop 6 turns of 1,390 compact.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from contextfold import _background, serialize
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.summarize.digest import is_read

_SECRET = "sk-proj-" + "Qw3rT6yU9iO2pA5sD8fG1hJ4kL7zX0cV"


def _history(nonce: str, steps: int) -> list[Message]:
    out = [Message("system", f"You are a coding agent ({nonce}).")]
    for i in range(steps):
        body = "\n".join(f"/srv/{nonce}/module_{i}.py:{n}: KeyError in load_{n}() took {n} ms" for n in range(30))
        if i == 2:
            body += f"\nOPENAI_API_KEY={_SECRET}\n"
        out.append(Message.user(f"{nonce} step {i}: look at module_{i}.py"))
        call = ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"cat {nonce}/module_{i}.py"}))
        out.append(Message("assistant", "", (call,)))
        out.append(Message("tool", body, tool_call_id=f"c{i}", name="bash"))
    return out


def test_the_read_ahead_learns_the_secrets_and_leaves_the_summary_reading_to_the_compaction(
        monkeypatch: pytest.MonkeyPatch) -> None:
    nonce = datetime.now(UTC).strftime("n%H%M%S%f")  # (readings are remembered by text, process-wide)
    lines: list[Message] = []
    original = serialize.message_line
    monkeypatch.setattr(serialize, "message_line", lambda m: lines.append(m) or original(m))
    cm = ContextManager(model="gpt-4o", max_context_tokens=40_000, store="memory", archive="memory",
                        session_id=f"needs-{nonce}", policy={"auto": False, "tool_output_budget_tokens": 1_000_000})
    history = _history(nonce, 40)
    early = history[:7]  # under half the soft threshold: add() reads nothing of these
    cm.add(early)
    assert cm.tokens() < cm.budgets.soft // 2
    cm.add(history[7:])
    assert cm.tokens() > cm.budgets.soft // 2
    cm.prepare()  # hands the early messages to the read-ahead
    _background.wait_idle()
    assert cm.redactor.memory.table.get(_SECRET) == "openai_key"  # learned from an early output
    assert not any(is_read(m) for m in cm.messages()[:7])  # no summary reading ahead
    assert lines == []  # no transcript line ahead
    report = cm.compact()  # the compaction reads them itself
    assert report.compacted
    archived = "".join(m.text for _, messages in cm.archive.transcripts(f"needs-{nonce}") for m in messages)
    assert _SECRET not in archived and "[REDACTED:openai_key]" in archived
    cm.close()
