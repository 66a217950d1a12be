"""Telemetry: typed events, the tracer that nests them in spans, and the sinks and batch processor that send them.

Contract: every decision is an :class:`Event` (``events``; ids and UTC times from ``_clock``); a :class:`Tracer`
stamps events with the session's trace and the current span; sinks implement :class:`Telemetry` (``sinks``), and
:class:`BatchProcessor` hands batches to an :class:`Exporter` on its own thread, never blocking the agent.
Exporters to real backends are edges (:mod:`contextfold.exporters`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._clock import format_time, new_span_id, new_trace_id, parse_time, utc_now
    from .events import (
        COMMON_FIELDS,
        EVENT_TYPES,
        STATUSES,
        AddRolledBack,
        CacheDecision,
        CacheMasked,
        CacheTruncated,
        CompactError,
        CompactWarning,
        CustomEvent,
        Event,
        MediaEvicted,
        MessagesPruned,
        ProviderContextReport,
        ProviderItemDropped,
        RecoveryCircuitOpen,
        RecoveryGaveUp,
        RecoveryLimitLearned,
        RecoveryMediaLimit,
        RecoveryOverflow,
        RecoveryRetry,
        SessionTrace,
        SpanEvent,
        Status,
        SummaryCreated,
        TokenEstimate,
        TriggerDecision,
        UsageRecorded,
        event_from_dict,
    )
    from .exporter import Batch, Exporter, shutdown_exporter
    from .processor import (
        DEFAULT_FLUSH_TIMEOUT_S,
        DEFAULT_MAX_BATCH,
        DEFAULT_MAX_QUEUE,
        DEFAULT_SCHEDULE_DELAY_S,
        BatchProcessor,
        ProcessorStats,
        Redactor,
    )
    from .sinks import FanoutTelemetry, NullTelemetry, RecordingTelemetry, Telemetry
    from .tracer import FixedClock, SequentialIds, Span, Tracer, trace_id_for_session

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "Batch": ".exporter",
    "Exporter": ".exporter",
    "shutdown_exporter": ".exporter",
    "BatchProcessor": ".processor",
    "COMMON_FIELDS": ".events",
    "CacheDecision": ".events",
    "CacheMasked": ".events",
    "CacheTruncated": ".events",
    "AddRolledBack": ".events",
    "CompactError": ".events",
    "CompactWarning": ".events",
    "CustomEvent": ".events",
    "DEFAULT_FLUSH_TIMEOUT_S": ".processor",
    "DEFAULT_MAX_BATCH": ".processor",
    "DEFAULT_MAX_QUEUE": ".processor",
    "DEFAULT_SCHEDULE_DELAY_S": ".processor",
    "EVENT_TYPES": ".events",
    "Event": ".events",
    "FanoutTelemetry": ".sinks",
    "FixedClock": ".tracer",
    "MessagesPruned": ".events",
    "NullTelemetry": ".sinks",
    "ProcessorStats": ".processor",
    "ProviderContextReport": ".events",
    "ProviderItemDropped": ".events",
    "RecordingTelemetry": ".sinks",
    "RecoveryCircuitOpen": ".events",
    "RecoveryLimitLearned": ".events",
    "RecoveryMediaLimit": ".events",
    "MediaEvicted": ".events",
    "RecoveryGaveUp": ".events",
    "RecoveryOverflow": ".events",
    "RecoveryRetry": ".events",
    "Redactor": ".processor",
    "STATUSES": ".events",
    "SequentialIds": ".tracer",
    "SessionTrace": ".events",
    "Span": ".tracer",
    "SpanEvent": ".events",
    "Status": ".events",
    "SummaryCreated": ".events",
    "Telemetry": ".sinks",
    "TokenEstimate": ".events",
    "Tracer": ".tracer",
    "TriggerDecision": ".events",
    "UsageRecorded": ".events",
    "event_from_dict": ".events",
    "format_time": "._clock",
    "new_span_id": "._clock",
    "new_trace_id": "._clock",
    "parse_time": "._clock",
    "trace_id_for_session": ".tracer",
    "utc_now": "._clock",
}
__all__ = [
    "COMMON_FIELDS", "DEFAULT_FLUSH_TIMEOUT_S", "DEFAULT_MAX_BATCH", "DEFAULT_MAX_QUEUE", "DEFAULT_SCHEDULE_DELAY_S",
    "EVENT_TYPES", "STATUSES", "AddRolledBack", "Batch", "BatchProcessor", "CacheDecision", "CacheMasked",
    "CacheTruncated",
    "CompactError", "CompactWarning", "CustomEvent", "Event", "Exporter", "FanoutTelemetry", "FixedClock",
    "MediaEvicted", "MessagesPruned", "NullTelemetry", "ProcessorStats", "ProviderContextReport", "ProviderItemDropped",
    "RecordingTelemetry", "RecoveryCircuitOpen", "RecoveryGaveUp", "RecoveryLimitLearned", "RecoveryMediaLimit",
    "RecoveryOverflow", "RecoveryRetry", "Redactor", "SequentialIds", "SessionTrace", "Span", "SpanEvent", "Status",
    "SummaryCreated", "Telemetry", "TokenEstimate", "Tracer", "TriggerDecision",
    "UsageRecorded", "event_from_dict", "format_time", "new_span_id", "new_trace_id", "parse_time",
    "shutdown_exporter", "trace_id_for_session", "utc_now",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
