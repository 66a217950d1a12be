"""OpenTelemetry: contextfold's spans as OTel spans, with GenAI semantic-convention attribute names where they exist.

Two ways in, both through a tracer provider that is used as it is (never reconfigured: its id generator, sampler
and processors stay the caller's):

- :class:`OtelTelemetry`, a live telemetry sink: a contextfold span (a model call's ``prepare``, ``compact.*``,
  ``compact.summarize``) starts an OTel span when it opens, as a child of whatever span is active in the caller's
  context (an Agents SDK turn, a LangChain run, a Logfire span), and is made the active span while it runs;
  instant events become span events on the span they happened in. This is what ``telemetry="otel"`` gives.
- :class:`OtelExporter`, a batch exporter for recorded event dicts (a replay, an archived ``events.jsonl``):
  spans are recorded parents first, so children link to their real parents.

Spans carry ``gen_ai.conversation.id`` (the session); a summarization is a ``chat`` operation with
``gen_ai.request.model`` and ``gen_ai.usage.input_tokens`` / ``output_tokens``; provider usage records the same
usage keys. Keys are written as string literals rather than imported from ``opentelemetry-semantic-conventions``,
whose GenAI names are still incubating and move between releases. Every figure also goes in a
``contextfold.<field>`` attribute. Needs the ``otel`` extra: ``pip install 'contextfold[otel]'``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import MissingExtra
from ..telemetry._session_redaction import SessionRedaction, redacted_event
from .base import BaseExporter, Batch

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("OpenTelemetry exporter", "otel", module=exc.name) from exc

__all__ = ["DEFAULT_OTLP_ENDPOINT", "MAX_ATTRIBUTE_CHARS", "OtelExporter", "OtelTelemetry", "event_attributes"]

_log = logging.getLogger(__name__)

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
    # a summarization span names the summarizer that answered (extractive, openai:gpt-4o-mini, ...)
    "summarizer": "gen_ai.request.model",
}
# contextfold span name -> the GenAI operation it is (only work that calls a model is one).
_GENAI_OPERATIONS: Mapping[str, str] = {"compact.summarize": "chat"}
# Open live spans remembered at most (a span that never closes must not grow memory without bound).
_MAX_OPEN_SPANS = 10_000
# The OTel spans live sinks made current. Another sink's span is not the caller's active span: with two live sinks
# (two providers), the second's spans would otherwise hang under the first's, a parent its backend never receives.
_MADE_CURRENT_BY_A_SINK: weakref.WeakSet[Any] = weakref.WeakSet()
# Recorded span contexts the batch exporter remembers to parent late children under.
_MAX_RECORDED = 50_000
# Events waiting for their parent in the batch exporter, at most; beyond it the oldest are recorded as roots.
_MAX_WAITING = 50_000
_SESSION_EVENT = "session.trace"


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
    attributes: dict[str, Any] = {"contextfold.event": name}
    if event.get("kind"):
        attributes["contextfold.kind"] = str(event["kind"])
    operation = _GENAI_OPERATIONS.get(name)
    if operation is not None:
        attributes["gen_ai.operation.name"] = operation
    if event.get("session_id"):
        attributes["gen_ai.conversation.id"] = str(event["session_id"])
    data = event.get("data") or {}
    for key, value in data.items():
        if value is None:
            continue
        genai = _GENAI_FROM_DATA.get(key)
        if genai is not None and genai not in attributes and isinstance(value, str | int | float):
            attributes[genai] = value
        attributes[f"contextfold.{key}"] = _attribute_value(value)
    return attributes


def _session_parent(trace_id: str) -> otel_context.Context:
    """A context whose (remote) parent is the session: spans under it share the session's trace id.

    The session itself is not a span in OTel (it has no single caller context); its id is derived from the trace
    id, as a span from another process would be referenced through a W3C ``traceparent``.
    """
    parent = otel_trace.SpanContext(
        trace_id=_id_int(trace_id, _TRACE_ID_HEX),
        span_id=_id_int("session:" + trace_id, _SPAN_ID_HEX),
        is_remote=True,
        trace_flags=otel_trace.TraceFlags(otel_trace.TraceFlags.SAMPLED),
    )
    return otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(parent), otel_context.Context())


def _set_status(span: otel_trace.Span, event: Mapping[str, Any]) -> None:
    if event.get("status") == "error":
        data = event.get("data") or {}
        description = data.get("message") or data.get("error") or data.get("reason")
        span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, str(description) if description else None))


def _own_provider(endpoint: str | None, service_name: str, headers: Mapping[str, str] | None) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    otlp = OTLPSpanExporter(endpoint=_traces_url(endpoint or DEFAULT_OTLP_ENDPOINT), headers=dict(headers or {}),
                            timeout=OTLP_TIMEOUT_S)
    provider.add_span_processor(BatchSpanProcessor(otlp))
    return provider


def _traces_url(endpoint: str) -> str:
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(_TRACES_PATH) else endpoint + _TRACES_PATH


class OtelTelemetry:
    """A live telemetry sink: contextfold's spans as OTel spans under the caller's active span, as they happen.

    Args:
        tracer_provider: the provider to record into, used as it is; None takes the global one
            (``opentelemetry.trace.get_tracer_provider()``) unless ``endpoint`` is given.
        endpoint: an OTLP/HTTP base URL: a provider of our own is built for it (and shut down with the sink).
        service_name: the ``service.name`` resource of a provider built here.
        headers: extra OTLP request headers for a provider built here.
        redact: applied to every event dict before its figures become attributes.

    Example::

        cm = ContextManager("gpt-4o", telemetry=OtelTelemetry(tracer_provider=provider))
        with provider.get_tracer("agent").start_as_current_span("turn"):
            cm.prepare()          # contextfold's "prepare" span is a child of "turn"
    """

    def __init__(
        self,
        *,
        tracer_provider: otel_trace.TracerProvider | None = None,
        endpoint: str | None = None,
        service_name: str = "contextfold",
        headers: Mapping[str, str] | None = None,
        redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._owned = tracer_provider is None and endpoint is not None
        if tracer_provider is None:
            tracer_provider = (_own_provider(endpoint, service_name, headers) if endpoint is not None
                               else otel_trace.get_tracer_provider())
        self.provider = tracer_provider
        self._tracer = tracer_provider.get_tracer(_SCOPE)
        self._redaction: SessionRedaction[Callable[[dict[str, Any]], dict[str, Any]]] = SessionRedaction(redact)
        self._lock = threading.Lock()
        # our span id -> (OTel span, the context token that made it current)
        self._open: OrderedDict[str, tuple[otel_trace.Span, object]] = OrderedDict()

    def redact_with(self, redact: Callable[[dict[str, Any]], dict[str, Any]], session_id: str | None = None) -> None:
        """Redact the events of ``session_id`` with ``redact`` (a manager gives its session's redactor).

        A sink shared by many sessions redacts each session's events with that session's redactor; the events of
        sessions that gave none go through the hook the sink was built with.
        """
        with self._lock:
            self._redaction.register(redact, session_id)

    def span_started(self, span: Any) -> None:
        """Start an OTel span for a contextfold span, under the span active now, and make it the active one."""
        with self._lock:
            parent = self._open.get(span.parent_id) if span.parent_id else None
        if parent is not None:
            context = otel_trace.set_span_in_context(parent[0])
        elif _callers_span_is_active():
            context = otel_context.get_current()  # the caller's active span is the parent
        else:
            context = _session_parent(span.trace_id)
        attributes = event_attributes({"name": span.name, "kind": span.kind, "session_id": "", "data": {}})
        started = self._tracer.start_span(span.name, context=context, attributes=attributes,
                                          start_time=_nanos_of(span.started_at))
        _MADE_CURRENT_BY_A_SINK.add(started)
        token = otel_context.attach(otel_trace.set_span_in_context(started))
        with self._lock:
            self._open[span.span_id] = (started, token)
            while len(self._open) > _MAX_OPEN_SPANS:
                self._open.popitem(last=False)

    def span_dropped(self, span: Any) -> None:
        """End the OTel span of a contextfold span that did nothing, marked as such."""
        with self._lock:
            entry = self._open.pop(span.span_id, None)
        if entry is not None:
            entry[0].set_attribute("contextfold.applied", False)
            self._detach(entry[1])
            entry[0].end()

    def emit(self, event: Any) -> None:
        """End the span an event closes, or record an instant event on the span it happened in."""
        record = event.to_dict()
        with self._lock:
            redact = self._redaction.for_session(record.get("session_id"))
        if redact is not None:
            record = redacted_event(redact, record)
        with self._lock:
            entry = self._open.pop(record["span_id"], None)
            parent = self._open.get(record.get("parent_id") or "") if entry is None else None
        if entry is not None:
            otel_span, token = entry
            otel_span.set_attributes(event_attributes(record))
            _set_status(otel_span, record)
            self._detach(token)
            otel_span.end(end_time=_nanos(record.get("ended_at")))
            return
        if record.get("name") == _SESSION_EVENT:
            return  # the session is the trace, not a span of its own (see _session_parent)
        if parent is not None:
            parent[0].add_event(str(record.get("name")), attributes=event_attributes(record),
                                timestamp=_nanos(record.get("started_at")))
            return
        # An instant event outside any contextfold span (a usage record, a check): a zero-length span of its own.
        context = (otel_context.get_current() if _callers_span_is_active()
                   else _session_parent(str(record.get("trace_id") or "")))
        start = _nanos(record.get("started_at"))
        instant = self._tracer.start_span(str(record.get("name")), context=context,
                                          attributes=event_attributes(record), start_time=start)
        _set_status(instant, record)
        instant.end(end_time=_nanos(record.get("ended_at")) or start)

    def flush(self, timeout: float | None = None) -> bool:
        """Flush the provider's span processors (OTel spans are already ended; this pushes them out)."""
        flush = getattr(self.provider, "force_flush", None)
        if callable(flush):
            return bool(flush(int(1000 * (timeout if timeout is not None else _FLUSH_TIMEOUT_MS / 1000))))
        return True

    def shutdown(self, timeout: float | None = None) -> bool:
        """Shut a provider built here down; flush a caller's provider (it stays the caller's to shut down)."""
        if self._owned:
            shutdown = getattr(self.provider, "shutdown", None)
            if callable(shutdown):
                shutdown()
            return True
        return self.flush(timeout)

    @staticmethod
    def _detach(token: object) -> None:
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        except Exception:
            # A span closed in another context than it opened in: the context is the caller's, leave it be.
            _log.debug("contextfold: OTel context token from another context", exc_info=True)


def _callers_span_is_active() -> bool:
    """Whether the active OTel span is the caller's (valid, and not one a live sink of ours made current)."""
    current = otel_trace.get_current_span()
    return current.get_span_context().is_valid and current not in _MADE_CURRENT_BY_A_SINK


def _nanos_of(moment: datetime) -> int:
    return ((moment - _EPOCH) // timedelta(microseconds=1)) * 1000


class OtelExporter(BaseExporter):
    """Records event dicts as OpenTelemetry spans, after the fact (a replay, an archived events file).

    A span is recorded once its parent has been (children close, and so arrive, before their parents), so every
    span links to its real parent; spans without a parent are children of the session (see
    :func:`_session_parent`), so that a session is one trace. The provider is used as it is.

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
            tracer_provider = _own_provider(endpoint, service_name, headers)
        self._provider = tracer_provider
        self._tracer = tracer_provider.get_tracer(_SCOPE)
        self._lock = threading.Lock()
        self._recorded: OrderedDict[str, otel_trace.SpanContext] = OrderedDict()
        self._waiting: OrderedDict[str, list[Mapping[str, Any]]] = OrderedDict()
        self._waiting_count = 0

    def export(self, batch: Batch) -> None:
        """Record the events whose parents are known (and those waiting on them), then flush a provider built here."""
        with self._lock:
            for event in batch:
                self._place(event)
        if self._owned:
            self._force_flush()

    def shutdown(self) -> None:
        """Record what still waits for a parent, then shut a provider built here down (flush a caller's)."""
        with self._lock:
            self._release_waiting()
        if self._owned:
            shutdown = getattr(self._provider, "shutdown", None)
            if callable(shutdown):
                shutdown()
        else:
            self._force_flush()

    def _place(self, event: Mapping[str, Any]) -> None:
        parent_id = str(event.get("parent_id") or "")
        if not parent_id or parent_id in self._recorded:
            self._record_tree(event)
            return
        self._waiting.setdefault(parent_id, []).append(event)
        self._waiting_count += 1
        while self._waiting_count > _MAX_WAITING:
            _, orphans = self._waiting.popitem(last=False)
            self._waiting_count -= len(orphans)
            for orphan in orphans:
                self._record_tree(orphan, orphaned=True)

    def _release_waiting(self) -> None:
        while self._waiting:
            _, orphans = self._waiting.popitem(last=False)
            self._waiting_count -= len(orphans)
            for orphan in orphans:
                self._record_tree(orphan, orphaned=True)

    def _record_tree(self, event: Mapping[str, Any], *, orphaned: bool = False) -> None:
        pending = [(event, orphaned)]
        while pending:
            current, lost = pending.pop()
            self._record(current, lost)
            children = self._waiting.pop(str(current.get("span_id") or ""), [])
            self._waiting_count -= len(children)
            pending.extend((child, False) for child in children)

    def _force_flush(self) -> None:
        flush = getattr(self._provider, "force_flush", None)
        if callable(flush):
            flush(_FLUSH_TIMEOUT_MS)

    def _record(self, event: Mapping[str, Any], orphaned: bool) -> None:
        name = str(event.get("name", "event"))
        if name == _SESSION_EVENT and not (event.get("data") or {}).get("finished"):
            return  # the finished trace event carries the whole session; the opening one adds nothing
        parent_id = str(event.get("parent_id") or "")
        parent = self._recorded.get(parent_id)
        if parent is not None:
            context = otel_trace.set_span_in_context(otel_trace.NonRecordingSpan(parent), otel_context.Context())
        else:
            context = _session_parent(str(event.get("trace_id") or ""))
        start = _nanos(event.get("started_at"))
        end = _nanos(event.get("ended_at")) or start
        attributes = event_attributes(event)
        attributes["contextfold.span_id"] = str(event.get("span_id"))
        if orphaned:
            attributes["contextfold.parent_id"] = parent_id  # its parent never arrived
        span = self._tracer.start_span(name, context=context, attributes=attributes, start_time=start)
        _set_status(span, event)
        span.end(end_time=end)
        if event.get("span_id"):
            self._recorded[str(event["span_id"])] = span.get_span_context()
            while len(self._recorded) > _MAX_RECORDED:
                self._recorded.popitem(last=False)
