"""What add()'s rollback restores once the batch is in: the view as it was, and every part the commit moved.

Found by a review of 674ab2e (add() all or nothing for interrupts). The rollback cut the view back to its length
before the batch, but the view's count and the trigger check settle it first, and settling rewrites the stored
messages after the settled prefix, those before the batch included: an "aborted" output inserted after a call the
agent moved on from, a result delivered twice dropped. The cut then kept the wrong messages (the user's message
gone, an "aborted" output in its place; the batch's own call kept in a dropped duplicate's place, sent twice after
the caller's retry). It also left a background compaction the check started pending (the retry's check could not
start its own), and a provider compaction item's archive marking the batch as archived (its session's final
transcript skipped).
"""

from __future__ import annotations

import datetime
import itertools
from typing import Any

import pytest
from rollback_setups import interrupt_once_archived, provider_compaction_item

from contextfold import ContextManager

NONCE = "f1rbk5zq"
_T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


class _Sink:
    """A telemetry sink that raises KeyboardInterrupt on the next trigger decision once armed."""

    def __init__(self) -> None:
        self.armed = False

    def emit(self, event: Any) -> None:
        if self.armed and type(event).__name__ == "TriggerDecision":
            self.armed = False
            raise KeyboardInterrupt


def _manager(*, background: bool = False, sink: _Sink | None = None) -> ContextManager:
    ticks = itertools.count()
    cm = ContextManager(model="gpt-4o", max_context_tokens=3000, store="memory", archive="memory",
                        session_id=NONCE, message_id_prefix="m", archive_events=False, background=background,
                        telemetry=sink, clock=lambda: _T0 + datetime.timedelta(seconds=next(ticks)))
    cm.counter.wait_exact()  # (exact counts from the start: the same decisions whenever the tokenizer loads)
    return cm


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "read", "arguments": '{"path": "a.py"}'}}


def _stored(cm: ContextManager) -> list[tuple[Any, ...]]:
    return [(m.role, m.text, m.tool_call_id, tuple(c.id for c in m.tool_calls), m.meta.get("id"), m.kind)
            for m in cm._view.raw]


def _sent_once(wire: list[dict[str, Any]]) -> None:
    calls = [c["id"] for item in wire if item["role"] == "assistant" for c in item.get("tool_calls") or ()]
    assert len(calls) == len(set(calls)), calls


