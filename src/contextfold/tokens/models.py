"""The model registry: context window, max output, tokenizer and prices of current models.

Lookups go, in order: models registered by the user, the built-in table below, litellm's bundled model map (when
litellm is installed), genai-prices (when installed). Prices come from genai-prices when it knows the model, else
from the table. Keyword overrides given to :func:`get_model` win over everything.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from importlib.util import find_spec
from typing import Any, TypeAlias

from ..errors import UnknownModel

__all__ = [
    "ModelInfo",
    "encoding_for_model",
    "get_model",
    "guess_provider",
    "known_models",
    "lookup_model",
    "normalize_name",
    "register_model",
    "unregister_model",
]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What contextfold needs to know about a model. Prices are USD per 1M tokens (None when unknown).

    ``tokenizer`` is a tiktoken encoding name (``o200k_base``, ``cl100k_base``) for exact counting, or a family
    name (``claude``, ``gemini``, ``llama3``, …) that selects an estimate. Prompt-cache prices: ``cache_read_price``
    for input served from the provider's cache, ``cache_write_price`` for input written to it (Anthropic's
    5-minute cache; OpenAI and Google charge no write premium and leave it None), ``cache_write_1h_price`` for
    Anthropic's 1-hour cache. :mod:`contextfold.billing` turns them into a bill.
    """

    name: str
    provider: str
    context_window: int
    max_output_tokens: int
    tokenizer: str
    input_price: float | None = None
    output_price: float | None = None
    cache_read_price: float | None = None
    cache_write_price: float | None = None
    cache_write_1h_price: float | None = None

    def cost(self, input: int = 0, output: int = 0, cache_read: int = 0, cache_creation: int = 0,
             cache_creation_1h: int = 0) -> float | None:
        """USD cost of the given token counts, or None when a needed price is unknown.

        ``cache_creation`` is billed at the 5-minute write price, ``cache_creation_1h`` at the 1-hour one; a
        missing cache price falls back to the input price (no discount, no premium).
        """
        if self.input_price is None or self.output_price is None:
            return None
        read = self.cache_read_price if self.cache_read_price is not None else self.input_price
        write = self.cache_write_price if self.cache_write_price is not None else self.input_price
        write_1h = self.cache_write_1h_price if self.cache_write_1h_price is not None else write
        total = (input * self.input_price + output * self.output_price + cache_read * read + cache_creation * write
                 + cache_creation_1h * write_1h)
        return total / 1_000_000


# ---- the built-in table -------------------------------------------------------------------------------------------

ModelRow: TypeAlias = tuple[
    str, str, int, int, str, float | None, float | None, float | None, float | None, float | None
]

