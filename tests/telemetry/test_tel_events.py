"""Typed events, their dict form, and the tracer that stamps ids and times."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from contextfold.telemetry import (
    COMMON_FIELDS,
    EVENT_TYPES,
    AddRolledBack,
    CacheDecision,
    CacheMasked,
    CacheTruncated,
    CompactError,
    CompactWarning,
    CustomEvent,
    Event,
    FixedClock,
    MediaEvicted,
    MessagesPruned,
    NullTelemetry,
    ProviderContextReport,
    ProviderItemDropped,
    RecordingTelemetry,
    RecoveryCircuitOpen,
    RecoveryGaveUp,
    RecoveryLimitLearned,
    RecoveryMediaLimit,
    RecoveryOverflow,
    RecoveryRetry,
    SequentialIds,
    SessionTrace,
    SpanEvent,
    SummaryCreated,
    Telemetry,
    TokenEstimate,
    Tracer,
    TriggerDecision,
    UsageRecorded,
    event_from_dict,
    parse_time,
    trace_id_for_session,
)

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def sample_events() -> list[Event]:
    return [
        TokenEstimate(system=10, developer=5, tools_schema=300, messages=9000, model="gpt-4o", context_window=128000),
        TriggerDecision(triggered=True, reason="over soft", action="summarize", tokens=110000, policy={"pct": 0.85}),
        SummaryCreated(strategy="extractive", input_messages=40, input_tokens=50000, summary_tokens=2000, summary="s"),
        MessagesPruned(count=3, ids=("m1", "m2", "m3"), kept={"recent": 10, "protected": 2}),
        CompactError(error_type="SummarizerError", message="empty", fallback="drop_oldest"),
        CompactWarning(message="redaction disabled", code="redaction_off"),
        CacheMasked(count=2, refs=("r1", "r2"), tokens_freed=4000, prefix_tokens_invalidated=12000),
        CacheDecision(action="mask", applied=False, reason="waits", pricing="claude-sonnet-4", ttl="1h", tokens=9000,
                      tokens_freed=1700, invalidated_tokens=9000, expected_saving=2300.0, invalidation_cost=8200.0,
                      horizon_turns=13.5, replaces_forced=True),
        CacheTruncated(ref="r9", bytes=1_000_000, kept_bytes=8000, tool_name="bash"),
        RecoveryOverflow(attempt=1, message="too long", prompt_tokens=130000, limit=128000, provider="openai"),
        RecoveryRetry(attempt=1, action="compact", tokens_before=130000, tokens_after=90000),
        RecoveryGaveUp(attempts=3, reason="stall guard"),
        RecoveryCircuitOpen(failures=5, reason="5 failures", reset_after_s=60.0),
        RecoveryLimitLearned(tokens=13_000, hard=13_000, window=15_300, previous=None, provider_limit=16_000),
        RecoveryMediaLimit(attempt=1, measure="items", message="Too much media: 0 document pages + 101 images > 100",
                           limit=100, sent=101, max_items=100, provider="anthropic"),
        MediaEvicted(count=26, bytes_before=9_000_000, bytes_after=6_700_000, items_before=101, items_after=75,
                     max_bytes=32_000_000, max_items=100),
        UsageRecorded(input_tokens=1200, output_tokens=80, model="gpt-4o", estimated_input_tokens=1180),
        CustomEvent(event="compact.prepare", attributes={"messages": 12}),
        SessionTrace(title="s1", metadata={"agent": "coder", "model": "gpt-4o"}, finished=True, noop_decisions=4),
        SpanEvent(event="prepare", span_kind="llm.call", attributes={"call": 1, "tokens": 900}),
        ProviderContextReport(api="anthropic", mode="both", cleared_tool_uses=3, cleared_input_tokens=5200,
                              compactions=1, context_tokens=41_000),
        ProviderItemDropped(format="openai_chat", count=2, kinds={"thinking": 2}, origins=("anthropic",),
                            ids=("s:1",)),
        AddRolledBack(ids=("m:5", "m:6"), voided=("0123456789abcdef",), error_type="KeyboardInterrupt"),
    ]


def test_every_issue_event_name_has_a_type() -> None:
    wanted = {
        "compact.token_estimate",
        "compact.trigger_decision",
        "compact.summary_created",
        "compact.pruned_messages",
        "compact.error",
        "compact.warning",
        "cache.masked",
        "cache.truncated",
        "compact.cache_decision",
        "recovery.overflow",
        "recovery.retry",
        "recovery.gave_up",
        "recovery.circuit_open",
        "recovery.limit_learned",
        "recovery.media_limit",
        "cache.media_evicted",
        "usage.recorded",
        "session.trace",
        "provider.context",
        "provider.item_dropped",
        "compact.add_rolled_back",
    }
    assert set(EVENT_TYPES) == wanted
    assert {type(e).NAME for e in sample_events()} >= wanted


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: e.name)
def test_to_dict_has_common_fields_and_is_json(event: Event) -> None:
    d = event.to_dict()
    assert set(d) == {"name", "kind", "data", *COMMON_FIELDS}
    assert d["name"] == event.name
    assert d["kind"] == (event.span_kind if isinstance(event, SpanEvent) else event.name.split(".")[0])
    assert d["status"] in ("ok", "error")
    assert parse_time(d["ended_at"]) >= parse_time(d["started_at"])
    assert d["started_at"].endswith("Z")
    assert json.loads(json.dumps(d)) == d
    assert not set(d["data"]) & set(COMMON_FIELDS)


@pytest.mark.parametrize("event", sample_events(), ids=lambda e: e.name)
def test_dict_round_trip(event: Event) -> None:
    again = event_from_dict(event.to_dict())
    assert type(again) is type(event)
    assert again.to_dict() == event.to_dict()


def test_derived_figures() -> None:
    estimate = TokenEstimate(system=1, developer=2, tools_schema=3, messages=4)
    assert estimate.total == 10
    assert estimate.to_dict()["data"]["total"] == 10
    # 004's names beside the flat fields: t_est, max_tokens and a nested breakdown.
    windowed = TokenEstimate(system=500, developer=200, tools_schema=1_500, messages=110_145, context_window=128_000)
    data = windowed.to_dict()["data"]
    assert (data["t_est"], data["max_tokens"], data["usage_pct"]) == (112_345, 128_000, 87.8)
    assert data["breakdown"] == {"system": 500, "developer": 200, "tools_schema": 1_500, "messages": 110_145}
    summary = SummaryCreated(strategy="x", input_messages=4, input_tokens=900, summary_tokens=100, summary="text")
    # 004: compression_ratio is the summary's share of its input; times_smaller reads the other way round.
    assert summary.to_dict()["data"]["compression_ratio"] == 0.1111
    assert summary.to_dict()["data"]["times_smaller"] == 9.0
    assert summary.to_dict()["data"]["summary"] == "text"
    empty = SummaryCreated(strategy="x", input_messages=4, input_tokens=900, summary_tokens=0)
    assert (empty.compression_ratio, empty.times_smaller) == (0.0, None)


def test_error_events_default_to_error_status() -> None:
    assert CompactError(error_type="X", message="m").status == "error"
    assert RecoveryGaveUp(attempts=3, reason="r").status == "error"
    assert RecoveryRetry(attempt=1, action="compact").status == "ok"


def test_events_are_frozen_and_their_containers_too() -> None:
    kept = {"recent": 3}
    event = MessagesPruned(count=1, ids=("a",), kept=kept)
    kept["recent"] = 99
    assert event.to_dict()["data"]["kept"] == {"recent": 3}
    with pytest.raises(AttributeError):
        event.count = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        event.kept["x"] = 1  # type: ignore[index]


def test_bad_status_is_named() -> None:
    with pytest.raises(ValueError, match=r"status.*'maybe'"):
        CompactWarning(message="m", status="maybe")  # type: ignore[arg-type]


def test_ended_before_started_is_named() -> None:
    with pytest.raises(ValueError, match=r"ended_at.*before started_at"):
        CompactWarning(message="m", started_at=T0, ended_at=T0 - timedelta(seconds=1))


def test_naive_time_is_named() -> None:
    with pytest.raises(ValueError, match=r"started_at.*timezone-aware"):
        CompactWarning(message="m", started_at=datetime(2025, 1, 1))


def test_from_dict_names_bad_fields() -> None:
    good = CompactWarning(message="m").to_dict()
    with pytest.raises(ValueError, match="span_id"):
        event_from_dict({**good, "span_id": None})
    with pytest.raises(ValueError, match="unknown field"):
        event_from_dict({**good, "data": {**good["data"], "surprise": 1}})
    with pytest.raises(ValueError, match="started_at"):
        event_from_dict({**good, "started_at": "yesterday"})
    unknown = event_from_dict({**good, "name": "my.event", "data": {"a": 1}})
    assert isinstance(unknown, CustomEvent)
    assert unknown.to_dict()["data"] == {"a": 1}


def test_tracer_is_deterministic_with_injected_clock_and_ids() -> None:
    def run() -> list[dict[str, Any]]:
        sink = RecordingTelemetry()
        tracer = Tracer("session-a", sink, clock=FixedClock(T0), ids=SequentialIds())
        with tracer.span("compact.prepare", turn=1) as span:
            tracer.emit(TokenEstimate(system=1, developer=0, tools_schema=2, messages=3))
            span.set(messages=5)
        return [e.to_dict() for e in sink.events]

    first, second = run(), run()
    assert first == second
    estimate, parent = first
    assert estimate["name"] == "compact.token_estimate"
    assert parent["name"] == "compact.prepare"
    assert parent["data"] == {"turn": 1, "messages": 5}
    assert estimate["parent_id"] == parent["span_id"] == "0000000000000001"
    assert estimate["span_id"] == "0000000000000002"
    assert parent["parent_id"] is None
    assert estimate["trace_id"] == parent["trace_id"] == trace_id_for_session("session-a")
    assert parse_time(parent["started_at"]) <= parse_time(estimate["started_at"])
    assert parse_time(estimate["ended_at"]) <= parse_time(parent["ended_at"])


def test_trace_id_is_one_per_session() -> None:
    a1 = Tracer("a").emit(CompactWarning(message="x"))
    a2 = Tracer("a").emit(CompactWarning(message="y"))
    b = Tracer("b").emit(CompactWarning(message="z"))
    assert a1.trace_id == a2.trace_id != b.trace_id
    assert len(a1.trace_id) == 32 and len(a1.span_id) == 16
    assert a1.span_id != a2.span_id


def test_span_records_failure_and_reraises() -> None:
    sink = RecordingTelemetry()
    tracer = Tracer("s", sink)
    with pytest.raises(KeyError), tracer.span("compact.run"):
        raise KeyError("boom")
    (event,) = sink.events
    assert event.status == "error"
    assert event.to_dict()["data"]["error_type"] == "KeyError"


def test_nested_spans_and_separate_tracers_do_not_mix() -> None:
    sink = RecordingTelemetry()
    one, other = Tracer("one", sink), Tracer("other", sink)
    with one.span("outer") as outer, one.span("inner") as inner:
        foreign = other.emit(CompactWarning(message="m"))
        mine = one.emit(CompactWarning(message="m"))
    assert inner.parent_id == outer.span_id
    assert mine.parent_id == inner.span_id
    assert foreign.parent_id is None


def test_clock_stepping_back_is_clamped_not_raised() -> None:
    readings = iter([T0, T0 - timedelta(seconds=5)])
    tracer = Tracer("s", clock=lambda: next(readings))
    event = tracer.emit(CompactWarning(message="m"), started_at=T0)
    assert event.ended_at == event.started_at == T0


def test_failing_sink_never_reaches_the_agent() -> None:
    class Broken:
        def emit(self, event: Event) -> None:
            raise RuntimeError("sink down")

    tracer = Tracer("s", Broken())
    tracer.emit(CompactWarning(message="m"))
    with tracer.span("x"):
        pass
    assert tracer.emit_failures == 2


def test_sinks_satisfy_the_protocol() -> None:
    assert isinstance(NullTelemetry(), Telemetry)
    assert isinstance(RecordingTelemetry(), Telemetry)
    sink = RecordingTelemetry()
    sink.emit(CompactWarning(message="a"))
    sink.emit(CacheMasked(count=1))
    assert sink.names() == ["compact.warning", "cache.masked"]
    assert len(sink.of_type(CacheMasked)) == 1
    sink.clear()
    assert len(sink) == 0


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=20))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(
    name=st.from_regex(r"[a-z]{1,8}\.[a-z_]{1,12}", fullmatch=True),
    attributes=st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=6),
    status=st.sampled_from(["ok", "error"]),
    offset_us=st.integers(0, 10**12),
    duration_us=st.integers(0, 10**9),
)
def test_custom_event_round_trip_property(
    name: str, attributes: dict[str, object], status: str, offset_us: int, duration_us: int
) -> None:
    assume(name not in EVENT_TYPES)
    start = T0 + timedelta(microseconds=offset_us)
    event = CustomEvent(
        event=name,
        attributes=attributes,
        status=status,  # type: ignore[arg-type]
        started_at=start,
        ended_at=start + timedelta(microseconds=duration_us),
    )
    d = event.to_dict()
    assert json.loads(json.dumps(d)) == d
    again = event_from_dict(d)
    assert again.to_dict() == d
    assert parse_time(d["ended_at"]) - parse_time(d["started_at"]) == timedelta(microseconds=duration_us)
