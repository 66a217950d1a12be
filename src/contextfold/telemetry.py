"""Where events go: the :class:`Telemetry` sink protocol and the two sinks that need no exporter.

:class:`NullTelemetry` drops events; :class:`RecordingTelemetry` keeps them in memory for tests. Both, and the
protocol, are re-exported from :mod:`contextfold.events`, where they were first defined.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from .events import Event

__all__ = ["NullTelemetry", "RecordingTelemetry", "Telemetry"]

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