# name, provider, context window, max output, tokenizer, USD per 1M: input, output, cache read, cache write
# (5 minutes), cache write (1 hour).
# Windows and output caps from the providers' model pages (late 2025); open-weight models list the native window
# of the released weights (hosts may serve less) and a conservative 8k output cap, with no price (host-specific).
# Cache prices: OpenAI's "cached input" column (https://platform.openai.com/docs/pricing: gpt-4o $2.50 input,
# $1.25 cached; no write premium, caching is automatic); Anthropic's "5m cache writes", "1h cache writes" and
# "cache hits" columns (https://docs.anthropic.com/en/docs/about-claude/pricing: Sonnet 4 $3 / $3.75 / $6 / $0.30,
# i.e. 1.25x, 2x and 0.1x the input price).
# Maintained by hand: add a row when a provider ships a model; genai-prices refreshes prices when installed.
BUILTIN_MODELS: tuple[ModelRow, ...] = (
    # OpenAI
    ("gpt-5.1", "openai", 400_000, 128_000, "o200k_base", 1.25, 10.0, 0.125, None, None),
    ("gpt-5", "openai", 400_000, 128_000, "o200k_base", 1.25, 10.0, 0.125, None, None),
    ("gpt-5-mini", "openai", 400_000, 128_000, "o200k_base", 0.25, 2.0, 0.025, None, None),
    ("gpt-5-nano", "openai", 400_000, 128_000, "o200k_base", 0.05, 0.4, 0.005, None, None),
    ("gpt-5-codex", "openai", 400_000, 128_000, "o200k_base", 1.25, 10.0, 0.125, None, None),
    ("gpt-4.1", "openai", 1_047_576, 32_768, "o200k_base", 2.0, 8.0, 0.5, None, None),
    ("gpt-4.1-mini", "openai", 1_047_576, 32_768, "o200k_base", 0.4, 1.6, 0.1, None, None),
    ("gpt-4.1-nano", "openai", 1_047_576, 32_768, "o200k_base", 0.1, 0.4, 0.025, None, None),
    ("gpt-4o", "openai", 128_000, 16_384, "o200k_base", 2.5, 10.0, 1.25, None, None),
    ("gpt-4o-mini", "openai", 128_000, 16_384, "o200k_base", 0.15, 0.6, 0.075, None, None),
    ("chatgpt-4o", "openai", 128_000, 16_384, "o200k_base", 5.0, 15.0, None, None, None),
    ("o1", "openai", 200_000, 100_000, "o200k_base", 15.0, 60.0, 7.5, None, None),
    ("o1-mini", "openai", 128_000, 65_536, "o200k_base", 1.1, 4.4, 0.55, None, None),
    ("o3", "openai", 200_000, 100_000, "o200k_base", 2.0, 8.0, 0.5, None, None),
    ("o3-pro", "openai", 200_000, 100_000, "o200k_base", 20.0, 80.0, None, None, None),
    ("o3-mini", "openai", 200_000, 100_000, "o200k_base", 1.1, 4.4, 0.55, None, None),
    ("o4-mini", "openai", 200_000, 100_000, "o200k_base", 1.1, 4.4, 0.275, None, None),
    ("gpt-oss-120b", "openai", 131_072, 32_768, "o200k_base", None, None, None, None, None),
    ("gpt-oss-20b", "openai", 131_072, 32_768, "o200k_base", None, None, None, None, None),
    ("gpt-4-turbo", "openai", 128_000, 4_096, "cl100k_base", 10.0, 30.0, None, None, None),
    ("gpt-4-32k", "openai", 32_768, 4_096, "cl100k_base", 60.0, 120.0, None, None, None),
    ("gpt-4", "openai", 8_192, 4_096, "cl100k_base", 30.0, 60.0, None, None, None),
    ("gpt-3.5-turbo", "openai", 16_385, 4_096, "cl100k_base", 0.5, 1.5, None, None, None),
    # Anthropic (cache writes: 5-minute cache, then 1-hour cache)
    ("claude-opus-4-5", "anthropic", 200_000, 64_000, "claude", 5.0, 25.0, 0.5, 6.25, 10.0),
    ("claude-sonnet-4-5", "anthropic", 200_000, 64_000, "claude", 3.0, 15.0, 0.3, 3.75, 6.0),
    ("claude-haiku-4-5", "anthropic", 200_000, 64_000, "claude", 1.0, 5.0, 0.1, 1.25, 2.0),
    ("claude-opus-4-1", "anthropic", 200_000, 32_000, "claude", 15.0, 75.0, 1.5, 18.75, 30.0),
    ("claude-opus-4", "anthropic", 200_000, 32_000, "claude", 15.0, 75.0, 1.5, 18.75, 30.0),
    ("claude-sonnet-4", "anthropic", 200_000, 64_000, "claude", 3.0, 15.0, 0.3, 3.75, 6.0),
    ("claude-3-7-sonnet", "anthropic", 200_000, 64_000, "claude", 3.0, 15.0, 0.3, 3.75, 6.0),
    ("claude-3-5-sonnet", "anthropic", 200_000, 8_192, "claude", 3.0, 15.0, 0.3, 3.75, 6.0),
    ("claude-3-5-haiku", "anthropic", 200_000, 8_192, "claude", 0.8, 4.0, 0.08, 1.0, 1.6),
    ("claude-3-opus", "anthropic", 200_000, 4_096, "claude", 15.0, 75.0, 1.5, 18.75, 30.0),
    ("claude-3-haiku", "anthropic", 200_000, 4_096, "claude", 0.25, 1.25, 0.03, 0.3, 0.5),
    # Google (prices of prompts up to 200k tokens)
    ("gemini-3-pro", "google", 1_048_576, 65_536, "gemini", 2.0, 12.0, 0.2, None, None),
    ("gemini-2.5-pro", "google", 1_048_576, 65_536, "gemini", 1.25, 10.0, 0.125, None, None),
    ("gemini-2.5-flash", "google", 1_048_576, 65_536, "gemini", 0.3, 2.5, 0.03, None, None),
    ("gemini-2.5-flash-lite", "google", 1_048_576, 65_536, "gemini", 0.1, 0.4, 0.01, None, None),
    ("gemini-2.0-flash", "google", 1_048_576, 8_192, "gemini", 0.1, 0.4, 0.025, None, None),
    ("gemini-2.0-flash-lite", "google", 1_048_576, 8_192, "gemini", 0.075, 0.3, None, None, None),
    ("gemini-1.5-pro", "google", 2_097_152, 8_192, "gemini", 1.25, 5.0, None, None, None),
    ("gemini-1.5-flash", "google", 1_048_576, 8_192, "gemini", 0.075, 0.3, None, None, None),
    # Open-weight models
    ("llama-4-maverick", "meta", 1_048_576, 8_192, "llama4", None, None, None, None, None),
    ("llama-4-scout", "meta", 10_485_760, 8_192, "llama4", None, None, None, None, None),
    ("llama-3.3-70b", "meta", 131_072, 8_192, "llama3", None, None, None, None, None),
    ("llama-3.2-1b", "meta", 131_072, 8_192, "llama3", None, None, None, None, None),
    ("llama-3.2-3b", "meta", 131_072, 8_192, "llama3", None, None, None, None, None),
    ("llama-3.1-8b", "meta", 131_072, 8_192, "llama3", None, None, None, None, None),
    ("llama-3.1-70b", "meta", 131_072, 8_192, "llama3", None, None, None, None, None),
    ("llama-3.1-405b", "meta", 131_072, 8_192, "llama3", None, None, None, None, None),
    ("qwen3-coder-480b-a35b", "qwen", 262_144, 8_192, "qwen", None, None, None, None, None),
    ("qwen3-235b-a22b", "qwen", 32_768, 8_192, "qwen", None, None, None, None, None),
    ("qwen3-32b", "qwen", 32_768, 8_192, "qwen", None, None, None, None, None),
    ("qwen2.5-coder-32b", "qwen", 32_768, 8_192, "qwen", None, None, None, None, None),
    ("qwen2.5-72b", "qwen", 32_768, 8_192, "qwen", None, None, None, None, None),
    ("mistral-large", "mistral", 131_072, 8_192, "mistral", 2.0, 6.0, None, None, None),
    ("mistral-medium", "mistral", 131_072, 8_192, "mistral", 0.4, 2.0, None, None, None),
    ("mistral-small", "mistral", 131_072, 8_192, "mistral", 0.1, 0.3, None, None, None),
    ("codestral", "mistral", 256_000, 8_192, "mistral", 0.3, 0.9, None, None, None),
    ("mixtral-8x7b", "mistral", 32_768, 8_192, "mistral", None, None, None, None, None),
    ("mistral-7b", "mistral", 32_768, 8_192, "mistral", None, None, None, None, None),
    ("deepseek-chat", "deepseek", 128_000, 8_192, "deepseek", 0.28, 0.42, 0.028, None, None),
    ("deepseek-reasoner", "deepseek", 128_000, 65_536, "deepseek", 0.28, 0.42, 0.028, None, None),
    ("deepseek-v3", "deepseek", 131_072, 8_192, "deepseek", None, None, None, None, None),
    ("deepseek-r1", "deepseek", 131_072, 32_768, "deepseek", None, None, None, None, None),
)


