"""contextfold: keep long-running LLM agents inside their context window without losing what matters.

The public API is re-exported here and resolved lazily, so that ``import contextfold`` stays fast and never
imports an optional dependency.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ._lazy import lazy_exports

# A library never prints on its own: without this, the warnings of "contextfold.*" loggers reach stderr through
# logging's last-resort handler in an application that configured no logging. Configured handlers still get them.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"

# name -> the subpackage or module that exports it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "Action": ".compaction",
    "Archive": ".archive",
    "ArchiveStore": ".archive",
    "BatchProcessor": ".telemetry",
    "BlobStore": ".cache",
    "Budgets": ".compaction",
    "CacheConfig": ".cache",
    "Category": ".compaction",
    "ChatProvider": ".summarize",
    "CompactionReport": ".manager",
    "CompactionResult": ".compaction",
    "Completion": ".summarize",
    "ConfigError": ".errors",
    "ContextManager": ".manager",
    "ContextOverflowError": ".errors",
    "ContextfoldError": ".errors",
    "DocumentPart": ".messages",
    "EstimatingCounter": ".tokens",
    "Event": ".telemetry",
    "Exporter": ".exporters",
    "ExtractiveSummarizer": ".summarize",
    "HistorySearchTool": ".archive.search",
    "ImagePart": ".messages",
    "InsufficientBudget": ".errors",
    "InvalidHistory": ".errors",
    "LLMSummarizer": ".summarize",
    "LocalBlobStore": ".stores",
    "MaskResult": ".cache",
    "MemoryBlobStore": ".stores",
    "MemorySessionStore": ".stores.session",
    "Message": ".messages",
    "MessageCounter": ".tokens",
    "MissingExtra": ".errors",
    "ModelInfo": ".tokens",
    "NullTelemetry": ".telemetry",
    "OverflowInfo": ".recovery",
    "Plan": ".compaction",
    "Policy": ".compaction",
    "RecordedSession": ".importers",
    "RecordingTelemetry": ".telemetry",
    "RecoveryFailed": ".errors",
    "Redactor": ".redact",
    "RefNotFound": ".errors",
    "ReplayOptions": ".replay",
    "SessionConflict": ".stores.session",
    "SessionStore": ".stores.session",
    "Settings": ".config",
    "Status": ".manager",
    "StoreError": ".errors",
    "Summarizer": ".summarize",
    "SummarizerError": ".errors",
    "SummaryRequest": ".summarize",
    "SummaryResult": ".summarize",
    "Telemetry": ".telemetry",
    "TextPart": ".messages",
    "ThinkingPart": ".messages",
    "TiktokenCounter": ".tokens",
    "TokenCounter": ".tokens",
    "TokenUsage": ".tokens",
    "ToolCall": ".messages",
    "ToolOutputCache": ".cache",
    "ToolOutputRef": ".cache",
    "Tracer": ".telemetry",
    "TruncatedText": ".truncate",
    "UnknownModel": ".errors",
    "UnknownPart": ".messages",
    "UsageTracker": ".tokens",
    "acall_with_recovery": ".recovery",
    "call_with_recovery": ".recovery",
    "classify": ".compaction",
    "compact": ".compaction",
    "convert": ".formats",
    "counter_for_model": ".tokens",
    "decide": ".compaction",
    "detect_format": ".formats",
    "extract_entities": ".summarize",
    "get_exporter": ".exporters",
    "get_format": ".formats",
    "get_model": ".tokens",
    "get_provider": ".providers",
    "history_search": ".archive.search",
    "load_session": ".importers",
    "load_sessions": ".importers",
    "load_settings": ".config",
    "mask_tool_outputs": ".cache",
    "message_from_dict": ".serialize",
    "message_to_dict": ".serialize",
    "normalize": ".pairing",
    "open_blob_store": ".stores",
    "parse_overflow": ".recovery",
    "plan_compaction": ".compaction",
    "register_model": ".tokens",
    "replay_session": ".replay",
    "retrieval_tool_schemas": ".cache",
    "run_replay": ".replay",
    "truncate_text": ".truncate",
}

__all__ = [
    "Action", "Archive", "ArchiveStore", "BatchProcessor", "BlobStore", "Budgets", "CacheConfig", "Category",
    "ChatProvider", "CompactionReport", "CompactionResult", "Completion", "ConfigError", "ContextManager",
    "ContextOverflowError", "ContextfoldError", "DocumentPart", "EstimatingCounter", "Event", "Exporter",
    "ExtractiveSummarizer", "HistorySearchTool", "ImagePart", "InsufficientBudget", "InvalidHistory", "LLMSummarizer",
    "LocalBlobStore", "MaskResult", "MemoryBlobStore", "MemorySessionStore", "Message", "MessageCounter",
    "MissingExtra", "ModelInfo", "NullTelemetry", "OverflowInfo", "Plan", "Policy", "RecordedSession",
    "RecordingTelemetry", "RecoveryFailed", "Redactor", "RefNotFound", "ReplayOptions", "SessionConflict",
    "SessionStore", "Settings", "Status", "StoreError", "Summarizer", "SummarizerError", "SummaryRequest",
    "SummaryResult", "Telemetry", "TextPart", "ThinkingPart", "TiktokenCounter", "TokenCounter", "TokenUsage",
    "ToolCall", "ToolOutputCache", "ToolOutputRef", "Tracer", "TruncatedText", "UnknownModel", "UnknownPart",
    "UsageTracker", "__version__", "acall_with_recovery", "call_with_recovery", "classify", "compact", "convert",
    "counter_for_model", "decide", "detect_format", "extract_entities", "get_exporter", "get_format", "get_model",
    "get_provider", "history_search", "load_session", "load_sessions", "load_settings", "mask_tool_outputs",
    "message_from_dict", "message_to_dict", "normalize", "open_blob_store", "parse_overflow", "plan_compaction",
    "register_model", "replay_session", "retrieval_tool_schemas", "run_replay", "truncate_text",
]

if TYPE_CHECKING:
    from .archive import Archive, ArchiveStore
    from .archive.search import HistorySearchTool, history_search
    from .cache import (
        BlobStore,
        CacheConfig,
        MaskResult,
        ToolOutputCache,
        ToolOutputRef,
        mask_tool_outputs,
        retrieval_tool_schemas,
    )
    from .compaction import (
        Action,
        Budgets,
        Category,
        CompactionResult,
        Plan,
        Policy,
        classify,
        compact,
        decide,
        plan_compaction,
    )
    from .config import Settings, load_settings
    from .errors import (
        ConfigError,
        ContextfoldError,
        ContextOverflowError,
        InsufficientBudget,
        InvalidHistory,
        MissingExtra,
        RecoveryFailed,
        RefNotFound,
        StoreError,
        SummarizerError,
        UnknownModel,
    )
    from .exporters import Exporter, get_exporter
    from .formats import convert, detect_format, get_format
    from .importers import RecordedSession, load_session, load_sessions
    from .manager import CompactionReport, ContextManager, Status
    from .messages import DocumentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart
    from .pairing import normalize
    from .providers import get_provider
    from .recovery import OverflowInfo, acall_with_recovery, call_with_recovery, parse_overflow
    from .redact import Redactor
    from .replay import ReplayOptions, replay_session, run_replay
    from .serialize import message_from_dict, message_to_dict
    from .stores import LocalBlobStore, MemoryBlobStore, open_blob_store
    from .stores.session import MemorySessionStore, SessionConflict, SessionStore
    from .summarize import (
        ChatProvider,
        Completion,
        ExtractiveSummarizer,
        LLMSummarizer,
        Summarizer,
        SummaryRequest,
        SummaryResult,
        extract_entities,
    )
    from .telemetry import BatchProcessor, Event, NullTelemetry, RecordingTelemetry, Telemetry, Tracer
    from .tokens import (
        EstimatingCounter,
        MessageCounter,
        ModelInfo,
        TiktokenCounter,
        TokenCounter,
        TokenUsage,
        UsageTracker,
        counter_for_model,
        get_model,
        register_model,
    )
    from .truncate import TruncatedText, truncate_text

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
