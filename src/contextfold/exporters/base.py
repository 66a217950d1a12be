"""Base classes for exporters: :class:`BaseExporter`, a fan-out and an in-memory double.

The protocol they implement, :class:`~contextfold.telemetry.Exporter` (``export(batch)``), lives with its consumer
in :mod:`contextfold.telemetry`; it is exported here too, as every exporter author needs it.
"""

from __future__ import annotations

import threading
from typing import Any

from ..telemetry.exporter import Batch, Exporter, shutdown_exporter

__all__ = ["BaseExporter", "Batch", "Exporter", "FanoutExporter", "InMemoryExporter", "shutdown_exporter"]

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
