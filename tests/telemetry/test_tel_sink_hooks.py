"""The tracer looks a sink's optional methods up once per sink, and still sends each event where it did."""

from __future__ import annotations

from _hook_sinks import HOOKS, LaterSink

from contextfold.telemetry import CacheMasked, RecordingTelemetry, TokenEstimate, Tracer
from contextfold.telemetry.events import SpanEvent


def _turn(tracer: Tracer, nonce: str) -> None:
    with tracer.span("compact.call", kind="llm.call", nonce=nonce):
        tracer.emit_new(TokenEstimate, messages=1, tools_schema=0, system=0, developer=0, model=nonce,
                        context_window=10)
        with tracer.span("compact.mask") as mask:
            tracer.emit_new(CacheMasked, count=1, refs=(nonce,), tokens_freed=5, prefix_tokens_invalidated=9)
        with tracer.span("compact.nothing") as nothing:
            nothing.drop()
        mask.set(masked=1)


def test_optional_methods_are_looked_up_once_per_sink() -> None:
    sink = LaterSink()
    tracer = Tracer("s-hooks-7f3a", sink)  # type: ignore[arg-type]
    for n in range(5):
        _turn(tracer, f"hooks-7f3a-{n}")
    assert sink.started == ["compact.call", "compact.mask", "compact.nothing"] * 5
    assert sink.dropped == ["compact.nothing"] * 5
    assert [p.cls for p in sink.pending] == [TokenEstimate, CacheMasked, SpanEvent, SpanEvent] * 5
    assert all(sink.looked_up[name] <= 1 for name in HOOKS), sink.looked_up


def test_a_sink_put_in_place_gets_the_next_events() -> None:
    first, second = LaterSink(), RecordingTelemetry()
    tracer = Tracer("s-hooks-91c2", first)  # type: ignore[arg-type]
    _turn(tracer, "hooks-91c2-a")
    tracer.telemetry = second
    _turn(tracer, "hooks-91c2-b")
    assert len(first.pending) == 4
    assert [type(e) for e in second.events] == [TokenEstimate, CacheMasked, SpanEvent, SpanEvent]
    estimate = second.of_type(TokenEstimate)
    assert [e.model for e in estimate] == ["hooks-91c2-b"]


def test_a_span_sent_later_keeps_its_attributes_as_they_were_at_its_close() -> None:
    sink = LaterSink()
    tracer = Tracer("s-hooks-5d0e", sink)  # type: ignore[arg-type]
    with tracer.span("compact.mask", nonce="hooks-5d0e") as span:
        span.set(refs=["tout_1"], figures={"freed": 3})
    span.data["refs"].append("tout_2")
    span.data["figures"]["freed"] = 4
    span.data["late"] = True
    event = sink.pending[-1].build()
    assert isinstance(event, SpanEvent)
    assert dict(event.attributes) == {"nonce": "hooks-5d0e", "refs": ("tout_1",), "figures": {"freed": 3}}
