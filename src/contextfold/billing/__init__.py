"""The input bill with prompt caching counted: what each request reads from, writes to and pays fresh at a provider.

Contract: :func:`cache_rates` gives a model's caching scheme and prices (``rates``: OpenAI's automatic prefix cache,
Anthropic's breakpoints with 5-minute or 1-hour writes); a :class:`PromptCache` bills one session's requests in order,
each a sequence of :class:`Block` (``blocks_of(messages, count)``), and returns a :class:`RequestBill` (tokens read,
written, fresh; units of one fresh input token; USD); :class:`SessionMeter` does that at several providers at once
and adds up a :class:`Bill` each (``meter``). Pure: no I/O, no clock (times are given).

The model, its assumptions and where each figure comes from are in DESIGN.md ("The bill with prompt caching").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .meter import DEFAULT_CALL_INTERVAL_S, REFERENCE_MODELS, Bill, SessionMeter, reference_rates
    from .prompt_cache import Block, Breakpoints, PromptCache, RequestBill, blocks_of
    from .rates import CacheRates, Scheme, Ttl, cache_rates

# name -> the module that defines it, imported on first use (see contextfold._lazy).
_EXPORTS: dict[str, str] = {
    "Bill": ".meter",
    "Block": ".prompt_cache",
    "Breakpoints": ".prompt_cache",
    "CacheRates": ".rates",
    "DEFAULT_CALL_INTERVAL_S": ".meter",
    "PromptCache": ".prompt_cache",
    "REFERENCE_MODELS": ".meter",
    "RequestBill": ".prompt_cache",
    "Scheme": ".rates",
    "SessionMeter": ".meter",
    "Ttl": ".rates",
    "blocks_of": ".prompt_cache",
    "cache_rates": ".rates",
    "reference_rates": ".meter",
}
__all__ = [
    "DEFAULT_CALL_INTERVAL_S", "REFERENCE_MODELS", "Bill", "Block", "Breakpoints", "CacheRates", "PromptCache",
    "RequestBill", "Scheme", "SessionMeter", "Ttl", "blocks_of", "cache_rates", "reference_rates",
]
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
