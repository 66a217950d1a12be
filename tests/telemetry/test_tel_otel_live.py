"""Live OpenTelemetry spans: contextfold's spans are children of the caller's active span, in the caller's provider."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs the otel extra")

from _session import run_session, session_manager
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contextfold.exporters import telemetry_sink
from contextfold.exporters.otel import OtelTelemetry


@pytest.fixture
def memory() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    yield spans, provider
    provider.shutdown()


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def test_spans_are_children_of_the_callers_active_span(memory: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    exported, provider = memory
    id_generator, sampler, resource = provider.id_generator, provider.sampler, provider.resource
    processors = provider._active_span_processor._span_processors  # the SDK keeps them here; nothing public lists them
    global_provider = otel_trace.get_tracer_provider()
    agent = provider.get_tracer("my-agent")
    cm = session_manager(OtelTelemetry(tracer_provider=provider), session_id="otel-live")

    def agent_turn(i: int) -> AbstractContextManager[Any]:
        return agent.start_as_current_span(f"agent.turn {i}")

    run_session(cm, around_call=agent_turn)
    cm.close()

    spans = list(exported.get_finished_spans())
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    turns = [s for s in spans if s.name.startswith("agent.turn")]
    calls = [s for s in spans if s.name == "prepare"]
    assert len(turns) == len(calls) == 40
    # every model call's span is a child of the turn that was active when prepare() ran, in the same trace
    for turn in turns:
        (call,) = [c for c in _children(spans, turn) if c.name == "prepare"]
        assert call.context is not None and turn.context is not None
        assert call.context.trace_id == turn.context.trace_id
        assert call.attributes["gen_ai.conversation.id"] == "otel-live"  # type: ignore[index]
        assert call.attributes["gen_ai.request.model"] == "gpt-4o"  # type: ignore[index]
        # the estimate is a span event on the call, not a span of its own
        assert call.events[0].name == "compact.token_estimate"
        assert not {e.name for e in call.events} & {"prepare", "compact.soft", "compact.summarize"}  # spans stay spans
        assert call.events[0].attributes["contextfold.usage_pct"] > 0  # type: ignore[index,operator]
    # compaction nests under the call, and summarization under the compaction, with GenAI names
    summaries = [s for s in spans if s.name == "compact.summarize"]
    assert summaries
    for summarize in summaries:
        assert summarize.parent is not None
        compaction = by_id[summarize.parent.span_id]
        assert compaction.name in ("compact.soft", "compact.hard") and compaction.parent is not None
        assert by_id[compaction.parent.span_id].name == "prepare"
        assert summarize.attributes["gen_ai.operation.name"] == "chat"  # type: ignore[index]
        assert summarize.attributes["gen_ai.request.model"] == "extractive"  # type: ignore[index]
        assert summarize.attributes["gen_ai.usage.output_tokens"] > 0  # type: ignore[index,operator]
        assert summarize.end_time > summarize.start_time  # type: ignore[operator]
        # a summary is created where the compaction was applied; an automatic soft one that would save too little
        # is declined after summarizing, and says so
        applied = compaction.attributes["contextfold.applied"]  # type: ignore[index]
        assert ("compact.summary_created" in [e.name for e in compaction.events]) is applied
    assert any(by_id[s.parent.span_id].attributes["contextfold.applied"] for s in summaries)  # type: ignore[index,union-attr]
    # the caller's provider is unchanged: same id generator, sampler, resource and processors; global untouched
    assert provider.id_generator is id_generator and provider.sampler is sampler and provider.resource is resource
    assert provider._active_span_processor._span_processors == processors
    assert otel_trace.get_tracer_provider() is global_provider
    # and after the session the caller's context is its own again
    assert not otel_trace.get_current_span().get_span_context().is_valid


def test_without_an_active_span_a_session_is_one_trace(memory: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    exported, provider = memory
    cm = session_manager(OtelTelemetry(tracer_provider=provider), session_id="otel-alone")
    run_session(cm)
    cm.close()
    spans = list(exported.get_finished_spans())
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    calls = [s for s in spans if s.name == "prepare"]
    assert calls and all(c.parent is not None and c.parent.is_remote for c in calls)


def test_the_otel_name_gives_the_live_sink_through_the_global_provider() -> None:
    sink = telemetry_sink("otel")
    assert isinstance(sink, OtelTelemetry)
    assert sink.provider is otel_trace.get_tracer_provider()


def test_two_live_sinks_give_the_callers_context_back(memory: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    # Each live sink makes its span the current one when it opens and restores the context before it when it
    # closes; restoring is only right in the reverse order of opening. Two sinks closing in their list order left
    # the first sink's span current in the caller's thread for good (every later span of the process its child).
    exported, provider = memory
    other = InMemorySpanExporter()
    other_provider = TracerProvider()
    other_provider.add_span_processor(SimpleSpanProcessor(other))
    cm = session_manager([OtelTelemetry(tracer_provider=provider), OtelTelemetry(tracer_provider=other_provider)],
                         session_id="otel-two-sinks")
    run_session(cm)
    cm.close()
    other_provider.shutdown()
    assert not otel_trace.get_current_span().get_span_context().is_valid
    archives = [s for s in exported.get_finished_spans() if s.name == "compact.archive"]
    assert archives and len(archives) == len([s for s in other.get_finished_spans() if s.name == "compact.archive"])
    # and each sink's spans have their own sink's parents: no span of one provider under the other's
    for spans in (list(exported.get_finished_spans()), list(other.get_finished_spans())):
        ids = {s.context.span_id for s in spans if s.context is not None}
        assert all(s.parent is None or s.parent.is_remote or s.parent.span_id in ids for s in spans)
