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
    "BlobStore": "stores",
    "Budgets": "policy",
    "CacheConfig": "cache",
    "CompactionReport": "manager",
    "CompactionResult": "compact",
    "ConfigError": "errors",
    "ContextManager": "manager",
    "ContextOverflowError": "errors",
    "ContextfoldError": "errors",
    "DocumentPart": "messages",
    "EstimatingCounter": "tokens",
    "ImagePart": "messages",
    "InsufficientBudget": "errors",
    "InvalidHistory": "errors",
    "LocalBlobStore": "stores",
    "MaskResult": "masking",
    "MemoryBlobStore": "stores",
    "Message": "messages",
    "MessageCounter": "tokens",
    "MissingExtra": "errors",
    "ModelInfo": "models",
    "Plan": "policy",
    "Policy": "policy",
    "RecordedSession": "importers",
    "RecoveryFailed": "errors",
    "RefNotFound": "errors",
    "Status": "manager",
    "StoreError": "errors",
    "Summarizer": "summarize",
    "SummarizerError": "errors",
    "SummaryRequest": "summarize",
    "SummaryResult": "summarize",
    "TextPart": "messages",
    "ThinkingPart": "messages",
    "TiktokenCounter": "tokens",
    "TokenCounter": "tokens",
    "TokenUsage": "usage",
    "ToolCall": "messages",
    "ToolOutputCache": "cache",
    "ToolOutputRef": "cache",
    "TruncatedText": "truncate",
    "UnknownModel": "errors",
    "UnknownPart": "messages",
    "UsageTracker": "usage",
    "compact": "compact",
    "counter_for_model": "tokens",
    "decide": "policy",
    "get_model": "models",
    "load_session": "importers",
    "load_sessions": "importers",
    "mask_tool_outputs": "masking",
    "normalize": "normalize",
    "open_blob_store": "stores",
    "register_model": "models",
    "retrieval_tool_schemas": "retrieval",
    "truncate_text": "truncate",
}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
    from .cache import CacheConfig, ToolOutputCache, ToolOutputRef
    from .compact import CompactionResult, compact
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
    from .importers import RecordedSession, load_session, load_sessions
    from .manager import CompactionReport, ContextManager, Status
    from .masking import MaskResult, mask_tool_outputs
    from .messages import DocumentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart
    from .models import ModelInfo, get_model, register_model
    from .normalize import normalize
    from .policy import Budgets, Plan, Policy, decide
    from .retrieval import retrieval_tool_schemas
    from .stores import BlobStore, LocalBlobStore, MemoryBlobStore, open_blob_store
    from .summarize import Summarizer, SummaryRequest, SummaryResult
    from .tokens import EstimatingCounter, MessageCounter, TiktokenCounter, TokenCounter, counter_for_model
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
