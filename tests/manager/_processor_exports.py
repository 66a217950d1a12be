"""What sessions export through a telemetry processor: events built (and redacted) on its own thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextfold.exporters.base import InMemoryExporter
from contextfold.telemetry import BatchProcessor


def exported_per_session(scenarios: Callable[[Callable[[], BatchProcessor]], Any]) -> list[list[dict[str, Any]]]:
    """The records each session of ``scenarios`` exported, one list per processor it asked for, in that order.

    ``scenarios`` is given a maker of processors (each over an in-memory exporter) and runs its sessions with them;
    each processor is flushed, read and shut down after.
    """
    processors: list[BatchProcessor] = []

    def processor() -> BatchProcessor:
        processors.append(BatchProcessor(InMemoryExporter()))
        return processors[-1]

    scenarios(processor)
    exported = []
    for made in processors:
        assert made.flush()
        exported.append(made.exporter.events)  # type: ignore[attr-defined]
        made.shutdown()
    return exported
