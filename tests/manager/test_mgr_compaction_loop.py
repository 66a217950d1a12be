"""Compaction never loops: the emergency rebuild reaches its message cap, and a compaction that cannot help waits."""

from __future__ import annotations

from contextfold.compaction._compact import EMERGENCY_MESSAGE_TARGET_SHARE
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.telemetry import CompactWarning, RecordingTelemetry

CAP = 60


def short_user_history(count: int) -> list[Message]:
    """Every 4th message a short user request, the others assistant notes (the shape of issue 12, defect 1)."""
    out: list[Message] = []
    for i in range(count):
        if i % 4 == 0:
            out.append(Message.user(f"do step {i}"))
        else:
            out.append(Message.assistant(f"working on item {i}: lorem ipsum dolor sit amet"))
    return out


def manager(telemetry: RecordingTelemetry, **policy: object) -> ContextManager:
    return ContextManager("gpt-4o", store="memory", archive="memory", session_id="loop", telemetry=telemetry,
                          policy={"emergency_message_count": CAP, **policy}, message_id_prefix="m")


def stalls(telemetry: RecordingTelemetry) -> list[CompactWarning]:
    return [e for e in telemetry.events if isinstance(e, CompactWarning) and e.code == "compaction_stalled"]


def test_emergency_rebuild_gets_under_the_message_cap_and_then_stays_put() -> None:
    # Before the fix the user-message budget (20,000 tokens) kept all 100 short requests: 100+ messages, over the
    # cap of 60, so every prepare() compacted again.
    tel = RecordingTelemetry()
    cm = manager(tel)
    history = short_user_history(400)
    cm.add(history)
    cm.prepare()
    view = cm.messages()
    assert len(view) <= int(CAP * EMERGENCY_MESSAGE_TARGET_SHARE)
    assert cm.compactions == 1
    # The requests kept verbatim are the newest ones, in order, ending with the last request of the history.
    requests = [m.text for m in view if m.role == "user" and m.kind is None]
    originals = [m.text for m in history if m.role == "user"]
    assert requests == originals[-len(requests):]
    assert requests[-1] == "do step 396"
    for _ in range(5):
        cm.prepare()
    assert cm.compactions == 1
    assert stalls(tel) == []


def test_a_compaction_that_cannot_get_under_the_cap_waits_for_growth_and_says_why() -> None:
    # Every user message is pinned: no compaction can bring 100 of them under a cap of 60.
    tel = RecordingTelemetry()
    cm = manager(tel, roles_never_prune=("system", "user"))
    cm.add(short_user_history(400))
    cm.prepare()
    assert cm.compactions == 1
    [warning] = stalls(tel)
    assert "60" in warning.message and "grows by 6 messages" in warning.message
    for _ in range(3):
        cm.prepare()
    assert cm.compactions == 1
    assert len(stalls(tel)) == 1
    cm.add([Message.user("more"), Message.assistant("ok")] * 2)  # 4 messages: too little growth
    cm.prepare()
    assert cm.compactions == 1
    cm.add([Message.user("again"), Message.assistant("ok")])  # 6 messages since the stall: try once more
    cm.prepare()
    assert cm.compactions == 2
    assert len(stalls(tel)) == 2


def test_an_automatic_soft_compaction_must_save_a_fifth_of_a_small_view() -> None:
    import dataclasses

    from contextfold.compaction import Policy, compact
    from contextfold.summarize import ExtractiveSummarizer

    cm = manager(RecordingTelemetry())
    history = short_user_history(40)
    result = compact(history, policy=Policy(keep_recent_turns=1), counter=cm.counter, summarizer=ExtractiveSummarizer(),
                     budget=100_000, kind="soft")

    def saving(before: int, after: int) -> bool:
        stats = dataclasses.replace(result.stats, tokens_before=before, tokens_after=after)
        return cm._compactor.worth_applying(dataclasses.replace(result, stats=stats))

    # clear_at_least (2,000) is more than a fifth of these views: a fifth is what must be saved
    assert not saving(8_000, 6_401)
    assert saving(8_000, 6_400)
    # in a large view clear_at_least is the smaller bar
    assert not saving(40_000, 38_001)
    assert saving(40_000, 38_000)
