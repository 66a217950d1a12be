"""What a rolled-back add() had already done outside the manager: its events, an archive, a background job.

Left open by the seventeenth stop. The rollback put every part of the manager back, but (1) the events the batch's
commit sent (a trigger decision, the messages a provider's compaction item pruned) stayed sent with nothing saying
they no longer hold; (2) the transcript a provider item's archive wrote was written again by the caller's retry (two
transcripts of one view); (3) a background compaction the interrupted check started, once begun on the shared
executor, ran on to its summarizer's call (an LLM's, paid) for a result nobody takes.
"""

from __future__ import annotations

import datetime
import itertools
import threading
from typing import Any

import pytest
from rollback_setups import StoreFailingOnOutput, item_add_rolled_back, two_large_outputs

from contextfold import ContextManager
from contextfold.errors import StoreError
from contextfold.manager import _compactor
from contextfold.manager._idle import JobForgotten
from contextfold.messages import Message, ToolCall
from contextfold.replay.harness import voided_span_ids
from contextfold.telemetry import AddRolledBack, MessagesPruned, TriggerDecision
from contextfold.testing import ScriptedSummarizer

NONCE = "s18srbk4"
_T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
_WAIT_S = 30.0  # (a bound on a wait for the worker thread, never reached: the events are set by the code under test)


class _Sink:
    """Records every event; once armed, raises KeyboardInterrupt right after recording a trigger decision."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.armed = False
        self.before_interrupt: threading.Event | None = None  # waited for before raising, when set

    def emit(self, event: Any) -> None:
        self.events.append(event)
        if self.armed and type(event) is TriggerDecision:
            self.armed = False
            if self.before_interrupt is not None:
                assert self.before_interrupt.wait(_WAIT_S)
            raise KeyboardInterrupt


def _manager(sink: Any = None, *, background: bool = False, summarizer: Any = "extractive",
             session: str = NONCE) -> ContextManager:
    ticks = itertools.count()
    cm = ContextManager(model="gpt-4o", max_context_tokens=3000, store="memory", archive="memory",
                        session_id=session, message_id_prefix="m", archive_events=False, background=background,
                        telemetry=sink, summarizer=summarizer,
                        clock=lambda: _T0 + datetime.timedelta(seconds=next(ticks)))
    cm.counter.wait_exact()
    return cm


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "read", "arguments": '{"path": "a.py"}'}}


def _turn(n: int) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": f"turn {n} {NONCE}", "tool_calls": [_call(f"t{n}")]},
            {"role": "tool", "tool_call_id": f"t{n}", "content": f"line {n} {NONCE} of the file\n" * 12}]


def _near_background(cm: ContextManager) -> int:
    """Turns up to just below the background threshold: the next turn's check starts a background compaction."""
    cm.add([{"role": "system", "content": f"system {NONCE}"}, {"role": "user", "content": f"task {NONCE}"}])
    n = 0
    while cm.tokens() < cm.policy.sleep_threshold(cm.budgets.window) - 150:
        cm.add(_turn(n))
        cm.prepare("openai_chat")
        n += 1
    assert not cm._idle.pending
    return n


def _job_forgotten_once(cm: ContextManager, sink: _Sink, monkeypatch: pytest.MonkeyPatch, n: int,
                        reached: threading.Event) -> Any:
    """The future of the background job turn ``n``'s check starts, its add() interrupted once ``reached`` is set.

    The rollback forgets the job (asserted): what it does after ``reached`` is the caller's to release.
    """
    jobs: list[Any] = []
    checked = cm.check

    def noting_check(*args: Any, **kwargs: Any) -> Any:
        try:
            return checked(*args, **kwargs)
        finally:
            if cm._idle._pending is not None:
                jobs.append(cm._idle._pending[2])

    monkeypatch.setattr(cm, "check", noting_check)
    sink.before_interrupt = reached
    sink.armed = True
    with pytest.raises(KeyboardInterrupt):
        cm.add(_turn(n))
    monkeypatch.undo()
    assert jobs and not cm._idle.pending
    return jobs[0]


def test_the_rollback_says_which_messages_and_events_no_longer_hold() -> None:
    sink = _Sink()
    cm = _manager(sink, background=True)
    n = _near_background(cm)
    sent_before = len(sink.events)
    sink.armed = True
    with pytest.raises(KeyboardInterrupt):
        cm.add(_turn(n))
    during = sink.events[sent_before:]
    decisions = [e for e in during if type(e) is TriggerDecision]
    assert decisions and decisions[0].triggered
    rolled = [e for e in during if type(e) is AddRolledBack]
    assert len(rolled) == 1  # 08dd6b2: none; the decision stood for a batch the history does not hold
    assert rolled[0].ids == (f"m:{cm._seq + 1}", f"m:{cm._seq + 2}")
    assert decisions[0].span_id in rolled[0].voided
    assert rolled[0].error_type == "KeyboardInterrupt" and rolled[0].status == "error"
    assert all(e.span_id in rolled[0].voided for e in during if e is not rolled[0])
    assert not any(m.meta.get("id") in rolled[0].ids for m in cm._view.raw)
    cm.close()


