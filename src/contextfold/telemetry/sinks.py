"""Where events go: the :class:`Telemetry` sink protocol and the two sinks that need no exporter.

:class:`NullTelemetry` drops events; :class:`RecordingTelemetry` keeps them in memory for tests. Both, and the
protocol, are exported by :mod:`contextfold.telemetry`. :class:`FanoutTelemetry` sends events to several sinks and
flushes the batching ones together under one deadline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from operator import is_not
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from .events import Event, PendingEvent

__all__ = ["FanoutTelemetry", "NullTelemetry", "RecordingTelemetry", "Telemetry"]

# The whole end-of-session flush (every sink together) waits at most this long by default; the same figure as
# contextfold.telemetry.DEFAULT_FLUSH_TIMEOUT_S, spelled here to keep this module free of the processor.
DEFAULT_FLUSH_DEADLINE_S = 1.0

E = TypeVar("E", bound="Event")


@runtime_checkable
class Telemetry(Protocol):
    """Where events go. ``emit`` must return quickly and never raise into the agent.

    Example::

        class PrintTelemetry:
            def emit(self, event: Event) -> None:
                print(event.name, event.data())
    """

    def emit(self, event: Event) -> None:
        """Accept one event."""
        ...


class NullTelemetry:
    """Drops every event: the default when telemetry is off."""

    def emit(self, event: Event) -> None:
        """Do nothing."""


class RecordingTelemetry:
    """Keeps every event in memory, in order; thread-safe. Use it to assert on what an agent emitted."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        """Record ``event``."""
        with self._lock:
            self._events.append(event)

    @property
    def events(self) -> list[Event]:
        """A copy of the events recorded so far."""
        with self._lock:
            return list(self._events)

    def names(self) -> list[str]:
        """The names of the recorded events, in order."""
        return [e.name for e in self.events]

    def of_type(self, cls: type[E]) -> list[E]:
        """The recorded events that are instances of ``cls``."""
        return [e for e in self.events if isinstance(e, cls)]

    def clear(self) -> None:
        """Forget everything recorded."""
        with self._lock:
            self._events.clear()

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)


class FanoutTelemetry:
    """Sends every event to several sinks; ``flush`` and ``shutdown`` reach the ones that batch, under one deadline.

    Sinks with a ``span_started(span)`` / ``span_dropped(span)`` hook (live tracing sinks) hear about spans as they
    open and when they are discarded.

    Args:
        sinks: the sinks, in order.
        flush_timeout_s: how long ``flush()`` and ``shutdown()`` wait in all, for every sink together, unless a
            sink says otherwise with its own ``flush_timeout_s`` (the archive's events file waits longer: it is
            the record, and a local file cannot freeze the way a remote viewer can).
    """

    def __init__(self, sinks: Sequence[Any], *, flush_timeout_s: float = DEFAULT_FLUSH_DEADLINE_S) -> None:
        self.sinks = list(sinks)
        self.flush_timeout_s = flush_timeout_s
        self._looked_up: _FanoutHooks | None = None

    def emit(self, event: Event) -> None:
        """Hand ``event`` to every sink (each sink is responsible for never blocking)."""
        # In reverse order: an event closing a span makes each live sink give back the context it had when the
        # span opened (in list order), and that is only right last-opened first (see span_started).
        for sink in reversed(self.sinks):
            sink.emit(event)

    def emit_later(self, pending: PendingEvent) -> None:
        """Hand an event still to build to every sink, as it is to those that build on their own thread.

        Those have an ``emit_later``; the others get the event built once here.
        """
        event: Event | None = None
        for later, sink in reversed(self._hooks().later):  # reversed: see emit()
            if later is not None:
                later(pending)
                continue
            if event is None:
                event = pending.build()
            sink.emit(event)

    def span_started(self, span: Any) -> None:
        """Tell the live sinks that a span opened."""
        for hook in self._hooks().started:
            hook(span)

    def _hooks(self) -> _FanoutHooks:
        """The sinks' optional methods, looked up again only when :attr:`sinks` changed (two per prepare() call)."""
        hooks, sinks = self._looked_up, self.sinks
        # by identity, not ``!=``: a sink replaced by an equal one (rebuilt from the same settings) is a new sink
        if hooks is None or len(hooks.sinks) != len(sinks) or any(map(is_not, hooks.sinks, sinks)):
            hooks = self._looked_up = _FanoutHooks(sinks)
        return hooks

    def wake(self) -> None:
        """Have the batching sinks export what they hold now, without waiting for it (a compaction completed)."""
        for sink in self.sinks:
            hook = getattr(sink, "wake", None)
            if callable(hook):
                hook()

    def span_dropped(self, span: Any) -> None:
        """Tell the live sinks that an open span will not be emitted."""
        for sink in reversed(self.sinks):  # reversed: see emit()
            hook = getattr(sink, "span_dropped", None)
            if callable(hook):
                hook(span)

    def flush(self, timeout: float | None = None, *, since: float | None = None) -> bool:
        """Have every batching sink export what it holds, all at once; wait ``timeout`` seconds in all at most.

        ``since`` (a ``time.monotonic()`` reading) starts the deadline earlier: the manager's ``finish()`` counts
        its own work in it. Returns whether every sink finished in time.
        """
        start = time.monotonic() if since is None else since
        waiting: list[tuple[Any, threading.Event, float]] = []
        ok = True
        for sink in self.sinks:
            deadline = start + self._patience(sink, timeout)
            begin = getattr(sink, "begin_flush", None)
            done = begin() if callable(begin) and not getattr(sink, "stalled", False) else None
            if done is not None:
                waiting.append((sink, done, deadline))
            elif callable(getattr(sink, "flush", None)):
                ok = sink.flush(max(0.0, deadline - time.monotonic())) is not False and ok
        for sink, done, deadline in waiting:
            if not done.wait(max(0.0, deadline - time.monotonic())):
                ok = False
                sink.flush(0)  # marks the sink as stalled, so that later flushes and its shutdown do not wait
        return ok

    def _patience(self, sink: Any, timeout: float | None) -> float:
        if timeout is not None:
            return timeout
        own = getattr(sink, "flush_timeout_s", None)
        return float(own) if isinstance(own, int | float) else self.flush_timeout_s

    def shutdown(self, timeout: float | None = None, *, since: float | None = None) -> bool:
        """Stop the batching sinks' threads, all within ``timeout`` seconds (from ``since``); whether all finished."""
        start = time.monotonic() if since is None else since
        ok = True
        for sink in self.sinks:
            stop = getattr(sink, "shutdown", None)
            if callable(stop):
                deadline = start + self._patience(sink, timeout)
                ok = stop(max(0.0, deadline - time.monotonic())) is not False and ok
        return ok


class _FanoutHooks:
    """The optional methods of a fanout's sinks, in their order, as they were when these sinks were listed."""

    __slots__ = ("later", "sinks", "started")

    def __init__(self, sinks: list[Any]) -> None:
        self.sinks = list(sinks)
        self.later: list[tuple[Any, Any]] = [(getattr(sink, "emit_later", None), sink) for sink in sinks]
        started = [getattr(sink, "span_started", None) for sink in sinks]
        self.started: list[Any] = [hook for hook in started if callable(hook)]
