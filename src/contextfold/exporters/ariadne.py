"""Export events to an Ariadne trace viewer: ``POST {url}/ingest`` with ``{"batch": [TraceEvent | SpanEvent, …]}``.

The session's finished :class:`~contextfold.telemetry.SessionTrace` (sent by ``finish()``) becomes Ariadne's
TraceEvent ``{"type": "trace", "trace_id", "name", "group_id", "started_at", "ended_at", "metadata": {str: str}}``
(the session's name, agent, model, window and policy, and its duration). The opening one is not sent: Ariadne's
web UI keeps the first trace event it received for a trace, so an opening event would leave the session "in
progress" for good; until ``finish()`` the spans are grouped under the trace id. Every other event becomes a
SpanEvent ``{"type": "span", "trace_id", "span_id", "parent_id"?, "kind", "name", "started_at", "ended_at",
"data", "status"}``. Ariadne validates strictly, so this module makes every event valid before it leaves: times
are rewritten as UTC with a ``Z`` (Ariadne rejects offsets, naive times and bare dates), NaN and infinities become
strings (JSON has no NaN; Ariadne answers HTTP 500), and the figures are repeated as readable text under
``data.output``, the key Ariadne's Response tab shows.

Bodies stay under 256 KB: batches are split, and a single oversized event has its data cut with a marker. If Ariadne
still rejects a body (HTTP 400), the body is halved until the event it objects to is found: that one event is
dropped and counted, the rest of its batch is delivered. Stdlib ``http.client`` only, one kept-alive connection.
Failures are counted on the exporter, never raised, and warned about at most once per
:data:`WARNING_INTERVAL_S`. :meth:`AriadneExporter.abort` ends a request stuck on a frozen server at once, so that
the processor's bounded flush can keep its deadline.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import math
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..telemetry import format_time
from .base import BaseExporter, Batch

__all__ = [
    "DEFAULT_URL",
    "MAX_BODY_BYTES",
    "MAX_TIMEOUT_S",
    "WARNING_INTERVAL_S",
    "AriadneExporter",
    "AriadneStats",
    "pack_bodies",
    "to_ariadne_event",
    "to_span_event",
]

_log = logging.getLogger(__name__)

# Where a locally running Ariadne listens by default.
DEFAULT_URL = "http://localhost:5175"
# Ariadne rejects request bodies over 256 KB.
MAX_BODY_BYTES = 256 * 1024
# Ariadne's contract: an exporter waits at most 2 s for it, so a slow viewer can only stall the export thread.
MAX_TIMEOUT_S = 2.0
# One warning per this many seconds at most: a viewer that is down would otherwise log once per batch (20 a second).
WARNING_INTERVAL_S = 30.0
# A data value larger than this is a payload (summary text, id lists), not a figure: it is what gets cut first
# when an event does not fit in one body.
_LARGE_VALUE_BYTES = 1024
# Room kept for the marker and JSON escaping when an event's data is cut to fit.
_TRUNCATION_SLACK_BYTES = 512
_TRUNCATION_MARKER = "…[truncated by contextfold: {size} bytes]"
_STATUSES = frozenset({"ok", "error"})
_ENVELOPE_HEAD = b'{"batch":['
_ENVELOPE_TAIL = b"]}"
# The name of the session's trace event (contextfold.telemetry.SessionTrace.NAME), spelled here to keep edges light.
_SESSION_EVENT = "session.trace"
# The data key Ariadne's Response tab renders as text.
OUTPUT_KEY = "output"
# A figure's value in the readable text is cut at this many characters (id lists run long).
_OUTPUT_VALUE_CHARS = 160
# The summary text shown under the figures in the readable text (the whole text stays in data.summary).
_OUTPUT_SUMMARY_CHARS = 1200


def _dumps(value: Any) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (text cut mid-pair, bytes decoded with surrogateescape) has no UTF-8 form; as a JSON
        # escape it is valid and arrives as it was.
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str, allow_nan=False).encode()


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by its name, keys as strings, and unknown objects as text."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if value is None or isinstance(value, str | int | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_finite(v) for v in value]
    return str(value)


def _utc_z(value: Any, key: str) -> str:
    """An ISO-8601 time as Ariadne accepts it: UTC with a ``Z``; naive times and bare dates are read as UTC."""
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            raise ValueError(f"{key}: {value!r} is not ISO-8601") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return format_time(moment)


def _readable(name: str, data: Mapping[str, Any]) -> str:
    """The figures of an event as lines of text, for Ariadne's Response tab."""
    lines = [name]
    for key, value in data.items():
        if key in ("summary", "session_id"):
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if len(text) > _OUTPUT_VALUE_CHARS:
            text = text[:_OUTPUT_VALUE_CHARS] + "…"
        lines.append(f"{key}: {text}")
    summary = data.get("summary")
    if isinstance(summary, str) and summary:
        cut = summary[:_OUTPUT_SUMMARY_CHARS] + ("…" if len(summary) > _OUTPUT_SUMMARY_CHARS else "")
        lines += ["", cut]
    return "\n".join(lines)


