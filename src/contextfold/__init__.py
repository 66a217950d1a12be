"""contextfold: keep long-running LLM agents inside their context window without losing what matters.

The public API is re-exported here and resolved lazily, so that ``import contextfold`` stays fast and never
imports an optional dependency.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it; resolved on first attribute access.
_EXPORTS: dict[str, str] = {
    "Action": "policy",
    "Archive": "archive",
    "ArchiveStore": "archive",
    "BatchProcessor": "processor",
    "BlobStore": "blobs",
    "Budgets": "policy",
    "CacheConfig": "cache",
    "Category": "classify",
    "ChatProvider": "providers",
    "CompactionReport": "manager",
    "CompactionResult": "compact",
    "Completion": "providers",
    "ConfigError": "errors",
    "ContextManager": "manager",
    "ContextOverflowError": "errors",
    "ContextfoldError": "errors",
    "DocumentPart": "messages",
    "EstimatingCounter": "tokens",
    "Event": "events",
    "Exporter": "exporters",
    "ExtractiveSummarizer": "summarize",
    "HistorySearchTool": "history_search",
    "ImagePart": "messages",
    "InsufficientBudget": "errors",
    "InvalidHistory": "errors",
    "LLMSummarizer": "summarize",
    "LocalBlobStore": "stores",
    "MaskResult": "masking",
    "MemoryBlobStore": "stores",
    "MemorySessionStore": "stores.session",
    "Message": "messages",
    "MessageCounter": "tokens",
    "MissingExtra": "errors",
    "ModelInfo": "models",
    "NullTelemetry": "telemetry",
    "OverflowInfo": "overflow",
    "Plan": "policy",
    "Policy": "policy",
    "RecordedSession": "importers",
    "RecordingTelemetry": "telemetry",
    "RecoveryFailed": "errors",
    "Redactor": "redact",
    "RefNotFound": "errors",
    "ReplayOptions": "replay",
    "SessionConflict": "stores.session",
    "SessionStore": "stores.session",
    "Settings": "config",
    "Status": "manager",
    "StoreError": "errors",
    "Summarizer": "summarize",
    "SummarizerError": "errors",
    "SummaryRequest": "summarize",
    "SummaryResult": "summarize",
    "Telemetry": "telemetry",
    "TextPart": "messages",
    "ThinkingPart": "messages",
    "TiktokenCounter": "tokens",
    "TokenCounter": "tokens",
    "TokenUsage": "usage",
    "ToolCall": "messages",
    "ToolOutputCache": "cache",
    "ToolOutputRef": "cache",
    "Tracer": "tracing",
    "TruncatedText": "truncate",
    "UnknownModel": "errors",
    "UnknownPart": "messages",
    "UsageTracker": "usage",
    "acall_with_recovery": "recovery",
    "call_with_recovery": "recovery",
    "classify": "classify",
    "compact": "compact",
    "convert": "formats",
    "counter_for_model": "tokens",
    "decide": "policy",
    "detect_format": "formats",
    "extract_entities": "summarize",
    "get_exporter": "exporters",
    "get_format": "formats",
    "get_model": "models",
    "get_provider": "providers",
    "history_search": "history_search",
    "load_session": "importers",
    "load_sessions": "importers",
    "load_settings": "config",
    "mask_tool_outputs": "masking",
    "message_from_dict": "serialize",
    "message_to_dict": "serialize",
    "normalize": "normalize",
    "open_blob_store": "stores",
    "parse_overflow": "overflow",
    "plan_compaction": "compact",
    "register_model": "models",
    "replay_session": "replay",
    "retrieval_tool_schemas": "retrieval",
    "run_replay": "replay",
    "truncate_text": "truncate",
}

__all__ = [
    "Action",
    "Archive",
    "ArchiveStore",
    "BatchProcessor",
    "BlobStore",
    "Budgets",
    "CacheConfig",
    "Category",
    "ChatProvider",
    "CompactionReport",
    "CompactionResult",
    "Completion",
    "ConfigError",
    "ContextManager",
    "ContextOverflowError",
    "ContextfoldError",
    "DocumentPart",
    "EstimatingCounter",
    "Event",
    "Exporter",
    "ExtractiveSummarizer",
    "HistorySearchTool",
    "ImagePart",
    "InsufficientBudget",
    "InvalidHistory",
    "LLMSummarizer",
    "LocalBlobStore",
    "MaskResult",
    "MemoryBlobStore",
    "MemorySessionStore",
    "Message",
    "MessageCounter",
    "MissingExtra",
    "ModelInfo",
    "NullTelemetry",
    "OverflowInfo",
    "Plan",
    "Policy",
    "RecordedSession",
    "RecordingTelemetry",
    "RecoveryFailed",
    "Redactor",
    "RefNotFound",
    "ReplayOptions",
    "SessionConflict",
    "SessionStore",
    "Settings",
    "Status",
    "StoreError",
    "Summarizer",
    "SummarizerError",
    "SummaryRequest",
    "SummaryResult",
    "Telemetry",
    "TextPart",
    "ThinkingPart",
    "TiktokenCounter",
    "TokenCounter",
    "TokenUsage",
    "ToolCall",
    "ToolOutputCache",
    "ToolOutputRef",
    "Tracer",
    "TruncatedText",
    "UnknownModel",
    "UnknownPart",
    "UsageTracker",
    "__version__",
    "acall_with_recovery",
    "call_with_recovery",
    "classify",
    "compact",
    "convert",
    "counter_for_model",
    "decide",
    "detect_format",
    "extract_entities",
    "get_exporter",
    "get_format",
    "get_model",
    "get_provider",
    "history_search",
    "load_session",
    "load_sessions",
    "load_settings",
    "mask_tool_outputs",
    "message_from_dict",
    "message_to_dict",
    "normalize",
    "open_blob_store",
    "parse_overflow",
    "plan_compaction",
    "register_model",
    "replay_session",
    "retrieval_tool_schemas",
    "run_replay",
    "truncate_text",
]

if TYPE_CHECKING:
    from .archive import Archive, ArchiveStore
    from .blobs import BlobStore
    from .cache import CacheConfig, ToolOutputCache, ToolOutputRef
    from .classify import Category, classify
    from .compact import CompactionResult, compact, plan_compaction
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
    from .events import Event
    from .exporters import Exporter, get_exporter
    from .formats import convert, detect_format, get_format
    from .history_search import HistorySearchTool, history_search
    from .importers import RecordedSession, load_session, load_sessions
    from .manager import CompactionReport, ContextManager, Status
    from .masking import MaskResult, mask_tool_outputs
    from .messages import DocumentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart
    from .models import ModelInfo, get_model, register_model
    from .normalize import normalize
    from .overflow import OverflowInfo, parse_overflow
    from .policy import Action, Budgets, Plan, Policy, decide
    from .processor import BatchProcessor
    from .providers import ChatProvider, Completion, get_provider
    from .recovery import acall_with_recovery, call_with_recovery
    from .redact import Redactor
    from .replay import ReplayOptions, replay_session, run_replay
    from .retrieval import retrieval_tool_schemas
    from .serialize import message_from_dict, message_to_dict
    from .stores import LocalBlobStore, MemoryBlobStore, open_blob_store
    from .stores.session import MemorySessionStore, SessionConflict, SessionStore
    from .summarize import (
        ExtractiveSummarizer,
        LLMSummarizer,
        Summarizer,
        SummaryRequest,
        SummaryResult,
        extract_entities,
    )
    from .telemetry import NullTelemetry, RecordingTelemetry, Telemetry
    from .tokens import EstimatingCounter, MessageCounter, TiktokenCounter, TokenCounter, counter_for_model
    from .tracing import Tracer
    from .truncate import TruncatedText, truncate_text
    from .usage import TokenUsage, UsageTracker

def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'contextfold' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
