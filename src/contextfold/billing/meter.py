"""A session's input bill at several providers at once.

:class:`SessionMeter` feeds each request to one :class:`~contextfold.billing.PromptCache` per provider and adds up a
:class:`Bill` each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .prompt_cache import Block, Breakpoints, PromptCache, RequestBill
from .rates import CacheRates, cache_rates

__all__ = ["DEFAULT_CALL_INTERVAL_S", "REFERENCE_MODELS", "Bill", "SessionMeter", "reference_rates"]

# The rates a replay bills at, by provider: gpt-4o (cached input at half price, no write premium) and Claude
# Sonnet 4 (reads at a tenth, 5-minute writes at 1.25x). Recorded sessions ran on these or their peers.
REFERENCE_MODELS: Mapping[str, str] = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4"}
# Recordings carry no times: calls are spaced this far apart. A model call plus a tool run of the recorded agents
# takes tens of seconds; every gap under the 5-minute lifetime bills the same, so the figure only decides when an
# entry left unused for ten calls expires.
DEFAULT_CALL_INTERVAL_S = 30.0


def reference_rates() -> dict[str, CacheRates]:
    """:data:`REFERENCE_MODELS` as :class:`CacheRates` (Anthropic's 5-minute cache)."""
    return {provider: cache_rates(model) for provider, model in REFERENCE_MODELS.items()}


@dataclass(slots=True)
class Bill:
    """The input bill of many requests: tokens by how they were billed, units of one fresh token, USD."""

    requests: int = 0
    tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    fresh: int = 0
    units: float = 0.0
    usd: float | None = 0.0

    def add(self, request: RequestBill) -> None:
        """Count one request."""
        self.requests += 1
        self.tokens += request.tokens
        self.cache_read += request.cache_read
        self.cache_write += request.cache_write
        self.fresh += request.fresh
        self.units += request.units
        self.usd = None if self.usd is None or request.usd is None else self.usd + request.usd

    def merge(self, other: Bill) -> None:
        """Add ``other``'s requests to this bill."""
        self.requests += other.requests
        self.tokens += other.tokens
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.fresh += other.fresh
        self.units += other.units
        self.usd = None if self.usd is None or other.usd is None else self.usd + other.usd

    @property
    def hit_share(self) -> float | None:
        """The share of all tokens read from the cache (None for no tokens)."""
        return self.cache_read / self.tokens if self.tokens else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the replay JSON's ``bill`` entries)."""
        return {"requests": self.requests, "tokens": self.tokens, "cache_read": self.cache_read,
                "cache_write": self.cache_write, "fresh": self.fresh, "units": round(self.units, 3),
                "usd": None if self.usd is None else round(self.usd, 6)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bill:
        """The inverse of :meth:`to_dict`."""
        usd = data.get("usd")
        return cls(int(data["requests"]), int(data["tokens"]), int(data["cache_read"]), int(data["cache_write"]),
                   int(data["fresh"]), float(data["units"]), None if usd is None else float(usd))


@dataclass(slots=True)
class SessionMeter:
    """Bills each request of one session at every provider in ``rates``, ``interval_s`` seconds apart."""

    rates: Mapping[str, CacheRates] = field(default_factory=reference_rates)
    interval_s: float = DEFAULT_CALL_INTERVAL_S
    breakpoints: Breakpoints = "pinned_and_last"
    bills: dict[str, Bill] = field(init=False)
    _caches: dict[str, PromptCache] = field(init=False)
    _calls: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.interval_s < 0:
            raise ValueError(f"interval_s: must not be negative, got {self.interval_s}")
        self._caches = {name: PromptCache(r, breakpoints=self.breakpoints) for name, r in self.rates.items()}
        self.bills = {name: Bill() for name in self.rates}

    def request(self, blocks: Sequence[Block]) -> dict[str, RequestBill]:
        """Bill the next request at every provider; returns each provider's bill of it."""
        return self._next(lambda cache, at: cache.bill(blocks, at))

    def extend(self, added: Sequence[Block]) -> dict[str, RequestBill]:
        """Bill the next request: the previous one followed by ``added`` (a history that only grows).

        O(len(added)) time, and the same bill :meth:`request` gives for the whole request.
        """
        return self._next(lambda cache, at: cache.extend(added, at))

    def _next(self, bill_at: Callable[[PromptCache, float], RequestBill]) -> dict[str, RequestBill]:
        at = self._calls * self.interval_s
        self._calls += 1
        out: dict[str, RequestBill] = {}
        for name, cache in self._caches.items():
            bill = out[name] = bill_at(cache, at)
            self.bills[name].add(bill)
        return out
