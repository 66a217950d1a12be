"""Hands out trace ids, span ids and times for events, so that one session reads as one trace.

A :class:`Tracer` belongs to one session. ``tracer.emit(event)`` stamps the event with the session id, the
session's trace id, a new span id, the innermost open span as parent and the tracer's clock, then passes it to
the telemetry sink. ``with tracer.span("prepare", kind="llm.call"):`` opens a parent span that is itself emitted,
as a :class:`~contextfold.telemetry.SpanEvent` with its real duration, when it closes; a sink with a
``span_started(span)`` method (the live OpenTelemetry sink) also hears when it opens. ``start_session()`` and
``finish_session()`` emit the :class:`~contextfold.telemetry.SessionTrace` that names the trace.

A trigger decision that triggers nothing says only "not yet"; by default it is counted on the enclosing span
(``noop_decisions``; the next model-call span when none is open) instead of being sent one by one
(``keep_noop_decisions=True`` sends them all). The clock and id source are injectable so that tests and replays
are deterministic.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from datetime import datetime, timedelta
from types import MappingProxyType, TracebackType
from typing import Any, TypeVar

from ._clock import new_span_id, utc_now
from .events import _KEPT, Event, PendingEvent, SessionTrace, SpanEvent, Status, TriggerDecision, _freeze, freeze_values
from .sinks import NullTelemetry, Telemetry

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


# The span attribute that counts the trigger decisions folded into a span.
NOOP_DECISIONS = "noop_decisions"


class Span:
    """An open span: add figures with :meth:`set`; it is emitted when its ``with`` block ends."""

    __slots__ = ("data", "dropped", "kind", "later", "name", "parent_id", "span_id", "started_at", "status",
                 "trace_id")

    def __init__(self, name: str, trace_id: str, span_id: str, parent_id: str | None, started_at: datetime,
                 kind: str = "") -> None:
        self.name = name
        self.kind = kind
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.started_at = started_at
        self.status: Status = "ok"
        self.data: dict[str, Any] = {}
        self.dropped = False
        self.later: Callable[[], dict[str, Any]] | None = None

    def set(self, **data: Any) -> None:
        """Record figures on the span."""
        self.data.update(data)

    def set_later(self, make: Callable[[], dict[str, Any]]) -> None:
        """Figures made where the span's event is built (on the sink's thread for a sink that builds there).

        They replace the values set under the same names, in their places. ``make`` must read only values that never
        change, so that the event is the one made at once gives (see :meth:`Tracer.emit_deferred`).
        """
        self.later = make

    def count(self, key: str, by: int = 1) -> None:
        """Add ``by`` to the figure ``key``."""
        self.data[key] = int(self.data.get(key, 0)) + by

    def drop(self) -> None:
        """Do not emit this span (it turned out to do nothing worth showing); events inside it keep their parent."""
        self.dropped = True

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
        telemetry: where events go (:class:`~contextfold.telemetry.NullTelemetry` when None).
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
        keep_noop_decisions: bool = False,
    ) -> None:
        self.session_id = session_id if session_id is not None else uuid.uuid4().hex
        self.trace_id = trace_id or trace_id_for_session(self.session_id)
        self.telemetry: Telemetry = telemetry if telemetry is not None else NullTelemetry()
        self._clock = clock or utc_now
        self._ids = ids or new_span_id
        self.emit_failures = 0
        self.keep_noop_decisions = keep_noop_decisions
        self.noop_decisions = 0  # folded so far, in the whole session
        self._pending_noop = 0  # folded outside any span, waiting for the next root span
        self._noop_lock = threading.Lock()
        self._session: SessionTrace | None = None
        self._sink_hooks: _SinkHooks | None = None
        # What one thread sends while add() commits a batch (see record_sent): (its id, the span ids), or None;
        # and how many no-op decisions it folded outside any span meanwhile (see take_back_folded).
        self._recording: tuple[int, list[str]] | None = None
        self._folded_recording = 0
        self._folded_on_spans: list[Span] = []  # (the spans it counted those on meanwhile, one entry a decision)

    def now(self) -> datetime:
        """Read the tracer's clock."""
        return self._clock()

    def new_id(self) -> str:
        """Return a new span id."""
        return self._ids()

    def record_sent(self) -> list[str]:
        """Note the span id of every event this thread sends from now on, until :meth:`stop_recording`.

        ``add()`` notes what its batch's commit sent: the events its rollback voids (``AddRolledBack``). Events other
        threads send meanwhile (a background compaction's) are not noted.
        """
        sent: list[str] = []
        self._folded_recording = 0
        self._folded_on_spans = []
        self._recording = (threading.get_ident(), sent)
        return sent

    def stop_recording(self) -> None:
        """End :meth:`record_sent`."""
        self._recording = None

    def recording_sent(self) -> bool:
        """Whether this thread's :meth:`record_sent` is still on (not stopped since)."""
        recording = self._recording
        return recording is not None and recording[0] == threading.get_ident()

    def take_back_folded(self) -> None:
        """Un-count the no-op trigger decisions the last :meth:`record_sent` thread folded outside any span.

        A rolled-back ``add()``'s check decided for a batch the history does not hold; the caller's retry decides
        again. Those still waiting for a root span are taken back (``add()`` opens none: that is where its checks
        fold), and those counted on a span the add ran in (the caller's own: still open, its event not made yet):
        a voided decision is counted nowhere, the session's total included.
        """
        with self._noop_lock:
            taken = min(self._folded_recording, self._pending_noop)
            self._folded_recording = 0
            self._pending_noop -= taken
            self.noop_decisions -= taken
            on_spans, self._folded_on_spans = self._folded_on_spans, []
            self.noop_decisions -= len(on_spans)
        for span in on_spans:
            left = int(span.data.get(NOOP_DECISIONS, 0)) - 1
            if left > 0:
                span.data[NOOP_DECISIONS] = left
            else:
                span.data.pop(NOOP_DECISIONS, None)

    def _note_sent(self, span_id: str) -> None:
        recording = self._recording
        if recording is not None and recording[0] == threading.get_ident():
            recording[1].append(span_id)

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

    def emit(self, event: E, *, started_at: datetime | None = None, ended_at: datetime | None = None,
             noop: bool | None = None) -> E:
        """Stamp ``event`` and send it to the sink; a failing sink is counted and logged, never raised.

        A trigger decision that led to nothing (``noop``; by default: one that did not trigger) is folded into a
        count instead (see the module docstring).
        """
        return self._deliver(self.stamp(event, started_at=started_at, ended_at=ended_at), noop)

    def emit_new(self, cls: type[Event], /, **data: Any) -> None:
        """``emit(cls(**data))`` built once, already stamped: no throwaway ids, times and copy (the per-call events).

        ``data`` holds the event's own fields; the common ones are the tracer's, as :meth:`stamp` sets them. A sink
        that builds events on its own thread (``emit_later``) gets the fields, not the event (issue 22: see
        :class:`~contextfold.telemetry.events.PendingEvent`); a trigger decision that triggered nothing is folded
        as :meth:`emit` folds it.
        """
        later = self._hooks().emit_later
        fields = self._common_fields()
        if later is not None and not (cls is TriggerDecision and not data.get("triggered")):
            # The common fields are the tracer's own strings and the clock's time: only the caller's are frozen (none
            # when all are figures and names, as a no-op call's estimate's are: told by C loops).
            fields.update(data if _KEPT.issuperset(map(type, data.values())) else freeze_values(data))
            self._send_later(later, cls, fields, frozen=True)
            return
        fields.update(data)
        self._deliver(cls(**fields), None)

    def emit_deferred(self, cls: type[Event], make: Callable[[], dict[str, Any]], /, **data: Any) -> None:
        """``emit_new(cls, **data, **make())``, ``make`` called where the event is built.

        A sink that builds events on its own thread (``emit_later``) calls it there: what only the exported event
        needs (a reason's text, figures read from a verdict) is not made on the agent's turn (issue 22). ``make``
        must read only values that never change (a frozen verdict, strings), so that the event is the one made at
        once. Not for trigger decisions (whether one is folded depends on its fields).
        """
        later = self._hooks().emit_later
        if later is None:
            self.emit_new(cls, **data, **make())
            return
        fields = self._common_fields()
        fields.update(freeze_values(data))
        self._send_later(later, cls, fields, frozen=True, make=make)

    def _common_fields(self) -> dict[str, Any]:
        """The fields :meth:`stamp` sets, for an event emitted now in the open span."""
        parent = _CURRENT_SPAN.get()
        return {"session_id": self.session_id, "trace_id": self.trace_id, "span_id": self._ids(),
                "parent_id": parent.span_id if parent is not None and parent.trace_id == self.trace_id else None,
                "started_at": self._clock()}

    def _hooks(self) -> _SinkHooks:
        """The sink's optional methods, looked up once per sink object (several events and spans per call)."""
        hooks = self._sink_hooks
        telemetry = self.telemetry
        if hooks is None or hooks.sink is not telemetry:
            hooks = self._sink_hooks = _SinkHooks(telemetry)
        return hooks

    def _send_later(self, later: Callable[[PendingEvent], Any], cls: type[Event], fields: dict[str, Any], *,
                    frozen: bool = False, make: Callable[[], dict[str, Any]] | None = None) -> None:
        if self._recording is not None:
            self._note_sent(fields["span_id"])
        try:
            later(PendingEvent(cls, fields, frozen=frozen, make=make))
        except Exception:
            # Telemetry must never break the agent: count, log once per failure, carry on.
            self.emit_failures += 1
            _log.exception("contextfold telemetry sink failed on %s", cls.NAME)

    def _deliver(self, stamped: E, noop: bool | None) -> E:
        if noop is None:
            noop = isinstance(stamped, TriggerDecision) and not stamped.triggered
        if noop and isinstance(stamped, TriggerDecision) and not self.keep_noop_decisions:
            self._fold_noop()
            return stamped
        self._send(stamped)
        return stamped

    def _fold_noop(self) -> None:
        span = self.current_span()
        with self._noop_lock:
            self.noop_decisions += 1
            recording = self._recording
            recorded = recording is not None and recording[0] == threading.get_ident()
            if span is None:
                self._pending_noop += 1
                if recorded:
                    self._folded_recording += 1
            elif recorded:
                self._folded_on_spans.append(span)
        if span is not None:
            span.count(NOOP_DECISIONS)

    def span(self, name: str, *, kind: str = "", **data: Any) -> AbstractContextManager[Span]:
        """Open a span; events emitted inside it get it as parent. An exception marks it failed and propagates.

        A root span takes the no-op decisions folded since the previous one (``noop_decisions``).
        """
        return _OpenSpan(self, name, kind, data)

    def _open(self, name: str, kind: str, data: dict[str, Any]) -> Span:
        parent = _CURRENT_SPAN.get()
        if parent is not None and parent.trace_id != self.trace_id:
            parent = None  # (another session's span: see current_span)
        span = Span(name, self.trace_id, self._ids(), parent.span_id if parent else None, self._clock(), kind)
        if data:
            span.data.update(data)
        if parent is None and self._pending_noop:  # (read unlocked: one folded after it goes to the next root span)
            with self._noop_lock:
                pending, self._pending_noop = self._pending_noop, 0
            if pending:
                span.count(NOOP_DECISIONS, pending)
        self._span_started(span)
        return span

    def _close(self, span: Span) -> None:
        end = self._clock()
        if span.dropped:
            self._span_dropped(span)
            return
        # (The span's own dict: the pending event and the event freeze a copy of it, so it is copied once.)
        fields: dict[str, Any] = {"event": span.name, "span_kind": span.kind, "attributes": span.data,
                  "session_id": self.session_id, "trace_id": self.trace_id, "span_id": span.span_id,
                  "parent_id": span.parent_id, "started_at": span.started_at, "ended_at": max(span.started_at, end),
                  "status": span.status}
        later = self._hooks().emit_later
        made_later = span.later
        if later is not None:
            # (Built on the sink's thread: one closes every prepare(). Its attributes are the one value to freeze:
            # a copy, by C loops when they are all plain figures and names, as a no-op call's are.)
            data = span.data
            attributes = MappingProxyType({**data}) if _KEPT.issuperset(map(type, data.values())) else _freeze(data)
            if made_later is None:
                fields["attributes"] = attributes
                self._send_later(later, SpanEvent, fields, frozen=True)
                return
            del fields["attributes"]
            self._send_later(later, SpanEvent, fields, frozen=True,
                             make=lambda: {"attributes": {**attributes, **made_later()}})
            return
        if made_later is not None:
            span.data.update(made_later())
        self._send(SpanEvent(**fields))

    # -- the session trace ------------------------------------------------------------------------------------
    def start_session(self, title: str, metadata: Mapping[str, Any]) -> SessionTrace:
        """Emit the session's trace event (its name and metadata) as the session starts."""
        event = SessionTrace(title=title, metadata=dict(metadata))
        self._session = self.emit(event)
        return self._session

    def finish_session(self) -> SessionTrace | None:
        """Emit the session's trace event again, with its end time and the no-op decisions folded so far."""
        if self._session is None:
            return None
        with self._noop_lock:
            folded = self.noop_decisions
        done = dataclasses.replace(self._session, finished=True, noop_decisions=folded,
                                   ended_at=max(self._session.started_at, self._clock()))
        self._send(done)
        return done

    def wake(self) -> None:
        """Ask the sink to export its queued events now (004 §6: batches flush when a compaction completes).

        Never blocks: a batching sink only wakes its exporter thread.
        """
        hook = getattr(self.telemetry, "wake", None)
        if callable(hook):
            try:
                hook()
            except Exception:
                self.emit_failures += 1
                _log.exception("contextfold telemetry sink failed to wake")

    def _span_started(self, span: Span) -> None:
        hook = self._hooks().span_started
        if hook is not None:
            try:
                hook(span)
            except Exception:
                self.emit_failures += 1
                _log.exception("contextfold telemetry sink failed on the start of %s", span.name)

    def _span_dropped(self, span: Span) -> None:
        hook = self._hooks().span_dropped
        if hook is not None:
            try:
                hook(span)
            except Exception:
                self.emit_failures += 1
                _log.exception("contextfold telemetry sink failed on dropping %s", span.name)

    def _send(self, event: Event) -> None:
        if self._recording is not None:
            self._note_sent(event.span_id)
        try:
            self.telemetry.emit(event)
        except Exception:
            # Telemetry must never break the agent: count, log once per failure, carry on.
            self.emit_failures += 1
            _log.exception("contextfold telemetry sink failed on %s", event.name)


