"""The Ariadne exporter against the real Ariadne server (vendored, started with ../shared/tools/ariadne-serve).

Events are read back from Ariadne's own SSE stream (``GET /events``): what arrives there is what Ariadne accepted,
validated with its own schemas, and what its web UI builds the trace tree from.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from _ariadne_server import AriadneServer, SseReader, start_ariadne
from _session import run_session, session_manager

from contextfold.cli import main
from contextfold.exporters.ariadne import AriadneExporter
from contextfold.telemetry import CustomEvent, RecordingTelemetry, parse_time, trace_id_for_session

pytestmark = pytest.mark.ariadne


@pytest.fixture(scope="module")
def ariadne() -> Iterator[AriadneServer]:
    server = start_ariadne()
    yield server
    server.stop()


def _duration_s(event: dict[str, Any]) -> float:
    return (parse_time(event["ended_at"]) - parse_time(event["started_at"])).total_seconds()


def test_a_session_arrives_whole_and_nested_with_durations(ariadne: AriadneServer) -> None:
    session_id = "ariadne-nested"
    trace_id = trace_id_for_session(session_id)
    stream = SseReader(ariadne.port, trace_id=trace_id).start()
    recording = RecordingTelemetry()
    cm = session_manager([recording, f"ariadne:{ariadne.url}"], session_id=session_id)
    processor = cm.tracer.telemetry.sinks[1]  # type: ignore[attr-defined]
    run_session(cm)
    # The session's events are exported before close(), whose flush keeps a 1 s deadline: under a loaded CI the
    # export of ~320 events outran it (66 aborted). Waiting here is on the flush's own event, not a sleep.
    assert processor.flush(timeout=60)
    cm.close()
    stats = processor.exporter.stats()
    emitted = recording.events
    received = stream.wait_for(lambda got: len(got) >= len(emitted) - 1)
    stream.stop()

    # every event accepted: counted as sent by us, and streamed back by Ariadne after its validation
    # (the session's opening trace event is kept back on purpose: Ariadne's UI would show the first one for good)
    assert stats.received_events == len(emitted) and stats.skipped_events == 1
    assert stats.sent_events == len(emitted) - 1
    assert (stats.dropped_events, stats.uncertain_events) == (0, 0)
    assert len(received) == stats.sent_events
    spans = {e["span_id"]: e for e in received if e["type"] == "span"}
    assert set(spans) == {e.span_id for e in emitted if e.name != "session.trace"}

    # the session is a trace event, named after the session, with its metadata; the last one has its end
    (final,) = [e for e in received if e["type"] == "trace"]
    assert final["name"] == session_id and final["group_id"] == "parser-fixer"
    assert final["metadata"]["agent"] == "parser-fixer" and final["metadata"]["model"] == "gpt-4o"
    assert final["metadata"]["context_window"] == "8000"
    assert int(final["metadata"]["noop_decisions"]) > 0
    assert _duration_s(final) > 0

    # nested as built: trace -> call (prepare) -> compaction -> summarize
    def parent(span: dict[str, Any]) -> dict[str, Any]:
        return spans[span["parent_id"]]

    summaries = [s for s in spans.values() if s["name"] == "compact.summarize"]
    assert summaries
    for summarize in summaries:
        compaction = parent(summarize)
        call = parent(compaction)
        assert compaction["name"] in ("compact.soft", "compact.hard") and compaction["kind"] == "compact"
        assert call["name"] == "prepare" and call["kind"] == "llm.call" and "parent_id" not in call
        assert summarize["kind"] == "summarize" and summarize["data"]["summarizer"] == "extractive"
        # durations > 0 where work happened
        assert _duration_s(summarize) > 0 and _duration_s(compaction) > 0 and _duration_s(call) > 0
        assert _duration_s(compaction) >= _duration_s(summarize)
    for name in ("compact.mask", "compact.archive"):
        worked = [s for s in spans.values() if s["name"] == name]
        assert worked and all(_duration_s(s) > 0 for s in worked), name
    assert all(parent(s)["name"] == "prepare" for s in spans.values() if s["name"] == "compact.mask")

    # instant events are zero-length children of the span they happened in, with the seed fields
    created = [s for s in spans.values() if s["name"] == "compact.summary_created"]
    # one per applied compaction (an automatic soft one that would save too little is declined after summarizing)
    applied = [s for s in summaries if parent(s)["data"]["applied"]]
    assert applied and sorted(parent(e)["span_id"] for e in created) == sorted(parent(s)["span_id"] for s in applied)
    for event in created:
        assert parent(event)["name"] in ("compact.soft", "compact.hard")
        assert {"strategy", "input_messages", "summary_tokens", "compression_ratio"} <= set(event["data"])
        assert event["started_at"] == event["ended_at"]
    pruned = [s for s in spans.values() if s["name"] == "compact.pruned_messages"]
    assert pruned and all({"pinned", "recent_turns", "tool_pairs"} <= set(p["data"]["kept"]) for p in pruned)
    assert all(p["data"]["pruned_count"] == len(p["data"]["ids"]) for p in pruned)
    estimates = [s for s in spans.values() if s["name"] == "compact.token_estimate"]
    assert len(estimates) == len([s for s in spans.values() if s["name"] == "prepare"])
    assert all(0 < e["data"]["usage_pct"] <= 100 and parent(e)["name"] == "prepare" for e in estimates)
    # no-op decisions are folded into the call spans, not sent
    folded = sum(s["data"].get("noop_decisions", 0) for s in spans.values() if s["name"] == "prepare")
    assert folded > 0
    assert not [s for s in spans.values() if s["name"] == "compact.trigger_decision" and not s["data"]["triggered"]]
    # Ariadne's Response tab shows data.output: the figures as text
    assert all(isinstance(s["data"]["output"], str) and s["data"]["output"] for s in spans.values())
    # times are UTC with a Z, as Ariadne requires
    assert all(s["started_at"].endswith("Z") and s["ended_at"].endswith("Z") for s in spans.values())


def test_offset_times_naive_times_dates_and_nan_are_accepted(ariadne: AriadneServer) -> None:
    good = CustomEvent(event="probe.good", attributes={"n": 1}, session_id="odd-values").to_dict()
    trace_id = good["trace_id"]
    stream = SseReader(ariadne.port, trace_id=trace_id).start()
    odd = [
        {**good, "span_id": "a" * 16,
         "started_at": "2025-06-01T14:00:00+02:00", "ended_at": "2025-06-01T14:00:01+02:00"},
        {**good, "span_id": "b" * 16, "started_at": "2025-06-01T12:00:00.5", "ended_at": "2025-06-01T12:00:00.75"},
        {**good, "span_id": "c" * 16, "started_at": "2025-06-01", "ended_at": "2025-06-01T00:00:02Z"},
        {**good, "span_id": "d" * 16,
         "data": {"ratio": math.nan, "ceiling": math.inf, "floor": -math.inf, "nested": {"x": [math.nan, 1.5]}}},
        {**good, "span_id": "e" * 16, "data": {"text": "half a pair \ud800 here"}},
        good,
    ]
    exporter = AriadneExporter(ariadne.url)
    exporter.export(odd)
    received = stream.wait_for(lambda got: len(got) >= len(odd))
    stream.stop()
    stats = exporter.stats()
    assert (stats.sent_events, stats.sent_requests, stats.dropped_events) == (len(odd), 1, 0)
    by_id = {e["span_id"]: e for e in received}
    assert set(by_id) == {e["span_id"] for e in odd}
    offset = by_id["a" * 16]
    assert (offset["started_at"], offset["ended_at"]) == ("2025-06-01T12:00:00.000000Z", "2025-06-01T12:00:01.000000Z")
    assert by_id["b" * 16]["started_at"] == "2025-06-01T12:00:00.500000Z"  # no zone: read as UTC
    assert by_id["c" * 16]["started_at"] == "2025-06-01T00:00:00.000000Z"  # a bare date: its midnight, UTC
    data = by_id["d" * 16]["data"]
    assert (data["ratio"], data["ceiling"], data["floor"]) == ("NaN", "Infinity", "-Infinity")
    assert data["nested"] == {"x": ["NaN", 1.5]}
    assert by_id["e" * 16]["data"]["text"] == "half a pair \ud800 here"
    assert all(datetime.fromisoformat(e["started_at"]).utcoffset().total_seconds() == 0  # type: ignore[union-attr]
               for e in received)


def test_replay_sends_a_recorded_session_to_ariadne(ariadne: AriadneServer) -> None:
    stream = SseReader(ariadne.port).start()
    assert main(["replay", "--demo", "--jobs", "1", "--telemetry", f"ariadne:{ariadne.url}"]) == 0
    received = stream.wait_for(lambda got: any(e["type"] == "trace" and "ended_at" in e for e in got))
    stream.stop()
    (trace,) = [e for e in received if e["type"] == "trace" and "ended_at" in e]
    spans = [e for e in received if e["type"] == "span" and e["trace_id"] == trace["trace_id"]]
    calls = [s for s in spans if s["name"] == "prepare"]
    assert calls and trace["metadata"]["model"] == "gpt-4o"
    assert any(s["name"] == "compact.summarize" for s in spans)
