"""A replay whose add() was interrupted once and retried reads as the replay that never was.

Left by the eighteenth stop: an ``add()`` rolled back after its commit sends ``compact.add_rolled_back`` naming the
span ids of what the commit sent (``voided``), but nothing read it. The replay's result (and the report drawn from
it) still counted the rolled-back check's trigger decision (folded into ``noop_decisions``: a replay's checks start
no background job) and listed what the commit sent (a provider item's pruning) as if it had happened.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from rollback_setups import item_add_rolled_back

from contextfold import ContextManager
from contextfold.importers._session import RecordedSession
from contextfold.messages import Message, ToolCall
from contextfold.replay.harness import ReplayOptions, SessionReplayer, voided_span_ids
from contextfold.replay.metrics import aggregate
from contextfold.report.page import render_html
from contextfold.telemetry import AddRolledBack, MessagesPruned, RecordingTelemetry

NONCE = "s19grbk"
OPTIONS = ReplayOptions(window=3000)
INTERRUPTED_ADD = 10  # (the eleventh add, a tool result: its check decides)


def _session(cut_turn: int | None = None) -> RecordedSession:
    messages = [Message.system(f"system {NONCE}"), Message.user(f"task {NONCE}")]
    for n in range(12):
        call = ToolCall(id=f"t{n}", name="read", arguments='{"path": "a.py"}')
        lines = 900 if n == cut_turn else 12  # (900: the output is cut at write time)
        messages += [Message.assistant(f"turn {n} {NONCE}", [call]),
                     Message.tool(f"t{n}", f"line {n} {NONCE} of the file\n" * lines, name="read")]
    messages.append(Message.assistant(f"done {NONCE}"))
    return RecordedSession(f"{NONCE}-session", "jsonl", messages)


def _replay(monkeypatch: pytest.MonkeyPatch | None = None, *, interrupted: int = INTERRUPTED_ADD,
            cut_turn: int | None = None) -> dict[str, Any]:
    replayer = SessionReplayer(_session(cut_turn), OPTIONS)
    cm = replayer.manager
    if monkeypatch is not None:
        adds = 0
        add, check = cm.add, cm.check

        def interrupted_once(batch: Any) -> Any:
            # The caller's add() interrupted right after its check decided (a Ctrl-C lands anywhere), and retried.
            nonlocal adds
            adds += 1
            if adds - 1 != interrupted:
                return add(batch)

            def decided_then_interrupted(*args: Any, **kwargs: Any) -> Any:
                check(*args, **kwargs)
                raise KeyboardInterrupt

            monkeypatch.setattr(cm, "check", decided_then_interrupted)
            with pytest.raises(KeyboardInterrupt):
                add(batch)
            monkeypatch.setattr(cm, "check", check)
            return add(batch)

        monkeypatch.setattr(cm, "add", interrupted_once)
    try:
        return replayer.run()
    finally:
        cm.close()


def _figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in turn.items() if k != "prepare_ms"} for turn in result["series"]]  # (timings vary)


def test_a_replay_with_a_rolled_back_add_counts_as_the_one_without(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = _replay()
    retried = _replay(monkeypatch)
    rolled = [e for e in retried["events"] if e["name"] == "compact.add_rolled_back"]
    assert len(rolled) == 1 and rolled[0]["data"]["error_type"] == "KeyboardInterrupt"
    assert clean["noop_decisions"] > 0  # (the checks decided: the interrupted one among them)
    assert retried["noop_decisions"] == clean["noop_decisions"]  # afa4c7c: one more, the rolled-back check's
    assert [e for e in retried["events"] if e is not rolled[0]] == clean["events"]
    assert _figures(retried) == _figures(clean)
    # The report's count of decisions: the session's, not one more.
    pages = [render_html(aggregate([r], OPTIONS.settings())) for r in (clean, retried)]
    sent = sum(e["name"] == "compact.trigger_decision" for e in clean["events"])
    decisions = f"Not listed: {clean['noop_decisions'] + sent:,} trigger decisions"
    assert all(decisions in page for page in pages)


def test_a_rolled_back_add_whose_output_was_cut_lists_the_cut_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The add of turn 5's output (the twelfth: system and task first, two a turn) is the one interrupted.
    clean = _replay(cut_turn=5)
    retried = _replay(monkeypatch, interrupted=12, cut_turn=5)
    rolled = [e for e in retried["events"] if e["name"] == "compact.add_rolled_back"]
    assert len(rolled) == 1
    assert [e["name"] for e in clean["events"]].count("cache.truncated") == 1
    # s19g: one more cache.truncated, the rolled-back add's (sent before its commit, so not voided)
    assert [e for e in retried["events"] if e is not rolled[0]] == clean["events"]


def test_what_a_rolled_back_commit_sent_is_voided_and_its_rollback_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    # A provider's compaction item prunes the view before it (a MessagesPruned); the add is then interrupted.
    sink = RecordingTelemetry()
    cm = ContextManager(model="gpt-4o", max_context_tokens=3000, store="memory", archive="memory",
                        session_id=f"{NONCE}-p", message_id_prefix="m", archive_events=False, telemetry=sink,
                        clock=lambda: datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))
    cm.add(item_add_rolled_back(cm, monkeypatch, NONCE))  # the caller's retry
    cm.close()
    events = sink.events
    voided = voided_span_ids(events)
    pruned = [e for e in events if type(e) is MessagesPruned]
    assert len(pruned) == 2 and pruned[0].span_id in voided and pruned[1].span_id not in voided
    assert not any(type(e) is AddRolledBack and e.span_id in voided for e in events)
