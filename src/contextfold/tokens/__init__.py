"""Token counting: exact tokenizers shipped offline, estimates grounded in reported usage, the model registry.

Contract: a :class:`TokenCounter` counts text; :class:`MessageCounter` counts messages in a wire format with a cache
keyed by fingerprint (``counting``); :class:`ModelInfo` gives windows, tokenizers and prices (``models``);
:class:`TokenUsage` / :class:`UsageTracker` hold what providers report (``usage``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .counting import (
        CHARS_PER_TOKEN,
        OVERHEADS,
        EstimatingCounter,
        MessageCounter,
        Overhead,
        TiktokenCounter,
        TokenCounter,
        counter_for_model,
    )
    from .models import (
        ModelInfo,
        encoding_for_model,
        get_model,
        guess_provider,
        known_models,
        lookup_model,
        normalize_name,
        register_model,
        unregister_model,
    )
    from .usage import TokenUsage, UsageTracker

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "CHARS_PER_TOKEN": ".counting",
    "EstimatingCounter": ".counting",
    "MessageCounter": ".counting",
    "ModelInfo": ".models",
    "OVERHEADS": ".counting",
    "Overhead": ".counting",
    "TiktokenCounter": ".counting",
    "TokenCounter": ".counting",
    "TokenUsage": ".usage",
    "UsageTracker": ".usage",
    "counter_for_model": ".counting",
    "encoding_for_model": ".models",
    "get_model": ".models",
    "guess_provider": ".models",
    "known_models": ".models",
    "lookup_model": ".models",
    "normalize_name": ".models",
    "register_model": ".models",
    "unregister_model": ".models",
}
__all__ = [
    "CHARS_PER_TOKEN", "OVERHEADS", "EstimatingCounter", "MessageCounter", "ModelInfo", "Overhead", "TiktokenCounter",
    "TokenCounter", "TokenUsage", "UsageTracker", "counter_for_model", "encoding_for_model", "get_model",
    "guess_provider", "known_models", "lookup_model", "normalize_name", "register_model", "unregister_model",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
