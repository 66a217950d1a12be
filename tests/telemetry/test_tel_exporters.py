"""Console and JSONL exporters, the fan-out, and choosing an exporter by name."""

from __future__ import annotations

import io
import json
import multiprocessing
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from contextfold.errors import ConfigError
from contextfold.exporters import get_exporter
from contextfold.exporters.base import Batch, Exporter, FanoutExporter, InMemoryExporter
from contextfold.exporters.console import MAX_VALUE_CHARS, ConsoleExporter, format_event
from contextfold.exporters.jsonl import JsonlExporter
from contextfold.telemetry import BatchProcessor, CacheMasked, CompactWarning, SummaryCreated, Tracer, event_from_dict


def test_console_lines_are_readable_and_short() -> None:
    stream = io.StringIO()
    exporter = ConsoleExporter(stream)
    summary = SummaryCreated(
        strategy="extractive", input_messages=40, input_tokens=8000, summary_tokens=400, summary="line\n" * 500
    )
    exporter.export([summary.to_dict(), CacheMasked(count=2, refs=("r1", "r2"), session_id="s 1").to_dict()])
    first, second = stream.getvalue().splitlines()
    assert " compact.summary_created ok " in first
    assert "strategy=extractive" in first and "compression_ratio=0.05" in first and "times_smaller=20.0" in first
    assert "summary=" in first and "…" in first
    assert len(first) < 20 * MAX_VALUE_CHARS
    assert 'session="s 1"' in second and 'refs=["r1","r2"]' in second
    assert "model=" not in first  # None values are left out


def test_console_shows_durations_and_errors() -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    event = CompactWarning(message="x", status="error", started_at=start, ended_at=start + timedelta(milliseconds=40))
    line = format_event(event.to_dict())
    assert line.startswith("2025-01-01T00:00:00.000000Z compact.warning error 40ms ")


def test_jsonl_appends_one_event_per_line(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "events.jsonl"
    exporter = JsonlExporter(path)
    events = [CompactWarning(message=f"m{i}").to_dict() for i in range(5)]
    exporter.export(events[:2])
    exporter.export([])
    exporter.export(events[2:])
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == events
    assert [event_from_dict(json.loads(line)).to_dict() for line in lines] == events


def test_jsonl_keeps_unicode_and_newlines_inside_one_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    event = CompactWarning(message="naïve\nsecond line ✓").to_dict()
    JsonlExporter(path, fsync=True).export([event])
    (line,) = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(line) == event


def _append_from_process(path: str, worker: int, batches: int) -> None:
    exporter = JsonlExporter(path)
    for b in range(batches):
        exporter.export([CompactWarning(message=f"{worker}-{b}-{i}", code="x" * 2000).to_dict() for i in range(20)])


def test_jsonl_appends_from_several_processes_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_from_process, args=(str(path), w, 10)) for w in range(3)]
    for process in workers:
        process.start()
    threads = [threading.Thread(target=_append_from_process, args=(str(path), 10 + t, 10)) for t in range(2)]
    for thread in threads:
        thread.start()
    for process in workers:
        process.join()
    for thread in threads:
        thread.join()
    assert all(p.exitcode == 0 for p in workers)
    messages = [json.loads(line)["data"]["message"] for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(messages) == len(set(messages)) == 5 * 10 * 20


def test_fanout_sends_to_all_and_reports_the_first_failure() -> None:
    class Broken(InMemoryExporter):
        def export(self, batch: Batch) -> None:
            raise OSError("disk full")

    good = InMemoryExporter()
    fanout = FanoutExporter(Broken(), good)
    with pytest.raises(OSError, match="disk full"):
        fanout.export([CompactWarning(message="m").to_dict()])
    assert len(good.events) == 1
    fanout.shutdown()
    assert good.shut_down


def test_processor_to_jsonl_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    processor = BatchProcessor(get_exporter(str(path)))
    tracer = Tracer("sess", processor)
    with tracer.span("turn"):
        tracer.emit(CompactWarning(message="inside"))
    assert processor.shutdown()
    names = [json.loads(line)["name"] for line in path.read_text().splitlines()]
    assert names == ["compact.warning", "turn"]


@pytest.mark.parametrize(
    ("spec", "cls"),
    [
        ("console", ConsoleExporter),
        ("memory", InMemoryExporter),
        ("jsonl:/tmp/x/events.log", JsonlExporter),
        ("/tmp/x/events.jsonl", JsonlExporter),
    ],
)
def test_get_exporter_by_name(spec: str, cls: type) -> None:
    exporter = get_exporter(spec)
    assert isinstance(exporter, cls)
    assert isinstance(exporter, Exporter)


@pytest.mark.parametrize("spec", ["kafka", "jsonl:", "console:extra", ""])
def test_unknown_exporter_names_the_field(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        get_exporter(spec)
    assert info.value.field == "telemetry.exporter"


def test_unknown_attribute_of_the_package_is_an_attribute_error() -> None:
    import contextfold.exporters as exporters

    with pytest.raises(AttributeError):
        _ = exporters.KafkaExporter
