"""An automatic soft compaction that cannot be worth applying whatever its summary is decided before summarizing
(issue 22, plain turns: 22 soft compactions of the lm32b loop at 16K were summarized and then declined, 5-8 ms each).

When what the compaction keeps (front, user block, kept messages, all unchanged) already takes more than
``worth_applying`` allows after it, no summary can help: the summarizer is not called, and the manager ends where
the full path ends (view, floor, report). Otherwise the dry run made for that decision is the compaction's plan."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.compaction import Policy, compact, plan_compaction
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.summarize import ExtractiveSummarizer, SummaryRequest, SummaryResult
from contextfold.telemetry import RecordingTelemetry


class _Counting(ExtractiveSummarizer):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        self.calls += 1
        return super().summarize(request)


def _history(nonce: str, recent_words: int) -> list[Message]:
    """A small old part (what a soft compaction would summarize) and long recent turns (what it keeps).

    The nonce (texts are remembered process-wide) is once per message: the figures barely move with it.
    """
    out = [Message.user(f"task {nonce}: fix the parser")]
    for i in range(4):
        out += [Message.assistant(f"note {i} {nonce}"), Message.user(f"ok {i}")]
    for i in range(6):
        out.append(Message.assistant(f"{nonce} " + " ".join(f"word{i}_{k}" for k in range(recent_words))))
        out.append(Message.user(f"continue {i} " + " ".join(f"x{k}" for k in range(20))))
    return out


def _run(history: list[Message], *, early: bool) -> tuple[ContextManager, _Counting]:
    cm = ContextManager("gpt-4o", max_context_tokens=8000, store="memory", archive="memory", session_id="declined",
                        telemetry=RecordingTelemetry(), message_id_prefix="m",
                        clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))
    summarizer = _Counting()
    cm.summarizer = summarizer
    if not early:
        cm._compactor.declined_unsummarized = lambda view, budget, counted=None: (None, None)  # type: ignore[method-assign]
    cm.add(history)
    cm.prepare()
    return cm, summarizer


def test_a_soft_compaction_declined_whatever_its_summary_is_never_summarized() -> None:
    history = _history(uuid.uuid4().hex[:8], 170)
    cm, summarizer = _run(history, early=True)
    full, full_summarizer = _run(history, early=False)
    assert cm.last_plan is not None and str(cm.last_plan.action) == "soft"
    assert summarizer.calls == 0 and full_summarizer.calls == 1  # (the full path summarized, then declined)
    assert cm.compactions == full.compactions == 0
    assert cm.messages() == full.messages() and [m.text for m in cm.messages()] == [m.text for m in history]
    assert cm._compactor.floor == full._compactor.floor is not None


def test_a_soft_compaction_that_may_pay_is_summarized_as_before() -> None:
    history = _history(uuid.uuid4().hex[:8], 240)
    cm, summarizer = _run(history, early=True)
    full, _ = _run(history, early=False)
    assert summarizer.calls == 1
    assert cm.messages() == full.messages() and cm._compactor.floor == full._compactor.floor


@settings(max_examples=15, deadline=None)
@given(old=st.integers(0, 8), recent=st.integers(1, 8), words=st.integers(5, 200), budget=st.integers(1_500, 9_000))
def test_declined_unsummarized_only_says_so_of_a_compaction_not_worth_applying(old: int, recent: int, words: int,
                                                                               budget: int) -> None:
    nonce = uuid.uuid4().hex[:6]
    history = [Message.user(f"task {nonce}")]
    for i in range(old):
        history += [Message.assistant(f"old note {i} {nonce} " * (i + 1)), Message.user(f"ok {i}")]
    for i in range(recent):
        history += [Message.assistant(" ".join(f"w{nonce}{i}_{k}" for k in range(words))), Message.user(f"go {i}")]
    cm = ContextManager("gpt-4o", store="memory", session_id="property")
    compactor = cm._compactor
    early, plan = compactor.declined_unsummarized(history, budget)
    try:
        expected = plan_compaction(history, policy=compactor.policy, counter=cm.counter, budget=budget, kind="soft")
    except Exception:
        assert early is None and plan is None
        return
    result = compact(history, policy=compactor.policy, counter=cm.counter, summarizer=ExtractiveSummarizer(),
                     budget=budget, kind="soft")
    if early is not None:
        assert plan is None and not compactor.worth_applying(result)
        assert early == (result.stats.tokens_before, result.stats.messages_before)
    else:
        assert plan == expected
    assert isinstance(compactor.policy, Policy)
