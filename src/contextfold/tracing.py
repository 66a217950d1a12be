"""Hands out trace ids, span ids and times for events, so that one session reads as one trace.

A :class:`Tracer` belongs to one session. ``tracer.emit(event)`` stamps the event with the session id, the
session's trace id, a new span id, the innermost open span as parent and the tracer's clock, then passes it to
the telemetry sink. ``with tracer.span("compact.prepare"):`` opens a parent span that is itself emitted, as a
:class:`~contextfold.events.CustomEvent`, when it closes. The clock and id source are injectable so that tests and
replays are deterministic.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .events import CustomEvent, Event, NullTelemetry, Status, Telemetry, new_span_id, utc_now

__all__ = ["FixedClock", "SequentialIds", "Span", "Tracer", "trace_id_for_session"]

E = TypeVar("E", bound=Event)

_log = logging.getLogger(__name__)

# 32 hex digits = the 16-byte W3C/OpenTelemetry trace id.
_TRACE_ID_HEX = 32
# 16 hex digits = the 8-byte W3C/OpenTelemetry span id.
_SPAN_ID_HEX = 16


def trace_id_for_session(session_id: str) -> str:
    """Return the trace id of a session: derived from its id, so any worker resuming it joins the same trace."""
    return hashlib.sha256(f"contextfold:{session_id}".encode()).hexdigest()[:_TRACE_ID_HEX]


class SequentialIds:
    """Deterministic span ids ``0000000000000001``, ``0000000000000002``, … for tests and replays."""

    def __init__(self, start: int = 1) -> None:
        self._counter = itertools.count(start)
        self._lock = threading.Lock()

    def __call__(self) -> str:
        """Return the next id."""
        with self._lock:
            return f"{next(self._counter):0{_SPAN_ID_HEX}x}"


class FixedClock:
    """A clock that starts at ``start`` and moves forward ``step`` on every reading (deterministic times)."""

    def __init__(self, start: datetime, step: timedelta = timedelta(milliseconds=1)) -> None:
        if start.tzinfo is None:
            raise ValueError("FixedClock: start: must be timezone-aware")
        self._now = start
        self._step = step
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        """Return the current reading and advance."""
        with self._lock:
            now = self._now
            self._now = now + self._step
            return now


class Span:
    """An open span: add figures with :meth:`set`; it is emitted when its ``with`` block ends."""

    __slots__ = ("data", "name", "parent_id", "span_id", "started_at", "status", "trace_id")

    def __init__(self, name: str, trace_id: str, span_id: str, parent_id: str | None, started_at: datetime) -> None:
        self.name = name
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.started_at = started_at
        self.status: Status = "ok"
        self.data: dict[str, Any] = {}

    def set(self, **data: Any) -> None:
        """Record figures on the span."""
        self.data.update(data)

    def fail(self, error: BaseException | str) -> None:
        """Mark the span as failed, naming the error."""
        self.status = "error"
        if isinstance(error, BaseException):
            self.data["error_type"] = type(error).__name__
            self.data["error"] = str(error)
        else:
            self.data["error"] = error


# The innermost open span of the running thread or task; contextvars so that asyncio tasks nest correctly.
_CURRENT_SPAN: ContextVar[Span | None] = ContextVar("contextfold_current_span", default=None)


class Tracer:
    """Stamps events with one session's ids and times and sends them to a telemetry sink.

    Args:
        session_id: the session; a random one when None.
        telemetry: where events go (:class:`~contextfold.events.NullTelemetry` when None).
        trace_id: overrides the id derived from ``session_id``.
        clock: returns timezone-aware ``datetime`` s (UTC now by default).
        ids: returns a new span id per call (16 random hex digits by default).

    Example::

        tracer = Tracer("session-1", RecordingTelemetry())
        with tracer.span("compact.prepare") as span:
            tracer.emit(TokenEstimate(system=10, developer=0, tools_schema=50, messages=900))
            span.set(messages=12)
    """

    def __init__(
        self,
        session_id: str | None = None,
        telemetry: Telemetry | None = None,
        *,
        trace_id: str | None = None,
        clock: Callable[[], datetime] | None = None,
        ids: Callable[[], str] | None = None,
    ) -> None:
        self.session_id = session_id if session_id is not None else uuid.uuid4().hex
        self.trace_id = trace_id or trace_id_for_session(self.session_id)
        self.telemetry: Telemetry = telemetry if telemetry is not None else NullTelemetry()
        self._clock = clock or utc_now
        self._ids = ids or new_span_id
        self.emit_failures = 0

    def now(self) -> datetime:
        """Read the tracer's clock."""
        return self._clock()

    def new_id(self) -> str:
        """Return a new span id."""
        return self._ids()

    def current_span(self) -> Span | None:
        """The innermost open span of this tracer, if any."""
        span = _CURRENT_SPAN.get()
        return span if span is not None and span.trace_id == self.trace_id else None

    def stamp(self, event: E, *, started_at: datetime | None = None, ended_at: datetime | None = None) -> E:
        """Return a copy of ``event`` with this session's ids, the current span as parent, and the clock's times.

        Without ``started_at`` the event is instantaneous at the clock's reading. With it and no ``ended_at``
        it ends now. An end before the start (a clock that stepped back) is clamped to the start.
        """
        parent = self.current_span()
        if started_at is None:
            start = self._clock()
            end = ended_at or start
        else:
            start = started_at
            end = ended_at or self._clock()
        return dataclasses.replace(
            event,
            session_id=self.session_id,
            trace_id=self.trace_id,
            span_id=self._ids(),
            parent_id=parent.span_id if parent is not None else None,
            started_at=start,
            ended_at=max(start, end),
        )

    def emit(self, event: E, *, started_at: datetime | None = None, ended_at: datetime | None = None) -> E:
        """Stamp ``event`` and send it to the sink; a failing sink is counted and logged, never raised."""
        stamped = self.stamp(event, started_at=started_at, ended_at=ended_at)
        self._send(stamped)
        return stamped

    @contextmanager
    def span(self, name: str, **data: Any) -> Iterator[Span]:
        """Open a span; events emitted inside it get it as parent. An exception marks it failed and propagates."""
        parent = self.current_span()
        span = Span(name, self.trace_id, self._ids(), parent.span_id if parent else None, self._clock())
        span.set(**data)
        token = _CURRENT_SPAN.set(span)
        try:
            yield span
        except BaseException as exc:
            span.fail(exc)
            raise
        finally:
            _CURRENT_SPAN.reset(token)
            end = self._clock()
            self._send(
                CustomEvent(
                    event=name,
                    attributes=dict(span.data),
                    session_id=self.session_id,
                    trace_id=self.trace_id,
                    span_id=span.span_id,
                    parent_id=span.parent_id,
                    started_at=span.started_at,
                    ended_at=max(span.started_at, end),
                    status=span.status,
                )
            )

    def _send(self, event: Event) -> None:
        try:
            self.telemetry.emit(event)
        except Exception:
            # Telemetry must never break the agent: count, log once per failure, carry on.
            self.emit_failures += 1
            _log.exception("contextfold telemetry sink failed on %s", event.name)
