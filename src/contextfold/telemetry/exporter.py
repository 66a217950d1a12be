"""The exporter protocol the batch processor hands batches to: one required method, ``export(batch)``.

It lives here, with its consumer (:class:`~contextfold.telemetry.BatchProcessor`); the built-in exporters are
edges (:mod:`contextfold.exporters`). A batch is a list of event dicts as produced by
:meth:`contextfold.telemetry.Event.to_dict` (after redaction): ``name``, ``kind``, ``session_id``, ``trace_id``,
``span_id``, ``parent_id``, ``started_at``, ``ended_at`` (ISO-8601, UTC), ``status`` and ``data``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Batch", "Exporter", "shutdown_exporter"]

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
