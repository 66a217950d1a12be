"""Background warming (issue 15): past half the soft threshold, prepare() has the background thread read the new
messages as the coming compaction will (entities, secret scans). The compaction must come out exactly the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from contextfold import _background
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

_SECRET = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF"


def _history(steps: int) -> list[Message]:
    out = [Message("system", "You are a coding agent.")]
    for i in range(steps):
        body = "\n".join(f"/testbed/pkg/module_{i}.py:{n}: ValueError in parse_{n}() took {n} ms" for n in range(30))
        if i == 7:
            body += f"\nOPENAI_API_KEY={_SECRET}\n"
        out.append(Message.user(f"step {i}: look at module_{i}.py"))
        out.append(Message("assistant", "", (ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"cat module_{i}.py"})),)))
        out.append(Message("tool", body, tool_call_id=f"c{i}", name="bash"))
    return out


def _manager() -> ContextManager:
    # Auto off: nothing compacts until compact(); the history sits past half the soft threshold.
    return ContextManager(model="gpt-4o", max_context_tokens=40_000, store="memory", archive="memory",
                          session_id="warm", message_id_prefix="w", clock=lambda: datetime(2025, 1, 1, tzinfo=UTC),
                          policy={"auto": False, "tool_output_budget_tokens": 1_000_000})


def test_a_compaction_after_background_warming_equals_one_without() -> None:
    warmed, cold = _manager(), _manager()
    for cm in (warmed, cold):
        cm.add(_history(40))
    assert warmed.tokens() > warmed.budgets.soft // 2
    warmed.prepare()  # submits the warming job
    assert not warmed._intake.unwarmed
    _background.wait_idle()
    a, b = warmed.compact(), cold.compact()
    assert a.summary is not None and b.summary is not None
    assert a.summary.summary == b.summary.summary and a.summary.retain == b.summary.retain
    assert warmed.messages() == cold.messages()
    transcripts = [cm.archive.transcripts("warm") for cm in (warmed, cold)]
    assert transcripts[0] == transcripts[1]
    archived = "".join(m.text for _, messages in transcripts[0] for m in messages)
    assert _SECRET not in archived and "[REDACTED:openai_key]" in archived
    assert warmed.redactor._learned == cold.redactor._learned != {}


def test_a_secret_learned_after_add_found_a_message_clean_is_redacted_from_it() -> None:
    # add() redacts what it adds past half the soft threshold and keeps the result (issue 22); a bare value is
    # clean until a message names it a password, and the message found clean before must then lose it too.
    value = "Zq8vK3mN9pL2xR7t"
    cm = _manager()
    cm.add(_history(40))
    cm.add(Message.user(f"I will use {value} from now on."))
    mention = cm.messages()[-1]
    assert cm.redactor.is_clean(mention)  # redacted on add: nothing to redact without its context
    cm.add(Message.assistant(f"set it: DB_PASSWORD={value}"))
    assert not cm.redactor.is_clean(mention)  # looked at again for what was learned since, and found
    cm.compact()
    archived = "".join(m.text for _, messages in cm.archive.transcripts("warm") for m in messages)
    assert value not in archived and "I will use [REDACTED:password] from now on." in archived


def test_a_bulk_add_reads_ahead_only_what_a_compaction_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 22: an add() of a 100,000-message history read every message ahead, while a compaction reads the first
    # 200 and the newest 2,800 of what it summarizes (and the archive redacts in bulk).
    from contextfold.manager import _intake
    from contextfold.summarize.digest import MAX_READ_MESSAGES, READ_HEAD_MESSAGES, is_read

    assert (_intake._READ_AHEAD_MAX, _intake._READ_AHEAD_HEAD) == (MAX_READ_MESSAGES, READ_HEAD_MESSAGES)
    monkeypatch.setattr(_intake, "_READ_AHEAD_MAX", 30)  # (the same bounds, smaller: a cheap test)
    monkeypatch.setattr(_intake, "_READ_AHEAD_HEAD", 5)
    nonce = datetime.now(UTC).isoformat()  # texts no other test has read (the readings are remembered by text)
    history = [Message.user(f"{nonce} request {i}: check /srv/app/part_{i}.py " + "and more " * 40)
               for i in range(80)]
    cm = ContextManager(model="gpt-4o", max_context_tokens=4_000, store="memory", archive="memory",
                        policy={"auto": False, "emergency_message_count": 1_000_000})
    cm.add(history)
    read = [i for i, m in enumerate(cm.messages()) if is_read(m)]
    assert read == [*range(5), *range(80 - 25, 80)]
    cm.close()


def test_a_compaction_redacts_no_message_add_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 22: compact() redacted the view again for the secrets' catch-up, the summarizer and the archive (~1.9 s
    # of 5.6 s for 1,000 outputs). Past half the soft threshold add() redacts each message and the result is kept.
    from contextfold.redact import Redactor
    from contextfold.redact._messages import MessageRedactor

    cm = _manager()
    cm.add(_history(40))
    redacted: list[Message] = []
    original = Redactor._redact_fields
    monkeypatch.setattr(Redactor, "_redact_fields", lambda self, m: redacted.append(m) or original(self, m))
    monkeypatch.setattr(MessageRedactor, "_suspects", lambda self, items: pytest.fail("a batch scanned again"))
    report = cm.compact()
    assert report.compacted and redacted == []
    archived = "".join(m.text for _, messages in cm.archive.transcripts("warm") for m in messages)
    assert _SECRET not in archived and "[REDACTED:openai_key]" in archived


def test_a_job_submitted_during_an_agent_call_starts_once_the_call_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 22: prepare() submits the read-ahead; woken at once, the background thread took the GIL whenever the
    # call gave it up (the tokenizer, a lock) and kept it for a switch interval before its first pause.
    import threading

    from contextfold.telemetry._pace import foreground

    monkeypatch.setattr(_background, "JOB_START_WAIT_S", 60.0)
    order: list[str] = []
    with foreground:
        _background.submit(order.append, "job")
        threading.Event().wait(0.05)  # the call gives the GIL up, as the tokenizer does (not a synchronisation)
        order.append("call returns")
    _background.wait_idle()
    assert order == ["call returns", "job"]


def test_the_read_ahead_counts_no_entity_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 22: the read-ahead counted the tokens of every entity of every message (~10% of it), while a summary
    # counts only its best ranked few hundred: the messages are read, and nothing is counted.
    from contextfold.manager._compactor import warm_for_compaction
    from contextfold.summarize.digest import is_read
    from contextfold.tokens import TiktokenCounter

    counted: list[str] = []
    original = TiktokenCounter.count

    def count(self: TiktokenCounter, text: str) -> int:
        counted.append(text)
        return original(self, text)

    monkeypatch.setattr(TiktokenCounter, "count", count)
    nonce = datetime.now(UTC).isoformat()  # texts no other test has read (the readings are remembered by text)
    history = [Message.user(f"{nonce} look at /srv/app/part_{i}.py and parse_value_{i}") for i in range(20)]
    warm_for_compaction(history, True, None, False)
    assert all(is_read(m) for m in history)
    assert counted == []