# ---- names ------------------------------------------------------------------------------------------------------

# Routing prefixes that gateways and SDKs put in front of a model id.
# fmt: off
_PREFIXES = (
    "openai/", "azure/", "anthropic/", "bedrock/", "vertex_ai/", "vertex_ai_beta/", "gemini/", "google/",
    "models/", "openrouter/", "together_ai/", "together/", "groq/", "fireworks_ai/", "accounts/fireworks/models/",
    "deepinfra/", "ollama/", "ollama_chat/", "mistral/", "deepseek/", "meta-llama/", "qwen/", "mistralai/",
    "deepseek-ai/", "litellm_proxy/", "hosted_vllm/"
)
# fmt: on
# Bedrock ids: "us.anthropic.claude-3-7-sonnet-20250219-v1:0".
_BEDROCK = re.compile(r"^(?:[a-z]{2}\.)?(?:anthropic|meta|mistral|amazon|deepseek)\.")
_BEDROCK_VERSION = re.compile(r"-v\d+:\d+$")
# Dated or tagged snapshots of one model: -2024-08-06, -20250514, @20240620, -0613, -latest, -preview-05-06, -exp.
_SUFFIXES = (
    re.compile(r"[-@]\d{4}-\d{2}-\d{2}$"),
    re.compile(r"[-@]\d{8}$"),
    re.compile(r"-\d{4}$"),
    re.compile(r"-(?:preview|exp)(?:-\d{2}-\d{2})?$"),
    re.compile(r"-(?:latest|instruct|chat-hf|hf|it|fp8|turbo-instruct)$"),
    re.compile(r":latest$"),
)
# Ollama tags: "llama3.1:8b" is llama-3.1-8b.
_OLLAMA_LLAMA = re.compile(r"^llama(\d)")
_OLLAMA_SIZE = re.compile(r":(\d+(?:\.\d+)?b)$")


