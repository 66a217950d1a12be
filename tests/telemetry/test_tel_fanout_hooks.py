"""A fanout looks its sinks' optional methods up once per list of sinks, and a sink put in the list gets the next
events (issue 22, eighteenth session, lane N: two look-ups per sink and event, on every prepare()). The count fails
on 08dd6b2."""

from __future__ import annotations

from _hook_sinks import LaterSink

from contextfold.telemetry import FanoutTelemetry, RecordingTelemetry, TokenEstimate, Tracer
from contextfold.telemetry.events import SpanEvent

_HOOKS = ("emit_later", "span_started")
NONCE = "f5n2hq"


def _call(tracer: Tracer, n: int) -> None:
    with tracer.span("prepare", kind="llm.call", call=n):
        tracer.emit_new(TokenEstimate, messages=n, tools_schema=0, system=0, developer=0, model=f"m-{NONCE}",
                        context_window=100)


def test_a_fanout_looks_hooks_up_once_per_list_of_sinks() -> None:
    later, recorded = LaterSink(), RecordingTelemetry()
    fanout = FanoutTelemetry([later, recorded])
    tracer = Tracer(f"s-{NONCE}", fanout)
    for n in range(5):
        _call(tracer, n)
    assert [p.cls for p in later.pending] == [TokenEstimate, SpanEvent] * 5
    assert later.started == ["prepare"] * 5
    assert [type(e) for e in recorded.events] == [TokenEstimate, SpanEvent] * 5
    assert all(later.looked_up[name] <= 1 for name in _HOOKS), later.looked_up  # (08dd6b2: 10 and 5)


def test_a_sink_put_in_the_list_gets_the_next_events() -> None:
    first, added = RecordingTelemetry(), LaterSink()
    fanout = FanoutTelemetry([first])
    tracer = Tracer(f"s-{NONCE}-b", fanout)
    _call(tracer, 0)
    fanout.sinks.append(added)
    _call(tracer, 1)
    fanout.sinks[0] = replaced = RecordingTelemetry()
    _call(tracer, 2)
    assert [e.attributes["call"] for e in first.of_type(SpanEvent)] == [0, 1]
    assert [p.fields["attributes"]["call"] for p in added.pending if p.cls is SpanEvent] == [1, 2]
    assert added.started == ["prepare", "prepare"]
    assert [e.attributes["call"] for e in replaced.of_type(SpanEvent)] == [2]


def test_a_sink_replaced_by_an_equal_one_gets_the_next_events() -> None:
    # review of lane N: the list was told changed by ``!=``, so an equal sink put in place of another (rebuilt from
    # the same settings) kept the old one's emit_later and span_started
    class ConfigSink(LaterSink):
        def __eq__(self, other: object) -> bool:
            return isinstance(other, ConfigSink)

        __hash__ = object.__hash__

    old = ConfigSink()
    fanout = FanoutTelemetry([old])
    tracer = Tracer(f"s-{NONCE}-eq", fanout)
    _call(tracer, 0)
    fanout.sinks[0] = new = ConfigSink()
    _call(tracer, 1)
    assert [p.fields["attributes"]["call"] for p in old.pending if p.cls is SpanEvent] == [0]
    assert [p.fields["attributes"]["call"] for p in new.pending if p.cls is SpanEvent] == [1]
    assert old.started == new.started == ["prepare"]
