"""A model call's events reach a batching sink in one hand-over, as its span closes (issue 22).

Each event of a ``prepare()`` was handed to the archive's batch processor on its own (its lock, the queue's append,
the fan-out's loop): two per no-op call, six per masking turn, on the agent's thread. The tracer now holds the events
of a root span for a sink that takes batches and builds every event later, and hands them over with the span's own;
the records exported are the same, in the same order, and anything sent at once (a stamped event, a wake-up) first
sends what was held.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contextfold import _background
from contextfold.exporters.base import InMemoryExporter
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.telemetry import (
    BatchProcessor,
    CacheMasked,
    CompactWarning,
    FanoutTelemetry,
    RecordingTelemetry,
    TokenEstimate,
    Tracer,
)
from contextfold.telemetry.events import PendingEvent

NONCE = "call-batch-5c81d2"


class _CountingProcessor(BatchProcessor):
    """A batch processor counting the hand-overs it gets from the agent's side (each takes its lock once)."""

    handovers = 0

    def emit(self, event: Any) -> None:
        type(self).handovers += 1
        super().emit(event)

    def emit_later_many(self, pendings: Sequence[PendingEvent]) -> None:
        type(self).handovers += 1
        super().emit_later_many(pendings)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_CountingProcessor]]:
    # The manager's archive events go through the BatchProcessor contextfold.manager._build reads from the package.
    import contextfold.telemetry

    monkeypatch.setattr(contextfold.telemetry, "BatchProcessor", _CountingProcessor)
    _CountingProcessor.handovers = 0
    yield _CountingProcessor


def _tracer(telemetry: object) -> Tracer:
    ticks = itertools.count()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = (f"{n:016x}" for n in itertools.count(1))
    return Tracer(f"s-{NONCE}", telemetry,  # type: ignore[arg-type]
                  clock=lambda: start + timedelta(seconds=next(ticks)), ids=lambda: next(ids))


def test_a_no_op_prepare_hands_its_events_over_once(counted: type[_CountingProcessor]) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=1_000_000, store="memory", archive="memory",
                        session_id=f"noop-{NONCE}")
    cm.add([Message.system("agent"), Message.user(f"hello {NONCE}")])
    cm.prepare()
    for i in range(5):
        cm.add(Message.user(f"again {i} {NONCE}"))
        before = counted.handovers
        cm.prepare()
        assert counted.handovers - before == 1  # (two before: the token estimate, then the call's span)
    cm.close()


def test_a_masking_turn_hands_its_events_over_once(counted: type[_CountingProcessor]) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory",
                        session_id=f"mask-{NONCE}",
                        policy={"clear_at_least": 3_000, "keep_tool_io_pairs": 1, "cache_aware": True,
                                "tool_output_budget_tokens": 5_800},
                        tool_output={"max_message_tokens": 4_000})
    cm.add([Message.system("agent"), Message.user(f"fix the bug {NONCE}")])
    masking_turns = 0
    for i in range(16):
        call = ToolCall(f"c{i}", "str_replace_editor", json.dumps({"command": "view", "path": f"/repo/{i % 5}.py"}))
        body = "".join(f"{n:6}\tdef f_{n}_{i}_{NONCE}(): return {n * i}\n" for n in range(1, 120))
        cm.add([Message.assistant("look", (call,)), Message.tool(call.id, body)])
        maskings, before = cm.maskings, counted.handovers
        cm.prepare()
        if cm.maskings > maskings:
            masking_turns += 1
            assert counted.handovers - before == 1  # (six before: two spans, four events)
        _background.wait_idle()
    cm.close()
    assert masking_turns >= 2


def _turn(tracer: Tracer, *, warn: bool = False, wake: bool = False) -> None:
    with tracer.span("prepare", kind="llm.call", call=1) as span:
        tracer.emit_new(TokenEstimate, messages=10, tools_schema=0, system=3, developer=0, model=NONCE)
        with tracer.span("compact.mask", kind="cache") as mask:
            tracer.emit_new(CacheMasked, count=1, refs=(f"tout_{NONCE}",), tokens_freed=5)
            mask.set(masked=1)
        if warn:
            tracer.emit(CompactWarning(message=f"careful {NONCE}", code="compaction"))
        if wake:
            tracer.wake()
        with tracer.span("compact.nothing") as nothing:
            nothing.drop()
        span.set(tokens=12)


@pytest.mark.parametrize("warn", [False, True])
def test_held_events_are_exported_as_sent_at_once(warn: bool) -> None:
    recorded = RecordingTelemetry()  # (builds and keeps each event at once: the reference)
    _turn(_tracer(recorded), warn=warn)
    processor = BatchProcessor(InMemoryExporter(), schedule_delay_s=3600)
    _turn(_tracer(FanoutTelemetry([processor])), warn=warn)
    assert processor.flush()
    processor.shutdown()
    exported = processor.exporter.events  # type: ignore[attr-defined]
    assert exported == [e.to_dict() for e in recorded.events]
    names = ["compact.token_estimate", "cache.masked", "compact.mask", "prepare"]
    assert [e["name"] for e in exported] == ([*names[:3], "compact.warning", *names[3:]] if warn else names)


def test_a_wake_inside_the_call_exports_what_was_emitted_before_it() -> None:
    processor = BatchProcessor(InMemoryExporter(), schedule_delay_s=3600)
    tracer = _tracer(FanoutTelemetry([processor]))
    with tracer.span("prepare", kind="llm.call"):
        tracer.emit_new(TokenEstimate, messages=1, tools_schema=0, system=0, developer=0, model=NONCE)
        assert processor.stats().queued == 0  # held
        tracer.wake()  # (a compaction completed: what it emitted goes now, not with the call's span)
        assert processor.stats().accepted == 1
    assert processor.flush()
    processor.shutdown()
    assert [e["name"] for e in processor.exporter.events] == ["compact.token_estimate", "prepare"]  # type: ignore[attr-defined]


def test_a_sink_that_builds_at_once_gets_each_event_as_it_is_emitted() -> None:
    # A fan-out with a sink that builds at once (a live tracer, a test's recording): nothing is held.
    recorded = RecordingTelemetry()
    processor = BatchProcessor(InMemoryExporter(), schedule_delay_s=3600)
    tracer = _tracer(FanoutTelemetry([recorded, processor]))
    with tracer.span("prepare", kind="llm.call"):
        tracer.emit_new(TokenEstimate, messages=1, tools_schema=0, system=0, developer=0, model=NONCE)
        assert recorded.names() == ["compact.token_estimate"]
    processor.shutdown()


def test_a_full_queue_drops_and_counts_what_a_batch_brings_beyond_it() -> None:
    processor = BatchProcessor(InMemoryExporter(), max_queue=3, schedule_delay_s=3600)
    pendings = [PendingEvent(TokenEstimate, {"session_id": NONCE, "messages": n, "tools_schema": 0, "system": 0,
                                             "developer": 0}) for n in range(5)]
    processor.emit_later_many(pendings)
    stats = processor.stats()
    assert (stats.accepted, stats.dropped, stats.queued) == (3, 2, 3)
    assert processor.flush()
    processor.shutdown()
    assert [e["data"]["messages"] for e in processor.exporter.events] == [0, 1, 2]  # type: ignore[attr-defined]