def normalize_name(model: str) -> str:
    """The registry key of ``model``: lower case, gateway prefixes and Bedrock decoration removed."""
    name = model.strip().lower()
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix) :]
                changed = True
    name = _BEDROCK.sub("", name)
    name = _OLLAMA_SIZE.sub(r"-\1", _OLLAMA_LLAMA.sub(r"llama-\1", name))
    return _BEDROCK_VERSION.sub("", name)


def _candidates(name: str) -> list[str]:
    """``name`` and the names left by removing snapshot suffixes one at a time."""
    out = [name]
    changed = True
    while changed:
        changed = False
        for pattern in _SUFFIXES:
            shorter = pattern.sub("", out[-1])
            if shorter != out[-1] and shorter:
                out.append(shorter)
                changed = True
    return out


def guess_provider(model: str) -> str:
    """The provider a model name belongs to, from its shape (``openai``, ``anthropic``, ``google``, ``other``)."""
    raw = model.strip().lower()
    name = normalize_name(raw)
    if "claude" in name or raw.startswith("anthropic"):
        return "anthropic"
    if name.startswith(("gemini", "gemma")) or raw.startswith(("gemini/", "vertex_ai/gemini", "google/")):
        return "google"
    if name.startswith(("gpt-", "o1", "o3", "o4", "chatgpt", "codex", "text-embedding")):
        return "openai"
    return "other"


# ---- the registry -----------------------------------------------------------------------------------------------


_BUILTIN: dict[str, ModelInfo] = {row[0]: ModelInfo(*row) for row in BUILTIN_MODELS}
# Longest first, so that "gpt-4o-mini-2024-07-18" matches gpt-4o-mini rather than gpt-4o or gpt-4.
_BUILTIN_BY_LENGTH = sorted(_BUILTIN, key=len, reverse=True)

_LOCK = threading.Lock()
_USER: dict[str, ModelInfo] = {}
# Lookups remembered (a name is resolved once), least recently used dropped past this many: a proxy looks up every
# name a client sends, and a client cycling names must not grow the process.
_RESOLVED: OrderedDict[tuple[str, bool], ModelInfo | None] = OrderedDict()
_RESOLVED_MAX = 1_024


def register_model(
    name: str,
    *,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    tokenizer: str | None = None,
    provider: str | None = None,
    input_price: float | None = None,
    output_price: float | None = None,
    cache_read_price: float | None = None,
    cache_write_price: float | None = None,
    cache_write_1h_price: float | None = None,
) -> ModelInfo:
    """Add or override a model; what is given wins over every other source, the rest is filled from them.

    A model that no source knows needs at least ``context_window``.
    """
    base = lookup_model(name)
    if base is None:
        if context_window is None:
            raise UnknownModel(name)
        base = _guessed(name, context_window)
    given: dict[str, Any] = {
        "context_window": context_window,
        "max_output_tokens": max_output_tokens,
        "tokenizer": tokenizer,
        "provider": provider,
        "input_price": input_price,
        "output_price": output_price,
        "cache_read_price": cache_read_price,
        "cache_write_price": cache_write_price,
        "cache_write_1h_price": cache_write_1h_price,
    }
    info = replace(base, name=name, **{k: v for k, v in given.items() if v is not None})
    _validate(info)
    with _LOCK:
        _USER[normalize_name(name)] = info
        _RESOLVED.clear()
    return info


def unregister_model(name: str) -> None:
    """Remove a model added with :func:`register_model` (no error when it was not registered)."""
    with _LOCK:
        _USER.pop(normalize_name(name), None)
        _RESOLVED.clear()


