"""OpenTelemetry export: the SDK's in-memory exporter, and OTLP/HTTP protobuf to a receiver on 127.0.0.1."""

from __future__ import annotations

import gzip
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="needs the otel extra")

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from contextfold.exporters import get_exporter
from contextfold.exporters.otel import MAX_ATTRIBUTE_CHARS, OtelExporter
from contextfold.telemetry import (
    BatchProcessor,
    CompactError,
    FixedClock,
    SequentialIds,
    SummaryCreated,
    TokenEstimate,
    Tracer,
    UsageRecorded,
)

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def emit_turn(tracer: Tracer) -> None:
    with tracer.span("compact.prepare", turn=3):
        tracer.emit(TokenEstimate(system=100, developer=0, tools_schema=400, messages=90_000, model="gpt-4o"))
        tracer.emit(
            SummaryCreated(
                strategy="llm",
                input_messages=40,
                input_tokens=80_000,
                summary_tokens=2_000,
                summary="s" * (MAX_ATTRIBUTE_CHARS * 2),
                model="gpt-4o-mini",
            )
        )
        tracer.emit(CompactError(error_type="SummarizerError", message="refused", fallback="drop_oldest"))
    tracer.emit(UsageRecorded(input_tokens=12_000, output_tokens=300, model="gpt-4o"))


@pytest.fixture
def memory() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    yield spans, provider
    provider.shutdown()


def test_recorded_events_keep_their_parents_times_and_genai_attributes(
    memory: tuple[InMemorySpanExporter, TracerProvider],
) -> None:
    spans, provider = memory
    id_generator, sampler = provider.id_generator, provider.sampler
    processor = BatchProcessor(OtelExporter(tracer_provider=provider))
    tracer = Tracer("conv-42", processor, clock=FixedClock(T0), ids=SequentialIds())
    emit_turn(tracer)
    assert processor.flush()
    processor.shutdown()

    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert set(by_name) == {
        "compact.prepare",
        "compact.token_estimate",
        "compact.summary_created",
        "compact.error",
        "usage.recorded",
    }
    trace_id = int(tracer.trace_id, 16)
    assert {s.context.trace_id for s in by_name.values()} == {trace_id}
    prepare = by_name["compact.prepare"]
    assert prepare.context is not None
    # the children closed (and were exported) before their parent, yet link to the span recorded for it
    for child in ("compact.token_estimate", "compact.summary_created", "compact.error"):
        parent = by_name[child].parent
        assert parent is not None and parent.span_id == prepare.context.span_id
    # spans with no contextfold parent hang under the session, a remote parent shared by the whole trace
    assert prepare.parent is not None and prepare.parent.is_remote
    usage_parent = by_name["usage.recorded"].parent
    assert usage_parent is not None and usage_parent.span_id == prepare.parent.span_id
    assert prepare.attributes["contextfold.span_id"] == "0000000000000001"  # type: ignore[index]
    # the caller's provider is used as it is
    assert provider.id_generator is id_generator and provider.sampler is sampler
    for span in by_name.values():
        assert span.start_time is not None and span.end_time is not None
        assert span.end_time >= span.start_time
    assert prepare.start_time == int(T0.timestamp()) * 10**9

    summary = by_name["compact.summary_created"].attributes
    assert summary is not None
    assert summary["gen_ai.conversation.id"] == "conv-42"
    assert "gen_ai.operation.name" not in summary  # an event, not a model call
    assert summary["gen_ai.request.model"] == "gpt-4o-mini"
    assert summary["gen_ai.usage.input_tokens"] == 80_000
    assert summary["gen_ai.usage.output_tokens"] == 2_000
    assert summary["contextfold.compression_ratio"] == 0.025
    assert len(str(summary["contextfold.summary"])) == MAX_ATTRIBUTE_CHARS

    usage = by_name["usage.recorded"].attributes
    assert usage is not None
    assert (usage["gen_ai.usage.input_tokens"], usage["gen_ai.usage.output_tokens"]) == (12_000, 300)
    assert by_name["compact.token_estimate"].attributes["contextfold.total"] == 90_500  # type: ignore[index]

    error = by_name["compact.error"]
    assert error.status.status_code is StatusCode.ERROR
    assert error.status.description == "refused"
    assert by_name["usage.recorded"].status.status_code is StatusCode.UNSET


