"""Export events as OpenTelemetry spans with GenAI semantic-convention attributes.

Each event becomes one span named after the event, with the event's own trace id, span id, parent id and
times, so a session reads as one trace in any OTel backend. Attribute keys are written as string literals
(``gen_ai.conversation.id``, ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``, …) rather than imported
from ``opentelemetry-semantic-conventions``, whose GenAI names are still marked incubating and move between
releases. The event's figures go in ``contextfold.*`` attributes.

Pass your own ``TracerProvider``, or an OTLP/HTTP ``endpoint`` and the exporter builds one.
Needs the ``otel`` extra: ``pip install 'contextfold[otel]'``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import MissingExtra
from .base import BaseExporter, Batch

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("OpenTelemetry exporter", "otel", module=exc.name) from exc

__all__ = ["DEFAULT_OTLP_ENDPOINT", "MAX_ATTRIBUTE_CHARS", "OtelExporter", "event_attributes"]

# The OTLP/HTTP port a local collector listens on.
DEFAULT_OTLP_ENDPOINT = "http://localhost:4318"
_TRACES_PATH = "/v1/traces"
# Seconds an OTLP request may take; it runs on the telemetry thread, never the agent's, and stays under the
# processor's flush patience so that shutdown() can still finish.
OTLP_TIMEOUT_S = 2.0
# Milliseconds force_flush() may wait for the SDK's span processor after each batch (same reasoning).
_FLUSH_TIMEOUT_MS = 3000
# Backends commonly cap attribute values at a few KB; a summary's text is cut here instead of by them.
MAX_ATTRIBUTE_CHARS = 8192
_TRACE_ID_HEX = 32
_SPAN_ID_HEX = 16
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SCOPE = "contextfold.exporters.otel"

# event data key -> GenAI attribute it also fills.
_GENAI_FROM_DATA: Mapping[str, str] = {
    "model": "gen_ai.request.model",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "summary_tokens": "gen_ai.usage.output_tokens",
    "provider": "gen_ai.provider.name",
}


def _id_int(value: str, hex_digits: int) -> int:
    """Our ids are W3C hex already; anything else (a custom id source) is hashed to the right width."""
    if len(value) == hex_digits:
        try:
            number = int(value, 16)
        except ValueError:
            pass
        else:
            if number:
                return number
    return int(hashlib.sha256(value.encode()).hexdigest()[:hex_digits], 16) or 1


def _nanos(text: str | None) -> int | None:
    if not text:
        return None
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    # Integer arithmetic: a float timestamp * 1e9 would lose the microseconds.
    return ((moment - _EPOCH) // timedelta(microseconds=1)) * 1000


def _attribute_value(value: Any) -> Any:
    """An OTel attribute value: scalars as they are, lists of one scalar type as lists, the rest as JSON."""
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value[:MAX_ATTRIBUTE_CHARS]
    if isinstance(value, Sequence) and value and len({type(v) for v in value}) == 1:
        first = value[0]
        if isinstance(first, bool | int | float | str):
            return [v[:MAX_ATTRIBUTE_CHARS] if isinstance(v, str) else v for v in value]
    return json.dumps(value, ensure_ascii=False, default=str)[:MAX_ATTRIBUTE_CHARS]


def event_attributes(event: Mapping[str, Any]) -> dict[str, Any]:
    """The span attributes of an event dict: GenAI keys plus ``contextfold.<field>`` for each figure."""
    name = str(event.get("name", "event"))
    attributes: dict[str, Any] = {"gen_ai.operation.name": name, "contextfold.event": name}
    if event.get("session_id"):
        attributes["gen_ai.conversation.id"] = str(event["session_id"])
    data = event.get("data") or {}
    for key, value in data.items():
        if value is None:
            continue
        genai = _GENAI_FROM_DATA.get(key)
        if genai is not None and genai not in attributes:
            attributes[genai] = value
        attributes[f"contextfold.{key}"] = _attribute_value(value)
    return attributes


class _PresetIds(IdGenerator):
    """Hands the SDK the ids we choose for the span being started, and random ones otherwise."""

    def __init__(self, fallback: IdGenerator) -> None:
        self._fallback = fallback
        self._local = threading.local()

    @contextmanager
    def preset(self, trace_id: int, span_id: int) -> Iterator[None]:
        self._local.ids = (trace_id, span_id)
        try:
            yield
        finally:
            self._local.ids = None

    def generate_trace_id(self) -> int:
        ids = getattr(self._local, "ids", None)
        return ids[0] if ids else self._fallback.generate_trace_id()

    def generate_span_id(self) -> int:
        ids = getattr(self._local, "ids", None)
        return ids[1] if ids else self._fallback.generate_span_id()


def _traces_url(endpoint: str) -> str:
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(_TRACES_PATH) else endpoint + _TRACES_PATH


class OtelExporter(BaseExporter):
    """Turns event dicts into OpenTelemetry spans.

    Args:
        tracer_provider: an SDK ``TracerProvider`` to record into; when None, one is built that sends OTLP/HTTP
            to ``endpoint`` and is shut down with the exporter.
        endpoint: the OTLP/HTTP base URL (``/v1/traces`` is appended unless present).
        service_name: the ``service.name`` resource of a provider built here.
        headers: extra OTLP request headers.

    Example::

        processor = BatchProcessor(OtelExporter(endpoint="http://collector:4318"))
    """

    def __init__(
        self,
        *,
        tracer_provider: otel_trace.TracerProvider | None = None,
        endpoint: str | None = None,
        service_name: str = "contextfold",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._owned = tracer_provider is None
        if tracer_provider is None:
            provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
            otlp = OTLPSpanExporter(
                endpoint=_traces_url(endpoint or DEFAULT_OTLP_ENDPOINT),
                headers=dict(headers or {}),
                timeout=OTLP_TIMEOUT_S,
            )
            provider.add_span_processor(BatchSpanProcessor(otlp))
            tracer_provider = provider
        self._provider = tracer_provider
        self._tracer = tracer_provider.get_tracer(_SCOPE)
        # The SDK tracer draws ids from its id_generator attribute; ours hands it the event's own ids, so that
        # span and parent ids in the backend are the ones in our events. Other tracers keep their generator.
        current = getattr(self._tracer, "id_generator", None)
        if isinstance(current, _PresetIds):
            self._ids: _PresetIds | None = current
        elif isinstance(current, IdGenerator):
            self._ids = _PresetIds(current)
            self._tracer.id_generator = self._ids  # type: ignore[attr-defined]
        else:
            self._ids = None

    def export(self, batch: Batch) -> None:
        """Record one span per event, then flush a provider built here."""
        for event in batch:
            self._record(event)
        if self._owned:
            self._force_flush()

    def shutdown(self) -> None:
        """Shut a provider built here down (flushing it); flush a caller's provider."""
        if self._owned:
            shutdown = getattr(self._provider, "shutdown", None)
            if callable(shutdown):
                shutdown()
        else:
            self._force_flush()

    def _force_flush(self) -> None:
        flush = getattr(self._provider, "force_flush", None)
        if callable(flush):
            flush(_FLUSH_TIMEOUT_MS)

    def _record(self, event: Mapping[str, Any]) -> None:
        trace_id = _id_int(str(event.get("trace_id") or ""), _TRACE_ID_HEX)
        span_id = _id_int(str(event.get("span_id") or ""), _SPAN_ID_HEX)
        # An empty context, not the current one: whatever span is active on this thread is not our parent.
        parent_ctx = otel_context.Context()
        if event.get("parent_id"):
            parent = otel_trace.SpanContext(
                trace_id=trace_id,
                span_id=_id_int(str(event["parent_id"]), _SPAN_ID_HEX),
                is_remote=True,
                trace_flags=otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED),
            )
            parent_ctx = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(parent), parent_ctx)
        start = _nanos(event.get("started_at"))
        end = _nanos(event.get("ended_at")) or start
        attributes = event_attributes(event)
        if self._ids is None:
            # A non-SDK provider picks its own ids; keep ours so the span can be matched with other exports.
            attributes["contextfold.trace_id"] = str(event.get("trace_id"))
            attributes["contextfold.span_id"] = str(event.get("span_id"))
        name = str(event.get("name", "event"))
        if self._ids is not None:
            with self._ids.preset(trace_id, span_id):
                span = self._tracer.start_span(name, context=parent_ctx, attributes=attributes, start_time=start)
        else:
            span = self._tracer.start_span(name, context=parent_ctx, attributes=attributes, start_time=start)
        if event.get("status") == "error":
            data = event.get("data") or {}
            description = data.get("message") or data.get("error") or data.get("reason")
            span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, str(description) if description else None))
        span.end(end_time=end)