def get_model(
    name: str,
    context_window: int | None = None,
    *,
    max_output_tokens: int | None = None,
    tokenizer: str | None = None,
    with_prices: bool = True,
) -> ModelInfo:
    """The :class:`ModelInfo` of ``name``; explicit arguments override what the registry knows.

    ``with_prices=False`` leaves out genai-prices' prices (see :func:`lookup_model`): a ContextManager needs only
    the window and the tokenizer, and the import would be most of its start-up time.

    Raises:
        UnknownModel: no source knows ``name`` and no ``context_window`` was given.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"model: expected a model name, got {name!r}")
    info = lookup_model(name, with_prices=with_prices)
    if info is None:
        if context_window is None:
            raise UnknownModel(name)
        info = _guessed(name, context_window)
    overrides: dict[str, Any] = {}
    if context_window is not None:
        overrides["context_window"] = context_window
    if max_output_tokens is not None:
        overrides["max_output_tokens"] = max_output_tokens
    if tokenizer is not None:
        overrides["tokenizer"] = tokenizer
    if overrides:
        info = replace(info, **overrides)
        if info.max_output_tokens > info.context_window and max_output_tokens is None:
            info = replace(info, max_output_tokens=info.context_window // _GUESSED_OUTPUT_SHARE)
        _validate(info)
    return info


def lookup_model(name: str, *, with_prices: bool = True) -> ModelInfo | None:
    """The :class:`ModelInfo` of ``name`` from the registry's sources, or None (never raises for unknown names).

    ``with_prices=False`` skips genai-prices (a ~0.3 s import) for callers that only need the window or tokenizer.
    """
    key = normalize_name(name)
    with _LOCK:
        if (key, with_prices) in _RESOLVED:
            _RESOLVED.move_to_end((key, with_prices))
            return _RESOLVED[key, with_prices]
    info = _resolve(key, with_prices)
    with _LOCK:
        _RESOLVED[key, with_prices] = info
        while len(_RESOLVED) > _RESOLVED_MAX:
            _RESOLVED.popitem(last=False)
    return info


def known_models() -> list[str]:
    """Names of the built-in and registered models."""
    with _LOCK:
        return sorted({*_BUILTIN, *(info.name for info in _USER.values())})


def _resolve(key: str, with_prices: bool) -> ModelInfo | None:
    with _LOCK:
        user = next((_USER[c] for c in _candidates(key) if c in _USER), None)
    if user is not None:
        return user
    info = _builtin(key) or _from_litellm(key)
    if not with_prices:
        return info
    if info is None:
        return _from_genai_prices(key)
    prices = _genai_prices(key)
    return replace(info, **prices) if prices else info


def _builtin(key: str) -> ModelInfo | None:
    for candidate in _candidates(key):
        info = _BUILTIN.get(candidate)
        if info is not None:
            return info
    # A variant of a known model (gpt-4o-mini-search-preview, claude-3-5-sonnet-v2, llama-3.3-70b-versatile).
    for known in _BUILTIN_BY_LENGTH:
        if key.startswith(known) and key[len(known)] in "-:.@_":
            return _BUILTIN[known]
    return None


# Name prefixes of OpenAI models, newest encoding first (gpt-4o must win over gpt-4).
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss", "chatgpt-4o", "o1", "o3", "o4", "codex")
_CL100K_PREFIXES = ("gpt-4", "gpt-3.5", "gpt-35", "text-embedding-3", "text-embedding-ada-002")


def encoding_for_model(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model name (``o200k_base``/``cl100k_base``), or None for others."""
    name = normalize_name(model)
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return None


# A model only known by its window: reserve a quarter of it for the reply, at most 8k (typical default cap).
_GUESSED_OUTPUT_SHARE = 4
_GUESSED_MAX_OUTPUT = 8_192


def _guessed_tokenizer(name: str) -> str:
    encoding = encoding_for_model(name)
    if encoding is not None:
        return encoding
    return {"anthropic": "claude", "google": "gemini"}.get(guess_provider(name), "estimate")