def to_trace_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """Map a ``session.trace`` event dict to Ariadne's TraceEvent (metadata values become strings).

    Raises:
        ValueError: naming the field when the event cannot be a valid TraceEvent.
    """
    trace_id = event.get("trace_id")
    if not isinstance(trace_id, str) or not trace_id:
        raise ValueError("trace_id: missing or empty")
    data = _finite(dict(event.get("data") or {}))
    metadata = {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                for k, v in (data.get("metadata") or {}).items()}
    if event.get("session_id"):
        metadata["session_id"] = str(event["session_id"])
    metadata["noop_decisions"] = str(data.get("noop_decisions", 0))
    trace: dict[str, Any] = {"type": "trace", "trace_id": trace_id,
                             "name": str(data.get("title") or event.get("session_id") or trace_id)}
    if metadata.get("agent"):
        trace["group_id"] = metadata["agent"]
    if event.get("started_at") is not None:
        trace["started_at"] = _utc_z(event["started_at"], "started_at")
    if data.get("finished") and event.get("ended_at") is not None:
        trace["ended_at"] = _utc_z(event["ended_at"], "ended_at")
        if trace.get("started_at") and trace["ended_at"] < trace["started_at"]:
            raise ValueError("ended_at: before started_at")
    trace["metadata"] = metadata
    return trace


def to_ariadne_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """Map an event dict to the Ariadne event it becomes: a TraceEvent for the session, a SpanEvent otherwise.

    Raises:
        ValueError: naming the field when the event cannot be made valid.
    """
    if event.get("name") == _SESSION_EVENT:
        return to_trace_event(event)
    return to_span_event(event)


def to_span_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """Map an event dict to an Ariadne SpanEvent.

    Raises:
        ValueError: naming the field when the event cannot be a valid SpanEvent (missing ids, unknown status,
            a time that is not ISO-8601, or ended before started).
    """
    span: dict[str, Any] = {"type": "span"}
    for key in ("trace_id", "span_id"):
        value = event.get(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"{key}: missing or empty")
        span[key] = value
    if event.get("parent_id"):
        span["parent_id"] = str(event["parent_id"])
    for key in ("kind", "name"):
        if event.get(key):
            span[key] = str(event[key])
    for key in ("started_at", "ended_at"):
        value = event.get(key)
        if value is not None:
            span[key] = _utc_z(value, key)
    # Both are UTC with the same precision now, so the strings compare as the times do.
    if "started_at" in span and "ended_at" in span and span["ended_at"] < span["started_at"]:
        raise ValueError("ended_at: before started_at")
    status = event.get("status")
    if status is not None:
        if status not in _STATUSES:
            raise ValueError(f"status: {status!r} is not 'ok' or 'error'")
        span["status"] = status
    raw = event.get("data") or {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"data: expected an object, got {type(raw).__name__}")
    data = _finite(dict(raw))
    if event.get("session_id") and "session_id" not in data:
        # Ariadne groups by trace; keeping the session id in data lets a viewer search by it.
        data["session_id"] = str(event["session_id"])
    data.setdefault(OUTPUT_KEY, _readable(str(event.get("name") or "event"), data))
    span["data"] = data
    return span


def _cut(value: Any, keep_bytes: int) -> str:
    text = value if isinstance(value, str) else _dumps(value).decode("utf-8")
    raw = text.encode("utf-8")
    head = raw[: max(keep_bytes, 0)].decode("utf-8", errors="ignore")
    return head + _TRUNCATION_MARKER.format(size=len(raw))


