"""LLM clients used for summarization, chosen by a ``"vendor:model"`` spec and imported lazily.

>>> provider = get_provider("openai:gpt-4o-mini", base_url="http://127.0.0.1:8000/v1")  # doctest: +SKIP
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from ..errors import ConfigError
from ..summarize.provider import ChatMessage, ChatProvider, Completion

__all__ = ["PROVIDERS", "ChatMessage", "ChatProvider", "Completion", "get_provider"]

# Spec prefix -> (module, class, options implied by the prefix). The SDK is imported only when the class is built.
PROVIDERS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "openai": ("openai", "OpenAIProvider", {}),
    "openai-responses": ("openai", "OpenAIProvider", {"api": "responses"}),
    "anthropic": ("anthropic", "AnthropicProvider", {}),
    "litellm": ("litellm", "LiteLLMProvider", {}),
}


def get_provider(spec: str, **options: Any) -> ChatProvider:
    """The provider for ``spec`` (``"openai:gpt-4o-mini"``, ``"anthropic:claude-…"``, ``"litellm:…"``).

    ``options`` go to the provider's constructor (``base_url``, ``api_key``, ``max_retries``, …). Raises
    ConfigError for a malformed spec or unknown vendor, MissingExtra when the vendor's SDK is not installed.
    """
    vendor, sep, model = spec.partition(":")
    if not sep or not model.strip():
        raise ConfigError(f"expected 'vendor:model' such as 'openai:gpt-4o-mini', got {spec!r}", field="provider")
    entry = PROVIDERS.get(vendor.strip().lower())
    if entry is None:
        raise ConfigError(f"unknown provider {vendor!r}; choose one of {', '.join(sorted(PROVIDERS))}",
                          field="provider")
    module, cls, implied = entry
    factory = getattr(import_module(f".{module}", __name__), cls)
    provider: ChatProvider = factory(model.strip(), **{**implied, **options})
    return provider


def __getattr__(name: str) -> Any:
    # The concrete classes resolve on first access so that importing this package never imports an SDK.
    for module, cls, _ in PROVIDERS.values():
        if name == cls:
            return getattr(import_module(f".{module}", __name__), cls)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