def _guessed(name: str, context_window: int) -> ModelInfo:
    return ModelInfo(
        name=name,
        provider=guess_provider(name),
        context_window=context_window,
        max_output_tokens=min(_GUESSED_MAX_OUTPUT, max(1, context_window // _GUESSED_OUTPUT_SHARE)),
        tokenizer=_guessed_tokenizer(name),
    )


def _validate(info: ModelInfo) -> None:
    if not isinstance(info.context_window, int) or info.context_window <= 0:
        raise ValueError(f"context_window: must be a positive integer, got {info.context_window!r}")
    if not isinstance(info.max_output_tokens, int) or not 0 < info.max_output_tokens <= info.context_window:
        raise ValueError(
            f"max_output_tokens: must be a positive integer no larger than context_window ({info.context_window}), "
            f"got {info.max_output_tokens!r}"
        )
    for field in ("input_price", "output_price", "cache_read_price", "cache_write_price", "cache_write_1h_price"):
        value = getattr(info, field)
        if value is not None and value < 0:
            raise ValueError(f"{field}: must be >= 0 USD per 1M tokens, got {value!r}")


# ---- optional sources -------------------------------------------------------------------------------------------
# Optional packages are looked up lazily and never allowed to break a lookup: a failure means "not known there".

# A small prompt size for looking a model up in genai-prices: below every tier threshold, so the base rates apply.
_PRICE_PROBE_TOKENS = 1_000
# ModelInfo field <- genai-prices ModelPrice field (both USD per 1M tokens).
_GENAI_PRICE_FIELDS = (
    ("input_price", "input_mtok"),
    ("output_price", "output_mtok"),
    ("cache_read_price", "cache_read_mtok"),
    ("cache_write_price", "cache_write_mtok"),
    ("cache_write_1h_price", "cache_write_1h_mtok"),
)
_LITELLM_MAP_FILE = "model_prices_and_context_window_backup.json"
_LITELLM_INDEX: dict[str, dict[str, Any]] | None = None


def _genai_prices(key: str) -> dict[str, Any]:
    """Prices (USD per 1M tokens) of ``key`` from genai-prices, or {} when it is not installed or does not know it.

    Only the prices genai-prices states are returned, so a missing cache price does not replace the table's.
    """
    if find_spec("genai_prices") is None:
        return {}
    from decimal import Decimal

    try:
        from genai_prices import Usage, calc_price

        model_price = calc_price(Usage(input_tokens=_PRICE_PROBE_TOKENS), key).model_price
    except Exception:
        return {}
    prices: dict[str, Any] = {}
    for ours, theirs in _GENAI_PRICE_FIELDS:
        value = getattr(model_price, theirs, None)
        # Tiered prices (all tokens at a higher rate past a prompt size): the base rate, as the table states it.
        value = getattr(value, "base", value)
        if isinstance(value, Decimal | int | float):
            prices[ours] = float(value)
    return prices


def _from_genai_prices(key: str) -> ModelInfo | None:
    """A model only genai-prices knows (it states the window of many of its models)."""
    if find_spec("genai_prices") is None:
        return None
    try:
        from genai_prices import Usage, calc_price

        calc = calc_price(Usage(input_tokens=_PRICE_PROBE_TOKENS), key)
        window = calc.model.context_window
    except Exception:
        return None
    if not isinstance(window, int) or window <= 0:
        return None
    return replace(_guessed(key, window), **_genai_prices(key))


def _litellm_index() -> dict[str, dict[str, Any]]:
    """The bundled model map of litellm, keyed by normalized name, read from its package without importing litellm.

    Importing litellm takes seconds and, by default, fetches the map over the network; the bundled JSON file
    is the same data, offline.
    """
    global _LITELLM_INDEX
    if _LITELLM_INDEX is not None:
        return _LITELLM_INDEX
    import json
    from pathlib import Path

    index: dict[str, dict[str, Any]] = {}
    try:
        spec = find_spec("litellm")
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        for location in locations:
            path = Path(location) / _LITELLM_MAP_FILE
            if path.is_file():
                raw = json.loads(path.read_text(encoding="utf-8"))
                for name, entry in raw.items():
                    if isinstance(entry, dict) and name != "sample_spec":
                        index.setdefault(normalize_name(name), entry)
                break
    except (OSError, ValueError, ImportError):
        index = {}
    _LITELLM_INDEX = index
    return index


def _from_litellm(key: str) -> ModelInfo | None:
    index = _litellm_index()
    entry = next((index[c] for c in _candidates(key) if c in index), None)
    if entry is None:
        return None
    window = entry.get("max_input_tokens") or entry.get("max_tokens")
    if not isinstance(window, int) or window <= 0:
        return None
    output = entry.get("max_output_tokens") or entry.get("max_tokens")
    if not isinstance(output, int) or not 0 < output <= window:
        output = min(_GUESSED_MAX_OUTPUT, window // _GUESSED_OUTPUT_SHARE)

    def price(field: str) -> float | None:
        value = entry.get(field)
        return float(value) * 1_000_000 if isinstance(value, int | float) else None

    base = _guessed(key, window)
    return replace(
        base,
        max_output_tokens=output,
        input_price=price("input_cost_per_token"),
        output_price=price("output_cost_per_token"),
        cache_read_price=price("cache_read_input_token_cost"),
        cache_write_price=price("cache_creation_input_token_cost"),
        cache_write_1h_price=price("cache_creation_input_token_cost_above_1hr"),
    )