def test_a_caller_provider_is_flushed_not_shut_down(memory: tuple[InMemorySpanExporter, TracerProvider]) -> None:
    spans, provider = memory
    exporter = OtelExporter(tracer_provider=provider)
    exporter.shutdown()
    provider.get_tracer("still-alive").start_span("after").end()
    assert [s.name for s in spans.get_finished_spans()] == ["after"]


class OtlpReceiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), OtlpHandler)
        self.lock = threading.Lock()
        self.requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []


class OtlpHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OtlpReceiver

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = trace_service_pb2.ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.server.lock:
            self.server.requests.append(request)
            self.server.paths.append(self.path)
            self.server.content_types.append(self.headers.get("Content-Type", ""))
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


@pytest.fixture
def otlp() -> Iterator[OtlpReceiver]:
    server = OtlpReceiver()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _attr(span: Any, key: str) -> Any:
    for kv in span.attributes:
        if kv.key == key:
            value = kv.value
            return getattr(value, value.WhichOneof("value"))
    raise KeyError(key)


def test_otlp_http_protobuf_reaches_a_loopback_receiver(otlp: OtlpReceiver) -> None:
    endpoint = f"http://127.0.0.1:{otlp.server_address[1]}"
    processor = BatchProcessor(get_exporter(f"otel:{endpoint}", service_name="agent-x"))
    tracer = Tracer("conv-7", processor)
    emit_turn(tracer)
    assert processor.flush()
    processor.shutdown()

    assert otlp.requests, "no OTLP request arrived"
    assert set(otlp.paths) == {"/v1/traces"}
    assert set(otlp.content_types) == {"application/x-protobuf"}
    spans = []
    services = set()
    for request in otlp.requests:
        for resource_spans in request.resource_spans:
            for kv in resource_spans.resource.attributes:
                if kv.key == "service.name":
                    services.add(kv.value.string_value)
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "contextfold.exporters.otel"
                spans.extend(scope_spans.spans)
    assert services == {"agent-x"}
    by_name = {s.name: s for s in spans}
    assert len(spans) == 5
    assert {s.trace_id.hex() for s in spans} == {tracer.trace_id}
    usage = by_name["usage.recorded"]
    assert _attr(usage, "gen_ai.conversation.id") == "conv-7"
    assert _attr(usage, "gen_ai.request.model") == "gpt-4o"
    assert _attr(usage, "gen_ai.usage.input_tokens") == 12_000
    assert _attr(usage, "gen_ai.usage.output_tokens") == 300
    assert _attr(usage, "contextfold.event") == "usage.recorded"
    estimate = by_name["compact.token_estimate"]
    assert _attr(estimate, "contextfold.tools_schema") == 400
    assert estimate.parent_span_id == by_name["compact.prepare"].span_id
    assert by_name["compact.error"].status.code == 2  # STATUS_CODE_ERROR
    for span in spans:
        assert span.end_time_unix_nano >= span.start_time_unix_nano > 0


def test_importing_exporters_does_not_load_opentelemetry() -> None:
    code = (
        "import sys, contextfold.exporters, contextfold.telemetry.processor, contextfold.telemetry.tracer; "
        "print(any(m.startswith('opentelemetry') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_missing_sdk_raises_missing_extra_naming_otel() -> None:
    # A meta-path finder that refuses every opentelemetry module, as if the extra were not installed.
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ModuleNotFoundError(name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from contextfold.errors import MissingExtra\n"
        "from contextfold.exporters import get_exporter\n"
        "try:\n"
        "    get_exporter('otel')\n"
        "except MissingExtra as exc:\n"
        "    print(exc.extra, '|', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out.startswith("otel |")
    assert "pip install 'contextfold[otel]'" in out