def test_a_clean_add_sends_no_rollback() -> None:
    sink = _Sink()
    cm = _manager(sink)
    cm.add([{"role": "user", "content": f"task {NONCE}"}, *_turn(0)])
    assert not [e for e in sink.events if type(e) is AddRolledBack]
    assert cm.tracer._recording is None  # (the note of what a commit sends ends with it)
    cm.close()


def test_a_retried_provider_item_archives_the_view_it_replaces_once(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = _Sink()
    cm = _manager(sink, session=f"{NONCE}-p")
    batch = item_add_rolled_back(cm, monkeypatch, NONCE)
    events = list(sink.events)
    cm.add(batch)  # the caller's retry
    assert cm._archived_seq == cm._seq  # (marked archived again, as the first attempt had)
    cm.close()
    archive = cm.archive
    assert archive is not None
    transcripts = archive.transcripts(f"{NONCE}-p")
    replaced = [n for n, messages in transcripts if f"working {NONCE}" in [m.text for m in messages]]
    assert len(replaced) == 1, replaced  # 08dd6b2: [1, 2], the same view archived twice
    texts = [m.text for _, messages in transcripts for m in messages]
    assert f"after {NONCE}" in texts  # (the final transcript, owed by close(), is there)
    pruned = [e for e in events if type(e) is MessagesPruned]
    rolled = [e for e in events if type(e) is AddRolledBack]
    assert pruned and rolled and pruned[-1].span_id in rolled[0].voided  # 08dd6b2: no AddRolledBack


def test_a_begun_background_job_the_rollback_forgets_does_not_call_its_summarizer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    summarizer = ScriptedSummarizer()
    sink = _Sink()
    cm = _manager(sink, background=True, summarizer=summarizer)
    n = _near_background(cm)
    called_before = len(summarizer.requests)
    begun, release = threading.Event(), threading.Event()
    compact = _compactor.compact_after_boundary

    def gated(*args: Any, **kwargs: Any) -> Any:
        begun.set()  # (the job is running on the shared executor: past where cancel() could stop it)
        assert release.wait(_WAIT_S)
        return compact(*args, **kwargs)

    monkeypatch.setattr(_compactor, "compact_after_boundary", gated)
    job = _job_forgotten_once(cm, sink, monkeypatch, n, begun)
    release.set()
    error = job.exception(timeout=_WAIT_S)  # (the job's own end, not a sleep)
    assert len(summarizer.requests) == called_before  # 08dd6b2: the summarizer was called for the forgotten job
    assert isinstance(error, Exception) and isinstance(error.__cause__, JobForgotten)  # (failed: nobody reads it)
    cm.add(_turn(n))  # the caller's retry starts its own job, which summarizes
    future = cm._idle._pending[2] if cm._idle._pending is not None else None
    assert future is not None
    future.result(timeout=_WAIT_S)
    assert len(summarizer.requests) == called_before + 1
    cm.close()


def test_a_summary_under_way_when_the_rollback_forgets_its_job_is_not_handed_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The forgotten job's summarizer call had begun: it runs to its end (an LLM's call cannot be taken back), but
    # the job must not end with a compaction of a view the history no longer holds, as if it were a valid one.
    entered, release = threading.Event(), threading.Event()
    calls = itertools.count()

    def answer(request: Any) -> str:
        if next(calls) == 0:  # (the job the rollback forgets: under way when the interrupt comes)
            entered.set()
            assert release.wait(_WAIT_S)
            return f"<summary>the forgotten view {NONCE}</summary>"
        return f"<summary>the retried view {NONCE}</summary>"

    summarizer = ScriptedSummarizer(handler=answer)
    sink = _Sink()
    cm = _manager(sink, background=True, summarizer=summarizer)
    n = _near_background(cm)
    job = _job_forgotten_once(cm, sink, monkeypatch, n, entered)  # (while the summarizer is writing)
    sent, archived = len(sink.events), cm.archive.transcripts(NONCE) if cm.archive is not None else None
    view = list(cm._view.raw)
    release.set()
    error = job.exception(timeout=_WAIT_S)
    assert len(summarizer.requests) == 1  # (the call under way ran to its end)
    # (What else the job did once its summary came back: nothing sent, nothing archived, the view as it was.)
    assert len(sink.events) == sent and archived == (cm.archive.transcripts(NONCE) if cm.archive else None)
    assert all(a is b for a, b in zip(cm._view.raw, view, strict=True))
    # afa4c7c: None, the job ended with a compaction of the rolled-back view
    assert isinstance(error, Exception) and isinstance(error.__cause__, JobForgotten)
    cm.add(_turn(n))  # the caller's retry: its own job, applied by the next prepare()
    future = cm._idle._pending[2] if cm._idle._pending is not None else None
    assert future is not None
    future.result(timeout=_WAIT_S)
    cm.prepare("openai_chat")
    texts = [m.text for m in cm._view.raw]
    assert any(f"the retried view {NONCE}" in t for t in texts)
    assert not any(f"the forgotten view {NONCE}" in t for t in texts)
    cm.close()


