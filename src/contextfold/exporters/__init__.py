"""Exporters: where batches of events go. Built-ins are chosen by name and imported only when asked for.

``get_exporter(spec)`` understands:

- ``"console"`` — human-readable lines on stderr;
- ``"jsonl:PATH"`` or any path ending in ``.jsonl`` — one JSON event per line;
- ``"ariadne"`` / ``"ariadne:URL"`` (or a bare ``http(s)://`` URL) — Ariadne's ``/ingest`` endpoint;
- ``"otel"`` / ``"otel:ENDPOINT"`` — OpenTelemetry spans over OTLP/HTTP (extra ``otel``);
- ``"memory"`` — an :class:`InMemoryExporter`, for tests.

``telemetry_sink(spec)`` turns the same names into what a ContextManager sends events to: a
:class:`~contextfold.telemetry.BatchProcessor` over the exporter, except ``"otel"``, which is the live
:class:`OtelTelemetry` sink (spans under the caller's active span, through the global tracer provider, or a
provider of its own for ``"otel:ENDPOINT"``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .base import BaseExporter, Batch, Exporter, FanoutExporter, InMemoryExporter, shutdown_exporter

__all__ = [
    "AriadneExporter",
    "BaseExporter",
    "Batch",
    "ConsoleExporter",
    "Exporter",
    "FanoutExporter",
    "InMemoryExporter",
    "JsonlExporter",
    "OtelExporter",
    "OtelTelemetry",
    "get_exporter",
    "shutdown_exporter",
    "telemetry_sink",
]

# class name -> module under contextfold.exporters; imported on first use so that the OpenTelemetry SDK is only
# loaded by someone who asked for it.
_LAZY: dict[str, str] = {
    "AriadneExporter": "ariadne",
    "ConsoleExporter": "console",
    "JsonlExporter": "jsonl",
    "OtelExporter": "otel",
    "OtelTelemetry": "otel",
}

if TYPE_CHECKING:
    from .ariadne import AriadneExporter
    from .console import ConsoleExporter
    from .jsonl import JsonlExporter
    from .otel import OtelExporter, OtelTelemetry


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'contextfold.exporters' has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)


def _load(name: str) -> Any:
    return getattr(import_module(f".{_LAZY[name]}", __name__), name)


def get_exporter(spec: str, **options: Any) -> Exporter:
    """Build a built-in exporter from a name or URL; ``options`` go to its constructor.

    Raises:
        ConfigError: for a spec no exporter answers to (field ``telemetry.exporter``).
        MissingExtra: when the exporter's optional dependency is not installed.
    """
    text = spec.strip()
    kind, _, rest = text.partition(":")
    kind = kind.lower()
    if text.startswith(("http://", "https://")):
        exporter: Exporter = _load("AriadneExporter")(text, **options)
    elif kind == "console" and not rest:
        exporter = _load("ConsoleExporter")(**options)
    elif kind == "memory" and not rest:
        exporter = InMemoryExporter(**options)
    elif kind == "jsonl" and rest:
        exporter = _load("JsonlExporter")(rest, **options)
    elif text.endswith(".jsonl"):
        exporter = _load("JsonlExporter")(text, **options)
    elif kind == "ariadne":
        exporter = _load("AriadneExporter")(rest, **options) if rest else _load("AriadneExporter")(**options)
    elif kind in ("otel", "otlp"):
        exporter = _load("OtelExporter")(endpoint=rest or None, **options)
    else:
        raise ConfigError(
            f"unknown exporter {spec!r}: use 'console', 'jsonl:PATH', 'ariadne[:URL]', 'otel[:ENDPOINT]' or 'memory'",
            field="telemetry.exporter",
        )
    return exporter


def telemetry_sink(spec: str, *, redact: Any = None, **options: Any) -> Any:
    """The telemetry sink for an exporter name: live OTel spans for ``otel``, a batch processor otherwise.

    Raises:
        ConfigError: for a spec no exporter answers to (field ``telemetry.exporter``).
        MissingExtra: when the exporter's optional dependency is not installed.
    """
    text = spec.strip()
    kind, _, rest = text.partition(":")
    if kind.lower() in ("otel", "otlp"):
        return _load("OtelTelemetry")(endpoint=rest or None, redact=redact, **options)
    from ..telemetry import BatchProcessor

    return BatchProcessor(get_exporter(text, **options), redact=redact)
