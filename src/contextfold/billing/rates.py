"""What a provider's prompt cache charges and how it decides what is cached, per model: :class:`CacheRates`.

Two schemes exist (documented by the providers, cited where each constant is defined):

- ``automatic`` (OpenAI, Google): every prompt of at least 1,024 tokens is cached by prefix, for free; a later
  prompt that starts with a cached prefix reads it at the cached price, in steps of 128 tokens.
- ``breakpoints`` (Anthropic): the client marks blocks with ``cache_control`` (or sets it once at the top level, which
  marks the last block); the prefix up to each mark is written to the cache at a premium (1.25x the input price for
  the 5-minute cache, 2x for the 1-hour one) and read later at a tenth. A lookup walks back at most 20 content
  blocks from each mark looking for an earlier entry.

Prices come from the model registry (:mod:`contextfold.tokens.models`); the rest of a scheme is the provider's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..tokens.models import ModelInfo, get_model, normalize_name

__all__ = [
    "ANTHROPIC_LOOKBACK_BLOCKS",
    "DEFAULT_MIN_CACHEABLE_TOKENS",
    "OPENAI_CACHE_INCREMENT_TOKENS",
    "CacheRates",
    "Scheme",
    "Ttl",
    "cache_rates",
]

Scheme: TypeAlias = Literal["automatic", "breakpoints", "none"]
Ttl: TypeAlias = Literal["5m", "1h"]

# Both providers cache only prompts (OpenAI) or marked prefixes (Anthropic: Sonnet 4/4.5, Opus 4/4.1) of at least
# 1,024 tokens (https://platform.openai.com/docs/guides/prompt-caching, "Caching is enabled automatically for prompts
# that are 1024 tokens or longer"; https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching, "Cache
# limitations").
DEFAULT_MIN_CACHEABLE_TOKENS = 1_024
# Anthropic's larger minimums, by model family (same page): Opus 4.5/4.6 and Haiku 4.5 4,096; Haiku 3 and 3.5 2,048.
_ANTHROPIC_MIN_CACHEABLE: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-5", 4_096), ("claude-opus-4-6", 4_096), ("claude-haiku-4-5", 4_096),
    ("claude-3-5-haiku", 2_048), ("claude-3-haiku", 2_048),
)
# OpenAI serves cache hits "in increments of 128 tokens" past the first 1,024 (OpenAI cookbook, Prompt Caching 201).
OPENAI_CACHE_INCREMENT_TOKENS = 128
# OpenAI's in-memory cache keeps a prefix "5 to 10 minutes of inactivity, up to one hour" (prompt-caching guide): the
# lower bound, so that the model never counts a hit the provider may not give.
OPENAI_LIFETIME_S = 300.0
# Anthropic: "The cache has a 5-minute lifetime, refreshed each time the cached content is used"; the 1-hour cache is
# opt-in (``"ttl": "1h"``) at a higher write price.
ANTHROPIC_LIFETIME_S: dict[Ttl, float] = {"5m": 300.0, "1h": 3_600.0}
# Anthropic looks for an earlier cache entry at most 20 content blocks before each breakpoint.
ANTHROPIC_LOOKBACK_BLOCKS = 20
# When the registry has no 1-hour write price for an Anthropic model: the documented multiplier (2x input).
_ANTHROPIC_1H_WRITE_MULTIPLIER = 2.0


@dataclass(frozen=True, slots=True)
class CacheRates:
    """A model's prompt-cache scheme and prices (USD per 1M tokens; None when the registry has no price).

    Attributes:
        model: The registry name.
        provider: ``openai``, ``anthropic``, ``google`` or another name (no caching modelled).
        scheme: ``automatic`` prefix caching, explicit ``breakpoints``, or ``none``.
        input_price: Fresh input.
        cache_read_price: Input read from the cache (the input price when the provider gives no discount).
        cache_write_price: Input written to the cache, for ``ttl`` (the input price where writing costs nothing
            extra).
        ttl: Anthropic's cache lifetime chosen by the client; None for automatic caching.
        lifetime_s: Seconds an entry lives after its last use.
        min_cacheable_tokens: Shorter prefixes are never cached.
        increment_tokens: Cached tokens are counted in steps of this many past the minimum (1: exact).
        lookback_blocks: How many content blocks before a breakpoint a lookup searches (0: any prefix).
    """

    model: str
    provider: str
    scheme: Scheme
    input_price: float | None
    cache_read_price: float | None
    cache_write_price: float | None
    ttl: Ttl | None
    lifetime_s: float
    min_cacheable_tokens: int
    increment_tokens: int = 1
    lookback_blocks: int = 0

    @property
    def read_ratio(self) -> float:
        """The price of a cached input token in fresh input tokens (0.5 for gpt-4o, 0.1 for Anthropic)."""
        return _ratio(self.cache_read_price, self.input_price)

    @property
    def write_ratio(self) -> float:
        """The price of an input token written to the cache in fresh input tokens (1.25 for Anthropic's 5m)."""
        return _ratio(self.cache_write_price, self.input_price)

    def units(self, fresh: int, read: int, write: int) -> float:
        """A bill in units of one fresh input token: prices differ by model, these ratios compare approaches."""
        return fresh + read * self.read_ratio + write * self.write_ratio

    def usd(self, fresh: int, read: int, write: int) -> float | None:
        """The same bill in USD, or None when the input price is unknown."""
        if self.input_price is None:
            return None
        return self.units(fresh, read, write) * self.input_price / 1_000_000


def _ratio(price: float | None, base: float | None) -> float:
    if price is None or not base:
        return 1.0
    return price / base


def _min_cacheable(provider: str, name: str) -> int:
    if provider == "anthropic":
        key = normalize_name(name)
        for prefix, tokens in _ANTHROPIC_MIN_CACHEABLE:
            if key.startswith(prefix):
                return tokens
    return DEFAULT_MIN_CACHEABLE_TOKENS


def cache_rates(model: str | ModelInfo, *, ttl: Ttl = "5m") -> CacheRates:
    """The prompt-cache scheme and prices of ``model`` (a registry name or a :class:`ModelInfo`).

    ``ttl`` picks Anthropic's write price and lifetime (5 minutes by default, or 1 hour); the other providers
    ignore it. A model without a cache-read price gets the ``none`` scheme: every token is fresh input.

    Raises:
        UnknownModel: a name the registry does not know.
        ValueError: ``ttl`` is neither ``"5m"`` nor ``"1h"``.
    """
    if ttl not in ANTHROPIC_LIFETIME_S:
        raise ValueError(f"ttl: expected '5m' or '1h', got {ttl!r}")
    info = model if isinstance(model, ModelInfo) else get_model(model)
    provider = info.provider
    minimum = _min_cacheable(provider, info.name)
    if provider == "anthropic" and info.cache_read_price is not None:
        write = info.cache_write_price
        if ttl == "1h":
            write = info.cache_write_1h_price
            if write is None and info.input_price is not None:
                write = info.input_price * _ANTHROPIC_1H_WRITE_MULTIPLIER
        return CacheRates(info.name, provider, "breakpoints", info.input_price, info.cache_read_price, write, ttl,
                          ANTHROPIC_LIFETIME_S[ttl], minimum, lookback_blocks=ANTHROPIC_LOOKBACK_BLOCKS)
    if info.cache_read_price is not None:
        # OpenAI and Gemini's implicit caching: automatic, no write premium (the write is billed as input).
        return CacheRates(info.name, provider, "automatic", info.input_price, info.cache_read_price,
                          info.input_price, None, OPENAI_LIFETIME_S, minimum,
                          increment_tokens=OPENAI_CACHE_INCREMENT_TOKENS)
    return CacheRates(info.name, provider, "none", info.input_price, info.input_price, info.input_price, None, 0.0,
                      minimum)