def test_what_the_add_sent_before_its_commit_is_voided_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # Left by lane s19g: only what the commit sent was noted, so the cut at write time (CacheTruncated, its copy's
    # own), the large-input warnings and the archive of a result answering no call stood, and the retry sent its own.
    sink = _Sink()
    cm = ContextManager(model="gpt-4o", max_context_tokens=3000, store="memory", archive="memory",
                        session_id=NONCE, message_id_prefix="m", archive_events=False, telemetry=sink,
                        policy={"large_input_bytes": 8192}, clock=lambda: _T0)
    cm.add([{"role": "system", "content": f"system {NONCE}"}, {"role": "user", "content": f"task {NONCE}"}])
    output = Message.tool("t0", f"line {NONCE} of the file\n" * 900, name="read")  # cut, and over the limit
    call = ToolCall(id="t0", name="read", arguments='{"path": "a.py"}')
    # The output given twice as one object (the copy sends its own events from the first's) and a late result.
    batch = [Message.assistant(f"turn {NONCE}", [call]), output, Message.tool("gone", f"late {NONCE}"), output]
    check = cm.check

    def decided_then_interrupted(*args: Any, **kwargs: Any) -> Any:
        check(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(cm, "check", decided_then_interrupted)
    sent_before = len(sink.events)
    with pytest.raises(KeyboardInterrupt):
        cm.add(batch)
    monkeypatch.undo()
    during = sink.events[sent_before:]
    rolled = [e for e in during if type(e) is AddRolledBack]
    assert len(rolled) == 1
    told = sorted((e.name, getattr(e, "code", "")) for e in during if e is not rolled[0])
    assert told == [("cache.truncated", ""), ("cache.truncated", ""), ("compact.pruned_messages", ""),
                    ("compact.warning", "large_input"), ("compact.warning", "large_input")]
    assert all(e.span_id in rolled[0].voided for e in during if e is not rolled[0])  # s19g: none of them
    cm.add(batch)  # the caller's retry: what holds is its events alone
    voided = voided_span_ids(sink.events)
    held = [e.name for e in sink.events[sent_before:] if e.span_id not in voided and type(e) is not AddRolledBack]
    assert held.count("cache.truncated") == 2 and held.count("compact.pruned_messages") == 1
    assert cm.tracer._recording is None
    cm.close()


def test_an_add_failing_before_its_commit_voids_what_it_sent() -> None:
    # Left by the nineteenth stop: only a rollback after the commit sent AddRolledBack, so the cut of the first
    # output and its large-input warning, sent by an add whose store then failed on the second, stood as if they
    # happened (and the caller's retry sent its own: every reader counted two cuts of one output).
    sink = _Sink()
    store = StoreFailingOnOutput(NONCE)
    cm = ContextManager(model="gpt-4o", max_context_tokens=3000, store=store, archive="memory",
                        session_id=NONCE, message_id_prefix="m", archive_events=False, telemetry=sink,
                        policy={"large_input_bytes": 8192}, clock=lambda: _T0)
    cm.add([{"role": "system", "content": f"system {NONCE}"}, {"role": "user", "content": f"task {NONCE}"}])
    batch = two_large_outputs(NONCE)
    sent_before = len(sink.events)
    store.fail_on = 2
    with pytest.raises(StoreError):
        cm.add(batch)
    during = sink.events[sent_before:]
    rolled = [e for e in during if type(e) is AddRolledBack]
    assert len(rolled) == 1 and rolled[0].error_type == "StoreError"
    told = sorted((e.name, getattr(e, "code", "")) for e in during if e is not rolled[0])
    assert told == [("cache.truncated", ""), ("compact.warning", "large_input"), ("compact.warning", "large_input")]
    assert sorted(rolled[0].voided) == sorted(e.span_id for e in during if e is not rolled[0])
    assert len(cm._view.raw) == 2  # (none of the batch went in)
    cm.add(batch)  # the caller's retry: what holds is its events alone
    voided = voided_span_ids(sink.events)
    held = [e.name for e in sink.events[sent_before:] if e.span_id not in voided and type(e) is not AddRolledBack]
    assert held.count("cache.truncated") == 2
    assert cm.tracer._recording is None
    cm.close()


def test_an_add_failing_before_it_sent_anything_sends_no_rollback() -> None:
    sink = _Sink()
    cm = _manager(sink)
    before = len(sink.events)
    with pytest.raises(ValueError, match="role"):
        cm.add([{"role": "narrator", "content": f"once upon a time {NONCE}"}])
    assert sink.events[before:] == []
    cm.close()
