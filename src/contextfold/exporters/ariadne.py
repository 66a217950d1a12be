"""Export events to an Ariadne trace viewer: ``POST {url}/ingest`` with ``{"batch": [SpanEvent, …]}``.

A SpanEvent is ``{"type": "span", "trace_id", "span_id", "parent_id"?, "kind"?, "name"?, "started_at"?,
"ended_at"?, "data"?, "status"?}`` with ISO-8601 times (ended ≥ started) and status ``"ok"``/``"error"``.
Bodies stay under 256 KB: batches are split, and a single oversized event has its data cut with a marker.
Stdlib ``http.client`` only, one kept-alive connection. Failures are counted on the exporter, never raised:
telemetry must not break the agent.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from .base import BaseExporter, Batch

__all__ = [
    "DEFAULT_URL",
    "MAX_BODY_BYTES",
    "MAX_TIMEOUT_S",
    "AriadneExporter",
    "AriadneStats",
    "pack_bodies",
    "to_span_event",
]

_log = logging.getLogger(__name__)

# Where a locally running Ariadne listens by default.
DEFAULT_URL = "http://localhost:5175"
# Ariadne rejects request bodies over 256 KB.
MAX_BODY_BYTES = 256 * 1024
# Ariadne's contract: an exporter waits at most 2 s for it, so a slow viewer can only stall the export thread.
MAX_TIMEOUT_S = 2.0
# A data value larger than this is a payload (summary text, id lists), not a figure: it is what gets cut first
# when an event does not fit in one body.
_LARGE_VALUE_BYTES = 1024
# Room kept for the marker and JSON escaping when an event's data is cut to fit.
_TRUNCATION_SLACK_BYTES = 512
_TRUNCATION_MARKER = "…[truncated by contextfold: {size} bytes]"
_STATUSES = frozenset({"ok", "error"})
_ENVELOPE_HEAD = b'{"batch":['
_ENVELOPE_TAIL = b"]}"


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8")


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
    times: dict[str, datetime] = {}
    for key in ("started_at", "ended_at"):
        value = event.get(key)
        if value is None:
            continue
        try:
            times[key] = datetime.fromisoformat(str(value))
        except ValueError:
            raise ValueError(f"{key}: {value!r} is not ISO-8601") from None
        span[key] = str(value)
    if len(times) == 2 and times["ended_at"] < times["started_at"]:
        raise ValueError("ended_at: before started_at")
    status = event.get("status")
    if status is not None:
        if status not in _STATUSES:
            raise ValueError(f"status: {status!r} is not 'ok' or 'error'")
        span["status"] = status
    data = dict(event.get("data") or {})
    if event.get("session_id") and "session_id" not in data:
        # Ariadne groups by trace; keeping the session id in data lets a viewer search by it.
        data["session_id"] = event["session_id"]
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


def pack_bodies(spans: list[dict[str, Any]], max_body_bytes: int = MAX_BODY_BYTES) -> Iterator[tuple[bytes, int, int]]:
    """Yield ``(body, events, truncated)`` request bodies, each at most ``max_body_bytes``, in order.

    An event that alone exceeds the limit has its data cut with a marker; one that cannot fit even so is skipped.
    """
    per_event_budget = max_body_bytes - len(_ENVELOPE_HEAD) - len(_ENVELOPE_TAIL)
    parts: list[bytes] = []
    size = len(_ENVELOPE_HEAD) + len(_ENVELOPE_TAIL)
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
            yield _ENVELOPE_HEAD + b",".join(parts) + _ENVELOPE_TAIL, len(parts), truncated
            parts, size, truncated = [], len(_ENVELOPE_HEAD) + len(_ENVELOPE_TAIL), 0
            extra = len(encoded)
        parts.append(encoded)
        size += extra
        truncated += int(cut)
    if parts:
        yield _ENVELOPE_HEAD + b",".join(parts) + _ENVELOPE_TAIL, len(parts), truncated


@dataclass(frozen=True, slots=True)
class AriadneStats:
    """What the exporter did: events and requests that made it, failed, were invalid or were cut to fit."""

    sent_events: int
    sent_requests: int
    failed_events: int
    failed_requests: int
    invalid_events: int
    truncated_events: int
    last_error: str | None


class AriadneExporter(BaseExporter):
    """POSTs batches to ``{url}/ingest``.

    Args:
        url: the Ariadne base URL (``http://localhost:5175`` by default); a URL ending in ``/ingest`` is used as is.
        timeout: seconds per request, at most 2.
        max_body_bytes: request body limit, at most 256 KB.
        headers: extra request headers (e.g. authorization).

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
        self._sent_events = self._sent_requests = 0
        self._failed_events = self._failed_requests = 0
        self._invalid = self._truncated = 0
        self._last_error: str | None = None

    @property
    def endpoint(self) -> str:
        """The full ingest URL."""
        port = f":{self._port}" if self._port else ""
        return f"{self._scheme}://{self._host}{port}{self._path}"

    def stats(self) -> AriadneStats:
        """A snapshot of the counters."""
        with self._lock:
            return AriadneStats(
                sent_events=self._sent_events,
                sent_requests=self._sent_requests,
                failed_events=self._failed_events,
                failed_requests=self._failed_requests,
                invalid_events=self._invalid,
                truncated_events=self._truncated,
                last_error=self._last_error,
            )

    def export(self, batch: Batch) -> None:
        """Send ``batch`` in as many requests as the body limit needs; count what fails, raise nothing."""
        spans: list[dict[str, Any]] = []
        for event in batch:
            try:
                spans.append(to_span_event(event))
            except ValueError as exc:
                self._count(invalid=1, error=f"invalid event {event.get('name')!r}: {exc}")
        # One request at a time on the connection; counters have their own lock so stats() never waits on I/O.
        with self._io_lock:
            for body, count, truncated in pack_bodies(spans, self._max_body):
                error = self._post(body)
                if error is None:
                    self._count(sent_requests=1, sent_events=count, truncated=truncated)
                else:
                    self._count(failed_requests=1, failed_events=count, truncated=truncated, error=error)
                    _log.warning("Ariadne exporter: %d events not delivered to %s: %s", count, self.endpoint, error)

    def shutdown(self) -> None:
        """Close the connection."""
        with self._io_lock:
            self._close()

    def _count(
        self,
        *,
        sent_requests: int = 0,
        sent_events: int = 0,
        failed_requests: int = 0,
        failed_events: int = 0,
        invalid: int = 0,
        truncated: int = 0,
        error: str | None = None,
    ) -> None:
        with self._lock:
            self._sent_requests += sent_requests
            self._sent_events += sent_events
            self._failed_requests += failed_requests
            self._failed_events += failed_events
            self._invalid += invalid
            self._truncated += truncated
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

    def _post(self, body: bytes) -> str | None:
        """Send one body; return None on a 2xx answer, else what went wrong."""
        for attempt in range(2):
            conn = self._connection()
            reused = self._conn_used
            try:
                conn.request("POST", self._path, body=body, headers=self._headers)
                self._conn_used = True
                response = conn.getresponse()
                detail = response.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self._close()
                # A kept-alive connection the server closed while idle fails on first use; one fresh try.
                if reused and attempt == 0:
                    continue
                return f"{type(exc).__name__}: {exc}"
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                return f"{type(exc).__name__}: {exc}"
            if response.will_close:
                self._close()
            if 200 <= response.status < 300:
                return None
            return f"HTTP {response.status}: {detail[:200].decode('utf-8', errors='replace')}"
        return "connection closed twice"
