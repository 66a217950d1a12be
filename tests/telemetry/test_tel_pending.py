"""Events built on the exporting thread (``emit_later``): the same events, in order, whatever the caller does later."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from contextfold.exporters.base import InMemoryExporter
from contextfold.telemetry import (
    BatchProcessor,
    CacheDecision,
    CacheMasked,
    FanoutTelemetry,
    RecordingTelemetry,
    TokenEstimate,
    Tracer,
    TriggerDecision,
)
from contextfold.telemetry.events import PendingEvent, SpanEvent


@pytest.fixture
def processor() -> Iterator[BatchProcessor]:
    made = BatchProcessor(InMemoryExporter())
    yield made
    made.shutdown()


def _tracer(telemetry: object) -> Tracer:
    ticks = itertools.count()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = (f"{n:016x}" for n in itertools.count(1))
    return Tracer("s-pending", telemetry,  # type: ignore[arg-type]
                  clock=lambda: start + timedelta(seconds=next(ticks)), ids=lambda: next(ids))


def _emit_turn(tracer: Tracer, policy: dict[str, object]) -> None:
    with tracer.span("compact.call", kind="llm.call", call=1) as span:
        tracer.emit_new(TokenEstimate, messages=10, tools_schema=0, system=3, developer=0, model="m")
        tracer.emit_new(TriggerDecision, triggered=True, action="mask", reason="r", tokens=9, threshold_tokens=8,
                        policy=policy)
        tracer.emit_new(TriggerDecision, triggered=False, action="none", reason="quiet", tokens=1)
        tracer.emit_new(CacheMasked, count=2, refs=("tout_a", "tout_b"), tokens_freed=5)
        span.set(tokens=12)


def test_events_built_later_are_the_events_built_at_once(processor: BatchProcessor) -> None:
    # The same calls to a sink that builds at once (the events are the reference) and to the processor.
    recorded = RecordingTelemetry()
    _emit_turn(_tracer(recorded), {"soft": 1})
    _emit_turn(_tracer(FanoutTelemetry([processor])), {"soft": 1})
    assert processor.flush()
    exported = processor.exporter.events  # type: ignore[attr-defined]
    assert exported == [e.to_dict() for e in recorded.events]
    # (the no-op decision is folded on the span in both, never sent)
    assert [e["name"] for e in exported] == ["compact.token_estimate", "compact.trigger_decision",
                                             "cache.masked", "compact.call"]
    assert exported[-1]["data"] == {"call": 1, "noop_decisions": 1, "tokens": 12}


def test_what_the_caller_changes_after_emitting_is_not_in_the_event() -> None:
    # (an hour's batch delay: nothing is built before flush(), after the changes below)
    processor = BatchProcessor(InMemoryExporter(), schedule_delay_s=3600)
    policy: dict[str, object] = {"soft": 1, "nested": {"hard": 2}}
    tracer = _tracer(FanoutTelemetry([processor]))
    _emit_turn(tracer, policy)
    policy["soft"] = 99
    policy["nested"]["hard"] = 99  # type: ignore[index]
    assert processor.stats().exported == 0
    assert processor.flush()
    processor.shutdown()
    decision = next(e for e in processor.exporter.events if e["name"] == "compact.trigger_decision")  # type: ignore[attr-defined]
    assert decision["data"]["policy"] == {"soft": 1, "nested": {"hard": 2}}


def test_a_fanout_builds_once_for_the_sinks_that_do_not_build_later(processor: BatchProcessor) -> None:
    recorded = RecordingTelemetry()
    tracer = _tracer(FanoutTelemetry([recorded, processor]))
    _emit_turn(tracer, {"soft": 1})
    assert processor.flush()
    assert all(not isinstance(e, PendingEvent) for e in recorded.events)
    assert [e.name for e in recorded.events] == ["compact.token_estimate", "compact.trigger_decision",
                                                 "cache.masked", "compact.call"]
    assert isinstance(recorded.events[-1], SpanEvent)
    assert processor.exporter.events == [e.to_dict() for e in recorded.events]  # type: ignore[attr-defined]


def test_an_event_that_does_not_build_is_counted_as_failed(processor: BatchProcessor) -> None:
    processor.emit_later(PendingEvent(TokenEstimate, {"session_id": "s", "status": "neither"}))
    processor.emit_later(PendingEvent(CacheMasked, {"session_id": "s", "count": 1}))
    assert processor.flush()
    assert [e["name"] for e in processor.exporter.events] == ["cache.masked"]  # type: ignore[attr-defined]
    stats = processor.stats()
    assert (stats.accepted, stats.exported, stats.failed, stats.dropped, stats.in_flight) == (2, 1, 1, 0, 0)


def _emit_deferred(tracer: Tracer, made_on: list[int]) -> None:
    def reason() -> dict[str, object]:
        made_on.append(threading.get_ident())
        return {"reason": "mask: deferred r8x4w", "expected_saving": 12.5, "pricing": "claude-sonnet-4"}

    with tracer.span("compact.call", kind="llm.call", call=2):
        tracer.emit_deferred(CacheDecision, reason, action="mask", applied=False, tokens=9, tokens_freed=4)


def test_fields_made_later_are_those_made_at_once(processor: BatchProcessor) -> None:
    at_once: list[int] = []
    later: list[int] = []
    recorded = RecordingTelemetry()
    _emit_deferred(_tracer(recorded), at_once)
    _emit_deferred(_tracer(FanoutTelemetry([processor])), later)
    assert processor.flush()
    assert processor.exporter.events == [e.to_dict() for e in recorded.events]  # type: ignore[attr-defined]
    # (made where the event is built: by a sink without ``emit_later`` at once, by the processor on its thread)
    assert at_once == [threading.get_ident()] and len(later) == 1 and later != at_once
    assert processor.exporter.events[0]["data"]["reason"] == "mask: deferred r8x4w"  # type: ignore[attr-defined]