class _SinkHooks:
    """A sink's optional methods (``emit_later``, ``span_started``, ``span_dropped``), or None for those it lacks."""

    __slots__ = ("emit_later", "sink", "span_dropped", "span_started")

    def __init__(self, sink: Telemetry) -> None:
        self.sink = sink
        self.emit_later: Callable[[PendingEvent], Any] | None = getattr(sink, "emit_later", None)
        started, dropped = getattr(sink, "span_started", None), getattr(sink, "span_dropped", None)
        self.span_started: Callable[[Span], Any] | None = started if callable(started) else None
        self.span_dropped: Callable[[Span], Any] | None = dropped if callable(dropped) else None


class _OpenSpan:
    """The ``with`` block of :meth:`Tracer.span` (a class, not a generator: one opens on every ``prepare()``)."""

    __slots__ = ("_data", "_kind", "_name", "_span", "_token", "_tracer")

    def __init__(self, tracer: Tracer, name: str, kind: str, data: dict[str, Any]) -> None:
        self._tracer = tracer
        self._name = name
        self._kind = kind
        self._data = data

    def __enter__(self) -> Span:
        span = self._span = self._tracer._open(self._name, self._kind, self._data)
        self._token = _CURRENT_SPAN.set(span)
        return span

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        span = self._span
        if error is not None:
            span.fail(error)
        _CURRENT_SPAN.reset(self._token)
        self._tracer._close(span)