def _interrupt_after_the_settle(cm: ContextManager, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """An interrupt once the batch is in and the view settled: in the trigger check, or right after the count."""
    if where == "check":
        def interrupted_check(*args: Any, **kwargs: Any) -> Any:
            raise KeyboardInterrupt
        monkeypatch.setattr(cm, "check", interrupted_check)
        return
    before = len(cm._view.raw)
    counted = cm._view.totals

    def interrupted_count(*args: Any, **kwargs: Any) -> Any:
        result = counted(*args, **kwargs)  # (settled and counted; the interrupt lands right after)
        if len(cm._view.raw) > before:
            raise KeyboardInterrupt
        return result
    monkeypatch.setattr(cm._view, "totals", interrupted_count)


UNANSWERED_THEN_USER: list[list[dict[str, Any]]] = [
    [{"role": "system", "content": f"system {NONCE}"}, {"role": "user", "content": f"task {NONCE}"}],
    [{"role": "assistant", "content": f"calling {NONCE}", "tool_calls": [_call("c1")]}],  # never answered
    [{"role": "user", "content": f"never mind that {NONCE}"}],
]
RESULT_TWICE: list[list[dict[str, Any]]] = [
    [{"role": "system", "content": f"system {NONCE}"}, {"role": "user", "content": f"task {NONCE}"}],
    [{"role": "assistant", "content": f"calling {NONCE}", "tool_calls": [_call("c1")]},
     {"role": "tool", "tool_call_id": "c1", "content": f"out {NONCE}"}],
    [{"role": "tool", "tool_call_id": "c1", "content": f"out again {NONCE}"}],  # a result delivered twice
]
FAILING: list[dict[str, Any]] = [
    {"role": "assistant", "content": f"next {NONCE}", "tool_calls": [_call("c2")]},
    {"role": "tool", "tool_call_id": "c2", "content": f"second out {NONCE}"},
]


def _rolled_back_after(history: list[list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch,
                       where: str) -> tuple[ContextManager, ContextManager, list[tuple[Any, ...]]]:
    """A manager given ``history`` then FAILING, interrupted (see _interrupt_after_the_settle); one given ``history``.

    Also what the first stored before FAILING.
    """
    cm, ref = _manager(), _manager()
    for batch in history:
        cm.add(batch)
        ref.add(batch)
    before = _stored(cm)
    _interrupt_after_the_settle(cm, monkeypatch, where)
    with pytest.raises(KeyboardInterrupt):
        cm.add(FAILING)
    monkeypatch.undo()
    return cm, ref, before


@pytest.mark.parametrize("where", ["check", "count"])
def test_the_users_message_after_an_unanswered_call_survives_the_rollback(monkeypatch: pytest.MonkeyPatch,
                                                                         where: str) -> None:
    cm, ref, before = _rolled_back_after(UNANSWERED_THEN_USER, monkeypatch, where)
    # 1c2b5ec: the user's message gone, the "aborted" output settling inserted after c1 in its place
    assert _stored(cm) == before
    assert [m.text for m in cm._view.raw][-1] == f"never mind that {NONCE}"
    cm.add(FAILING)  # the caller's retry
    ref.add(FAILING)
    assert _stored(cm) == _stored(ref)  # (the "aborted" output for c1, settled again, is there once)
    wire = cm.prepare("openai_chat")
    assert wire == ref.prepare("openai_chat")
    _sent_once(wire)
    cm.close()
    ref.close()


@pytest.mark.parametrize("where", ["check", "count"])
def test_a_retry_after_a_settle_dropped_a_duplicate_result_sends_the_batch_once(monkeypatch: pytest.MonkeyPatch,
                                                                                where: str) -> None:
    cm, ref, before = _rolled_back_after(RESULT_TWICE, monkeypatch, where)
    assert _stored(cm) == before  # 1c2b5ec: the batch's call c2 (m:6) kept where the dropped duplicate was
    cm.add(FAILING)
    ref.add(FAILING)
    assert _stored(cm) == _stored(ref)
    ids = [m.meta.get("id") for m in cm._view.raw]
    assert ids.count("m:6") == ids.count("m:7") == 1, ids  # 1c2b5ec: m:6 (call c2) stored twice
    wire = cm.prepare("openai_chat")
    assert wire == ref.prepare("openai_chat")
    _sent_once(wire)  # 1c2b5ec: call c2 sent twice
    cm.close()
    ref.close()


def _turn(n: int) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": f"turn {n} {NONCE}", "tool_calls": [_call(f"t{n}")]},
            {"role": "tool", "tool_call_id": f"t{n}", "content": f"line {n} {NONCE} of the file\n" * 12}]


def _finish_background(cm: ContextManager) -> None:
    future = cm._idle._pending[2] if cm._idle._pending is not None else None
    if future is not None:
        future.result()  # (the job's own end, not a sleep)


def test_a_background_compaction_the_interrupted_check_started_is_forgotten() -> None:
    sink = _Sink()
    cm, ref = _manager(background=True, sink=sink), _manager(background=True)
    start = [{"role": "system", "content": f"system {NONCE}"}, {"role": "user", "content": f"task {NONCE}"}]
    for m in (cm, ref):
        m.add(start)
    n = 0
    # Up to just below the background threshold: the next turn's check starts a background compaction.
    while cm.tokens() < cm.policy.sleep_threshold(cm.budgets.window) - 150:
        for m in (cm, ref):
            m.add(_turn(n))
            m.prepare("openai_chat")
        n += 1
    assert not cm._idle.pending
    sink.armed = True
    with pytest.raises(KeyboardInterrupt):
        cm.add(_turn(n))
    assert not sink.armed, "the check decided nothing"
    assert not cm._idle.pending  # 1c2b5ec: the job started on the rolled-back batch still pending
    cm.add(_turn(n))  # the caller's retry: its check starts its own job
    ref.add(_turn(n))
    assert cm._idle.pending and ref._idle.pending
    _finish_background(cm)
    _finish_background(ref)
    assert cm.prepare("openai_chat") == ref.prepare("openai_chat")  # 1c2b5ec: ref compacted, cm did not
    assert _stored(cm) == _stored(ref)
    cm.close()
    ref.close()


def test_a_rolled_back_provider_compaction_item_leaves_the_final_transcript_owed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cm = _manager()
    cm.add([{"role": "system", "content": f"system {NONCE}"}, {"role": "user", "content": f"task {NONCE}"},
            {"role": "assistant", "content": f"working {NONCE}"}, {"role": "user", "content": f"go on {NONCE}"}])
    # (A rewrite that makes room as a compaction would: a floor the item's archive clears, archived up to m:4.)
    cm.rewrite_view(lambda view: [view[0], *view[3:]], reason=f"pruned {NONCE}", shrinks=True)
    floor, stalled = cm._compactor.floor, cm._compactor.stalled
    assert floor is not None
    interrupt_once_archived(cm, monkeypatch, "m:5")
    with pytest.raises(KeyboardInterrupt):
        cm.add([provider_compaction_item(f"summary {NONCE}"), {"role": "user", "content": f"after {NONCE}"}])
    monkeypatch.undo()
    assert cm._seq == 4
    assert cm._archived_seq == 4  # 1c2b5ec: 6, as if the batch's messages were archived
    assert (cm._compactor.floor, cm._compactor.stalled) == (floor, stalled)  # 1c2b5ec: no floor
    cm.add([{"role": "user", "content": f"last words {NONCE}"}])  # (the caller moved on instead of retrying)
    cm.close()
    archive = cm.archive
    assert archive is not None
    texts = [m.text for _, transcript in archive.transcripts(NONCE) for m in transcript]
    assert f"last words {NONCE}" in texts  # 1c2b5ec: the final transcript skipped, these messages archived nowhere
