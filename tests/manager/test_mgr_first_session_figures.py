"""A process's first session records the same figures, and sends the same views, whenever the tokenizer loads.

A manager counts byte upper bounds until the exact tokenizer has loaded (a background thread, ~0.5 s once per
process). The bounds used to leak: the token estimate and the call span's tokens of the first calls, the growth per
call the cache verdicts weigh (the verdicts' figures, and which rewrite waits), and the room an answered output is
widened in (the view sent). The tokenizer's arrival is forced here, deterministically: loaded before the session,
after its first call, after its third, or only when something waits for it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from _held_tokenizer import HeldTokenizer

from contextfold import ContextManager
from contextfold.exporters.base import InMemoryExporter
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import BatchProcessor, RecordingTelemetry
from contextfold.tokens import MessageCounter, TiktokenCounter

NONCE = "r14w7"  # (in the texts: no stale cache can answer for them)
OUTPUT = "\n".join(f"{n:4d}  result_{n} = measure_{NONCE}({n}) + offset_{n * 3}" for n in range(1, 70))
LISTING = "\n".join(f"{n:6d}\t    value_{n} = compute_{NONCE}({n}, offset={n * 7})" for n in range(1, 601))
SMALL = "\n".join(f"line {n}: ok {NONCE}" for n in range(12))
RANDOM_FIELDS = ("span_id", "parent_id")
NEVER = -1  # the tokenizer arrives only when the manager waits for it


Turn = tuple[str, str, timedelta]


def _turns(n: int, output: str = OUTPUT, tool: str = "measure", idle: timedelta = timedelta(seconds=30)) -> list[Turn]:
    return [(output, tool, idle)] * n


# Sessions whose records differed on 6775dcc with a late tokenizer: verdicts' figures (claude), which rewrite waits
# and so the views (deep), and widening (wide: the view sent).
SESSIONS: dict[str, tuple[dict[str, object], list[Turn]]] = {
    "claude": ({"cache_pricing": "claude-sonnet-4"}, _turns(12)),
    "deep": ({"cache_pricing": "claude-sonnet-4"}, _turns(6) + _turns(10, SMALL)),
    "wide": ({"cache_pricing": "claude-sonnet-4", "soft_pct": 0.8}, _turns(4, LISTING, tool="view")),
}


def _run(name: str, arrives_after: int, sink: Any) -> tuple[list[str], ContextManager]:
    """The views one session sends; the tokenizer arrives after ``arrives_after`` calls (0: before the first)."""
    policy, turns = SESSIONS[name]
    tokenizer = HeldTokenizer()
    counter = MessageCounter(tokenizer, lazy=True)
    now = [datetime(2026, 11, 27, 7, 0, tzinfo=UTC)]
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive=False, telemetry=sink,
                        session_id=f"first-{name}", clock=lambda: now[0], message_id_prefix="t", counter=counter,
                        policy={"clear_at_least": 1_000, **policy})
    if arrives_after == 0:
        tokenizer.arrive()
    cm.add([Message.system("You are a coding agent."), Message.user(f"measure every module and report {NONCE}")])
    views = [json.dumps(cm.prepare())]
    for n, (output, tool, idle) in enumerate(turns, start=1):
        if n == arrives_after:
            tokenizer.arrive()
        now[0] += idle
        cm.add([Message.assistant(f"step {n}", [ToolCall(f"{tool}{n}", tool, f'{{"module": {n}}}')]),
                Message.tool(f"{tool}{n}", output.replace("_", f"_{n}_", 1))])
        views.append(json.dumps(cm.prepare()))
    return views, cm


def _records(events: list[dict[str, Any]]) -> list[str]:
    return [json.dumps({k: v for k, v in e.items() if k not in RANDOM_FIELDS} | {"data": {
        k: v for k, v in e["data"].items() if k != "duration_ms"}}, sort_keys=True) for e in events]


def _recorded(name: str, arrives_after: int) -> tuple[list[str], list[str]]:
    sink = RecordingTelemetry()
    views, _ = _run(name, arrives_after, sink)
    return views, _records([e.to_dict() for e in sink.events])


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_the_records_do_not_depend_on_when_the_tokenizer_arrives(name: str) -> None:
    views, records = _recorded(name, 0)
    assert any('"compact.cache_decision"' in r for r in records) or name == "wide"
    for arrives_after in (1, 3, NEVER):
        late_views, late_records = _recorded(name, arrives_after)
        assert late_views == views, f"{name}: the views sent differ when the tokenizer arrives after {arrives_after}"
        assert late_records == records, f"{name}: the records differ when the tokenizer arrives after {arrives_after}"


def _exported(arrives_after: int) -> tuple[list[str], ContextManager]:
    processor = BatchProcessor(InMemoryExporter())
    try:
        _, cm = _run("claude", arrives_after, processor)
        assert processor.flush()
        return _records(processor.exporter.events), cm  # type: ignore[attr-defined]
    finally:
        processor.shutdown()


def test_an_exporting_sink_gets_the_same_figures_counted_exactly_on_its_thread() -> None:
    exported, _ = _exported(0)
    late, _ = _exported(NEVER)
    assert late == exported
    estimates = [json.loads(r) for r in exported if '"compact.token_estimate"' in r]
    assert estimates[0]["data"]["system"] == MessageCounter(TiktokenCounter()).count_message(
        Message.system("You are a coding agent."))


def test_a_first_call_with_nothing_to_decide_does_not_wait_for_the_tokenizer() -> None:
    tokenizer = HeldTokenizer()
    processor = BatchProcessor(InMemoryExporter())
    try:
        cm = ContextManager("gpt-4o", store="memory", archive=False, telemetry=processor, session_id="first-call",
                            counter=MessageCounter(tokenizer, lazy=True))
        cm.add([Message.system("You are a coding agent."), Message.user(f"list the files {NONCE}")])
        cm.prepare()
        assert cm.counter.provisional and not tokenizer.arrived
        assert processor.flush()
    finally:
        processor.shutdown()
    spans = [e for e in processor.exporter.events if e["name"] == "prepare"]  # type: ignore[attr-defined]
    exact = MessageCounter(TiktokenCounter())
    view = [Message.system("You are a coding agent."), Message.user(f"list the files {NONCE}")]
    assert spans[0]["data"]["tokens"] == sum(exact.count_message(m) for m in view)


class CountingTokenizer(HeldTokenizer):
    """A held o200k that notes every text it is asked to count (the encoder's work, whatever memo answers it)."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: list[str] = []

    def count(self, text: str) -> int:
        self.counted.append(text)
        return super().count(text)


@pytest.mark.parametrize("history", [30, 600])
def test_the_first_calls_figures_count_each_message_once_whatever_the_history(history: int) -> None:
    """Issue 22: the figures of the calls made before the tokenizer loaded counted the whole view again, per event.

    Each such call's two events (the estimate, the call span) counted its view with a counter of their own, on the
    telemetry thread: 2 x calls x history texts for what the manager counts once (0.8 s of that thread's CPU after a
    first call on 100,000 recorded messages). The events are built here only on the flush, with nothing else running.
    """
    tokenizer = CountingTokenizer()
    processor = BatchProcessor(InMemoryExporter(), schedule_delay_s=3_600)
    calls = 6
    try:
        cm = ContextManager("gpt-4o", store="memory", archive=False, telemetry=processor, session_id="first-figures",
                            counter=MessageCounter(tokenizer, lazy=True), policy={"emergency_message_count": 10_000})
        cm.add([Message.user(f"note {n} of the history {NONCE}") for n in range(history)])
        for n in range(calls):
            cm.add(Message.user(f"a new question {n} {NONCE}"))
            cm.prepare()
        assert cm.counter.provisional and not tokenizer.counted  # (byte bounds so far: nothing encoded)
        assert processor.flush()
    finally:
        processor.shutdown()
    texts = [t for t in tokenizer.counted if NONCE in t]
    assert sorted(texts) == sorted(set(texts)), "a message of the history was counted more than once"
    assert len(texts) == history + calls
    spans = [e for e in processor.exporter.events if e["name"] == "prepare"]  # type: ignore[attr-defined]
    exact = MessageCounter(TiktokenCounter())
    first = [Message.user(f"note {n} of the history {NONCE}") for n in range(history)] + [
        Message.user(f"a new question 0 {NONCE}")]
    assert spans[0]["data"]["tokens"] == sum(exact.count_message(m) for m in first)
