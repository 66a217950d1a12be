"""The exporter protocol: one required method, ``export(batch)``; lifecycle stays with the processor.

A batch is a list of event dicts as produced by :meth:`contextfold.events.Event.to_dict` (after redaction):
``name``, ``kind``, ``session_id``, ``trace_id``, ``span_id``, ``parent_id``, ``started_at``, ``ended_at``
(ISO-8601, UTC), ``status`` and ``data``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["BaseExporter", "Batch", "Exporter", "FanoutExporter", "InMemoryExporter", "shutdown_exporter"]

Batch = Sequence[Mapping[str, Any]]


@runtime_checkable
class Exporter(Protocol):
    """Sends a batch of event dicts somewhere. It may block (it runs on the processor's thread) and may raise.

    A ``shutdown()`` method, when present, is called once by the processor at the end.

    Example::

        class PrintExporter:
            def export(self, batch: Batch) -> None:
                for event in batch:
                    print(event["name"], event["data"])
    """

    def export(self, batch: Batch) -> None:
        """Send ``batch``."""
        ...


def shutdown_exporter(exporter: Exporter) -> None:
    """Call the exporter's ``shutdown()`` if it has one."""
    shutdown = getattr(exporter, "shutdown", None)
    if callable(shutdown):
        shutdown()


class BaseExporter:
    """A convenient base class: subclasses write ``export``; ``shutdown`` is a no-op."""

    def export(self, batch: Batch) -> None:
        """Send ``batch``."""
        raise NotImplementedError

    def shutdown(self) -> None:
        """Release resources (nothing by default)."""


class InMemoryExporter(BaseExporter):
    """Keeps every exported event dict; a test double for code that configures telemetry."""

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.batches = 0
        self.shut_down = False

    def export(self, batch: Batch) -> None:
        """Keep copies of the events."""
        with self._lock:
            self._events.extend(dict(e) for e in batch)
            self.batches += 1

    @property
    def events(self) -> list[dict[str, Any]]:
        """A copy of everything exported so far."""
        with self._lock:
            return list(self._events)

    def shutdown(self) -> None:
        """Remember that shutdown was called."""
        self.shut_down = True


class FanoutExporter(BaseExporter):
    """Sends every batch to several exporters; one failing does not stop the others (the first error is raised)."""

    def __init__(self, *exporters: Exporter) -> None:
        self.exporters = exporters

    def export(self, batch: Batch) -> None:
        """Export to each exporter in turn."""
        first: Exception | None = None
        for exporter in self.exporters:
            try:
                exporter.export(batch)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first

    def shutdown(self) -> None:
        """Shut each exporter down."""
        for exporter in self.exporters:
            shutdown_exporter(exporter)