def _fit(span: dict[str, Any], budget: int) -> tuple[dict[str, Any], bytes] | None:
    """Cut ``span``'s data until it encodes within ``budget`` bytes; None when even empty data is too big."""
    data: dict[str, Any] = span.get("data") or {}
    bare = {**span, "data": {"_truncated": True}}
    room = budget - len(_dumps(bare)) - _TRUNCATION_SLACK_BYTES
    if room < 0:
        return None
    sizes = {key: len(_dumps(value)) for key, value in data.items()}
    small = {k: v for k, v in data.items() if sizes[k] <= _LARGE_VALUE_BYTES}
    large = [k for k in data if sizes[k] > _LARGE_VALUE_BYTES]
    # First try: keep every figure, share what is left among the payloads.
    share_room = room - len(_dumps(small))
    if share_room > 0:
        share = share_room // max(len(large), 1)
        # Every large value carries a marker and JSON escaping can double its text; halve to stay inside.
        cut = {**small, **{k: _cut(data[k], share // 2 - len(_TRUNCATION_MARKER)) for k in large}, "_truncated": True}
        candidate = {**span, "data": cut}
        encoded = _dumps(candidate)
        if len(encoded) <= budget:
            return candidate, encoded
    # Too many figures: keep a preview of the whole data.
    preview = {"_truncated": True, "preview": _cut(data, room // 2)}
    candidate = {**span, "data": preview}
    encoded = _dumps(candidate)
    return (candidate, encoded) if len(encoded) <= budget else None


def _pack(spans: list[dict[str, Any]], max_body_bytes: int) -> Iterator[tuple[list[bytes], int]]:
    """Yield ``(encoded events, truncated)`` groups whose envelope stays within ``max_body_bytes``, in order."""
    envelope = len(_ENVELOPE_HEAD) + len(_ENVELOPE_TAIL)
    per_event_budget = max_body_bytes - envelope
    parts: list[bytes] = []
    size = envelope
    truncated = 0
    for span in spans:
        encoded = _dumps(span)
        cut = False
        if len(encoded) > per_event_budget:
            fitted = _fit(span, per_event_budget)
            if fitted is None:
                _log.warning("Ariadne exporter: event %s too large even without data; skipped", span.get("name"))
                continue
            encoded, cut = fitted[1], True
        extra = len(encoded) + (1 if parts else 0)
        if parts and size + extra > max_body_bytes:
            yield parts, truncated
            parts, size, truncated = [], envelope, 0
            extra = len(encoded)
        parts.append(encoded)
        size += extra
        truncated += int(cut)
    if parts:
        yield parts, truncated


def _body(parts: list[bytes]) -> bytes:
    return _ENVELOPE_HEAD + b",".join(parts) + _ENVELOPE_TAIL


def pack_bodies(spans: list[dict[str, Any]], max_body_bytes: int = MAX_BODY_BYTES) -> Iterator[tuple[bytes, int, int]]:
    """Yield ``(body, events, truncated)`` request bodies, each at most ``max_body_bytes``, in order.

    An event that alone exceeds the limit has its data cut with a marker; one that cannot fit even so is skipped.
    """
    for parts, truncated in _pack(spans, max_body_bytes):
        yield _body(parts), len(parts), truncated


@dataclass(frozen=True, slots=True)
class AriadneStats:
    """What the exporter did with every event it was given.

    The outcomes add up: ``received_events`` = sent + dropped + uncertain + skipped.

    Attributes:
        received_events: events handed to ``export()``.
        sent_events: events in requests Ariadne answered with 2xx.
        sent_requests: requests answered with 2xx.
        failed_events: events not delivered: the request failed before it was sent, or Ariadne answered 5xx.
        failed_requests: requests that failed so.
        invalid_events: events that could not be made valid (missing ids, …); never sent.
        rejected_events: events Ariadne refused alone (HTTP 4xx) after their body was halved down to them.
        uncertain_events: events in requests sent but not answered (a timeout, or abort()): Ariadne may have
            stored them, so they are neither sent nor failed.
        aborted_events: events handed over after abort(); never sent.
        skipped_events: opening session trace events, not sent on purpose (see the module docstring).
        oversized_events: events too large even with their data cut; never sent.
        truncated_events: delivered events whose data was cut to fit a body.
        last_error: what went wrong last.
    """

    received_events: int
    sent_events: int
    sent_requests: int
    failed_events: int
    failed_requests: int
    invalid_events: int
    rejected_events: int
    uncertain_events: int
    aborted_events: int
    skipped_events: int
    oversized_events: int
    truncated_events: int
    last_error: str | None

    @property
    def dropped_events(self) -> int:
        """Events that surely did not reach Ariadne."""
        return (self.failed_events + self.invalid_events + self.rejected_events + self.aborted_events
                + self.oversized_events)


class _RateLimitedWarnings:
    """Logs a warning at most once per ``interval_s``, saying how many were held back since the last one."""

    def __init__(self, interval_s: float) -> None:
        self._interval = interval_s
        self._last: float | None = None
        self._suppressed = 0
        self._lock = threading.Lock()

    def warn(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        with self._lock:
            if self._last is not None and now - self._last < self._interval:
                self._suppressed += 1
                return
            self._last, suppressed, self._suppressed = now, self._suppressed, 0
        if suppressed:
            _log.warning(message + " (%d similar warnings in the last %.0f s not shown)", *args, suppressed,
                         self._interval)
        else:
            _log.warning(message, *args)


# What one POST came to: delivered, not delivered, sent without an answer, or refused by Ariadne as invalid.
_SENT, _FAILED, _UNCERTAIN, _REJECTED = "sent", "failed", "uncertain", "rejected"
_BODY_ERRORS = frozenset({400, 413, 422})


class AriadneExporter(BaseExporter):
    """POSTs batches to ``{url}/ingest``.

    Args:
        url: the Ariadne base URL (``http://localhost:5175`` by default); a URL ending in ``/ingest`` is used as is.
        timeout: seconds per request, at most 2.
        max_body_bytes: request body limit, at most 256 KB.
        headers: extra request headers (e.g. authorization).
        warning_interval_s: the shortest time between two logged warnings.

    Raises:
        ConfigError: for a URL that is not http(s) or limits beyond Ariadne's.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        timeout: float = MAX_TIMEOUT_S,
        max_body_bytes: int = MAX_BODY_BYTES,
        headers: Mapping[str, str] | None = None,
        warning_interval_s: float = WARNING_INTERVAL_S,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{url!r} is not an http(s) URL", field="ariadne.url")
        if not 0 < timeout <= MAX_TIMEOUT_S:
            raise ConfigError(f"must be in (0, {MAX_TIMEOUT_S}] seconds, got {timeout}", field="ariadne.timeout")
        if not 0 < max_body_bytes <= MAX_BODY_BYTES:
            raise ConfigError(f"must be in (0, {MAX_BODY_BYTES}], got {max_body_bytes}", field="ariadne.max_body_bytes")
        self.url = url
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        base = parts.path.rstrip("/")
        self._path = base if base.endswith("/ingest") else f"{base}/ingest"
        self._timeout = timeout
        self._max_body = max_body_bytes
        self._headers = {"Content-Type": "application/json", "User-Agent": "contextfold", **(headers or {})}
        self._conn: http.client.HTTPConnection | None = None
        self._conn_used = False
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._warnings = _RateLimitedWarnings(warning_interval_s)
        self._aborted = False
        self._counts = dict.fromkeys(
            ("received", "sent", "sent_requests", "failed", "failed_requests", "invalid", "rejected", "uncertain",
             "aborted", "skipped", "oversized", "truncated"), 0)
        self._last_error: str | None = None

    @property
    def endpoint(self) -> str:
        """The full ingest URL."""
        port = f":{self._port}" if self._port else ""
        return f"{self._scheme}://{self._host}{port}{self._path}"

    def stats(self) -> AriadneStats:
        """A snapshot of the counters."""
        with self._lock:
            c = dict(self._counts)
            return AriadneStats(
                received_events=c["received"], sent_events=c["sent"], sent_requests=c["sent_requests"],
                failed_events=c["failed"], failed_requests=c["failed_requests"], invalid_events=c["invalid"],
                rejected_events=c["rejected"], uncertain_events=c["uncertain"], aborted_events=c["aborted"],
                skipped_events=c["skipped"], oversized_events=c["oversized"], truncated_events=c["truncated"],
                last_error=self._last_error,
            )

    def export(self, batch: Batch) -> None:
        """Send ``batch`` in as many requests as the body limit needs; count every event's outcome, raise nothing."""
        self._count(received=len(batch))
        if self._aborted:
            self._count(aborted=len(batch), error="exporter aborted")
            return
        spans: list[dict[str, Any]] = []
        for event in batch:
            if event.get("name") == _SESSION_EVENT and not (event.get("data") or {}).get("finished"):
                self._count(skipped=1)  # the opening trace event: see the module docstring
                continue
            try:
                spans.append(to_ariadne_event(event))
            except ValueError as exc:
                self._count(invalid=1, error=f"invalid event {event.get('name')!r}: {exc}")
                self._warnings.warn("Ariadne exporter: event %r dropped: %s", event.get("name"), exc)
        # One request at a time on the connection; counters have their own lock so stats() never waits on I/O.
        with self._io_lock:
            packed = 0
            for parts, truncated in _pack(spans, self._max_body):
                packed += len(parts)
                self._deliver(parts, truncated)
            self._count(oversized=len(spans) - packed)

    def _deliver(self, parts: list[bytes], truncated: int) -> None:
        """POST ``parts`` as one body; on HTTP 4xx halve it until the refused event is alone, and drop only it."""
        if self._aborted:
            self._count(aborted=len(parts), error="exporter aborted")
            return
        outcome, error = self._post(_body(parts))
        if outcome == _SENT:
            self._count(sent_requests=1, sent=len(parts), truncated=truncated)
        elif outcome == _REJECTED and len(parts) > 1:
            middle = len(parts) // 2
            # Truncation counts only for what gets delivered; re-counting per half would need the flags per part.
            self._deliver(parts[:middle], 0)
            self._deliver(parts[middle:], 0)
        elif outcome == _REJECTED:
            self._count(rejected=1, error=error)
            self._warnings.warn("Ariadne exporter: %s refused an event: %s", self.endpoint, error)
        elif outcome == _UNCERTAIN:
            self._count(uncertain=len(parts), failed_requests=1, error=error)
            self._warnings.warn("Ariadne exporter: no answer from %s for %d events (they may have been stored): %s",
                                self.endpoint, len(parts), error)
        else:
            self._count(failed=len(parts), failed_requests=1, error=error)
            self._warnings.warn("Ariadne exporter: %d events not delivered to %s: %s", len(parts), self.endpoint,
                                error)

    def abort(self) -> None:
        """End a request in progress at once (its events count as uncertain) and refuse further exports.

        The processor calls it when a bounded flush runs out of time, so that a frozen server cannot hold the
        end of a session. Safe from any thread.
        """
        self._aborted = True
        conn = self._conn
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing is waiting on it
                sock.shutdown(socket.SHUT_RDWR)

    def shutdown(self) -> None:
        """Close the connection (after the request in progress, if any; call abort() first not to wait)."""
        with self._io_lock:
            self._close()

    def _count(self, *, error: str | None = None, **amounts: int) -> None:
        with self._lock:
            for key, amount in amounts.items():
                self._counts[key] += amount
            if error is not None:
                self._last_error = error

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self._timeout)
            self._conn_used = False
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _post(self, body: bytes) -> tuple[str, str | None]:
        """Send one body; return what came of it and, unless it was delivered, what went wrong."""
        for attempt in range(2):
            conn = self._connection()
            reused = self._conn_used
            sent = False
            try:
                conn.request("POST", self._path, body=body, headers=self._headers)
                sent = True
                self._conn_used = True
                response = conn.getresponse()
                detail = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self._close()
                # A kept-alive connection the server closed while idle fails on first use; one fresh try.
                if reused and attempt == 0 and not self._aborted:
                    continue
                return (_UNCERTAIN if sent and self._aborted else _FAILED), f"{type(exc).__name__}: {exc}"
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                # Sent but unanswered (a timeout, an abort): the server may have stored the events.
                return (_UNCERTAIN if sent else _FAILED), f"{type(exc).__name__}: {exc}"
            if response.will_close:
                self._close()
            if 200 <= response.status < 300:
                return _SENT, None
            error = f"HTTP {response.status}: {detail[:200].decode('utf-8', errors='replace')}"
            # 400 (validation), 413 (too large), 422: about the body, so halving it finds the event. Anything else
            # (404 for a wrong URL, 5xx) would fail for every half as well.
            return (_REJECTED if response.status in _BODY_ERRORS else _FAILED), error
        return _FAILED, "connection closed twice"
