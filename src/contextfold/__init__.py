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
    "ConfigError": "errors",
    "ContextOverflowError": "errors",
    "ContextfoldError": "errors",
    "DocumentPart": "messages",
    "ImagePart": "messages",
    "InsufficientBudget": "errors",
    "InvalidHistory": "errors",
    "Message": "messages",
    "MissingExtra": "errors",
    "RecoveryFailed": "errors",
    "RefNotFound": "errors",
    "StoreError": "errors",
    "Summarizer": "summarize",
    "SummarizerError": "errors",
    "SummaryRequest": "summarize",
    "SummaryResult": "summarize",
    "TextPart": "messages",
    "ThinkingPart": "messages",
    "TokenCounter": "tokens",
    "ToolCall": "messages",
    "UnknownModel": "errors",
    "UnknownPart": "messages",
}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
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
    from .messages import DocumentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall, UnknownPart
    from .summarize import Summarizer, SummaryRequest, SummaryResult
    from .tokens import TokenCounter


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'contextfold' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
