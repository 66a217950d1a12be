"""A provider's prompt cache, simulated request by request: what each request reads, writes and pays fresh.

A request is a sequence of :class:`Block` (one per message: its identity and its tokens). A prefix is identified by
the chain hash of its blocks' identities, so two requests share a cached prefix exactly when their leading blocks
are identical. Caches match at block boundaries only: a message that changed is paid in full even if its first
tokens did not (a conservative reading of OpenAI's token-level matching, exact for Anthropic, which matches blocks).

- ``automatic`` (OpenAI): every prefix of every request (from the minimum up) is an entry; a request reads the
  longest prefix still alive, rounded down to the increment, and pays the rest as fresh input.
- ``breakpoints`` (Anthropic): entries exist only where a request put a breakpoint. The client modelled puts one
  after the pinned head (system prompt, tools) and one on the last block (Anthropic's top-level automatic caching,
  or ``cache_control`` on the last message, as its multi-turn guidance has it). A lookup walks back from each
  breakpoint at most ``lookback_blocks`` content blocks; the longest entry found is read, everything from there to
  the last breakpoint is written at the write price, and entries are made at every breakpoint.

An entry lives ``lifetime_s`` after its last use (a read refreshes it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..messages import Message
from .rates import CacheRates

__all__ = ["Block", "Breakpoints", "PromptCache", "RequestBill", "blocks_of"]

Breakpoints: TypeAlias = Literal["pinned_and_last", "last"]
# Expired entries are swept when the table grows past this many (a session's requests rarely hold more).
_SWEEP_AT = 50_000


@dataclass(frozen=True, slots=True)
class Block:
    """One unit of a request as a cache sees it.

    Attributes:
        key: The identity of the block's content (``Message.fingerprint()``): equal keys, equal content.
        tokens: Its input tokens.
        parts: Content blocks it makes on Anthropic's wire (text, each tool call, each tool result): the unit of the
            20-block lookback.
        pinned: Part of the stable head (system prompt, tools), after which a client puts its first breakpoint.
    """

    key: str
    tokens: int
    parts: int = 1
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class RequestBill:
    """What one request pays: tokens read from the cache, written to it, and fresh; the bill in units and USD.

    ``units`` counts one fresh input token as 1 (``CacheRates.units``); ``usd`` is None without an input price.
    """

    tokens: int
    cache_read: int
    cache_write: int
    fresh: int
    units: float
    usd: float | None

    @property
    def hit_share(self) -> float:
        """The share of the request's tokens read from the cache."""
        return self.cache_read / self.tokens if self.tokens else 0.0


def blocks_of(messages: Sequence[Message], count: Callable[[Message], int]) -> list[Block]:
    """The blocks of a request made of ``messages``, counted with ``count`` (a ``MessageCounter.count_message``).

    The leading system and developer messages are the pinned head.
    """
    blocks: list[Block] = []
    head = True
    for m in messages:
        head = head and m.role in ("system", "developer")
        parts = len(m.content) if isinstance(m.content, tuple) else int(bool(m.content))
        blocks.append(Block(m.fingerprint(), count(m), max(1, parts + len(m.tool_calls)), head))
    return blocks


def _chain(previous: bytes, key: str) -> bytes:
    return hashlib.blake2b(previous + key.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class PromptCache:
    """One session's prompt cache at one provider: :meth:`bill` each request in order, with its time in seconds.

    >>> from contextfold.billing import Block, PromptCache, cache_rates
    >>> cache = PromptCache(cache_rates("gpt-4o"))
    >>> first = cache.bill([Block("system", 1_500), Block("user", 20)], at=0.0)
    >>> second = cache.bill([Block("system", 1_500), Block("user", 20), Block("reply", 40)], at=20.0)
    >>> first.cache_read, second.cache_read
    (0, 1408)
    """

    def __init__(self, rates: CacheRates, *, breakpoints: Breakpoints = "pinned_and_last") -> None:
        if breakpoints not in ("pinned_and_last", "last"):
            raise ValueError(f"breakpoints: expected 'pinned_and_last' or 'last', got {breakpoints!r}")
        self.rates = rates
        self.breakpoints = breakpoints
        self._entries: dict[bytes, float] = {}  # prefix hash -> time it expires
        self._keys: list[str] = []  # the previous request's block keys and prefix hashes, reused while equal
        self._hashes: list[bytes] = []

    def bill(self, blocks: Sequence[Block], at: float) -> RequestBill:
        """Bill the request ``blocks`` sent at time ``at`` (seconds, non-decreasing) and update the cache."""
        return self._request(blocks, at, commit=True)

    def preview(self, blocks: Sequence[Block], at: float) -> RequestBill:
        """What :meth:`bill` would charge, without changing the cache."""
        return self._request(blocks, at, commit=False)

    def _prefix_hashes(self, blocks: Sequence[Block], commit: bool) -> list[bytes]:
        shared = 0
        for old, new in zip(self._keys, blocks, strict=False):
            if old != new.key:
                break
            shared += 1
        hashes = self._hashes[:shared]
        previous = hashes[-1] if hashes else b""
        for b in blocks[shared:]:
            previous = _chain(previous, b.key)
            hashes.append(previous)
        if commit:
            self._keys = [b.key for b in blocks]
            self._hashes = hashes
        return hashes

    def _alive(self, key: bytes, at: float) -> bool:
        expires = self._entries.get(key)
        return expires is not None and expires >= at

    def _request(self, blocks: Sequence[Block], at: float, *, commit: bool) -> RequestBill:
        rates = self.rates
        total = sum(b.tokens for b in blocks)
        if rates.scheme == "none" or not blocks:
            return RequestBill(total, 0, 0, total, float(total), rates.usd(total, 0, 0))
        hashes = self._prefix_hashes(blocks, commit)
        cumulative: list[int] = []
        running = 0
        for b in blocks:
            running += b.tokens
            cumulative.append(running)
        if rates.scheme == "automatic":
            read, write, stored = self._automatic(hashes, cumulative, at)
        else:
            read, write, stored = self._breakpoints(blocks, hashes, cumulative, at)
        fresh = total - read - write
        if commit:
            expires = at + rates.lifetime_s
            for i in stored:
                self._entries[hashes[i]] = expires
            if len(self._entries) > _SWEEP_AT:
                self._entries = {k: t for k, t in self._entries.items() if t >= at}
        return RequestBill(total, read, write, fresh, rates.units(fresh, read, write), rates.usd(fresh, read, write))

    def _automatic(self, hashes: list[bytes], cumulative: list[int],
                   at: float) -> tuple[int, int, list[int]]:
        """OpenAI: the longest live prefix is read (rounded down to the increment); every prefix becomes an entry."""
        rates = self.rates
        # Every stored prefix was stored with all its shorter prefixes and refreshed with them, so the live ones of
        # this request are a leading run.
        hit = -1
        for i, h in enumerate(hashes):
            if not self._alive(h, at):
                break
            hit = i
        read = 0
        if hit >= 0 and cumulative[hit] >= rates.min_cacheable_tokens:
            over = cumulative[hit] - rates.min_cacheable_tokens
            read = rates.min_cacheable_tokens + over - over % rates.increment_tokens
        # Every prefix is kept, short ones too: a hit is the longest live run, counted only from the minimum up.
        return read, 0, list(range(len(cumulative)))

    def _breakpoint_positions(self, blocks: Sequence[Block]) -> list[int]:
        last = len(blocks) - 1
        positions = [last]
        if self.breakpoints == "pinned_and_last":
            pinned = [i for i, b in enumerate(blocks) if b.pinned]
            if pinned and pinned[-1] != last:
                positions.insert(0, pinned[-1])
        return positions

    def _breakpoints(self, blocks: Sequence[Block], hashes: list[bytes], cumulative: list[int],
                     at: float) -> tuple[int, int, list[int]]:
        """Anthropic: read the longest entry within the lookback of a breakpoint, write up to the last breakpoint."""
        rates = self.rates
        positions = self._breakpoint_positions(blocks)
        hit = -1
        for p in positions:
            walked = 0
            i = p
            while i > hit and walked <= rates.lookback_blocks:
                if self._alive(hashes[i], at):
                    hit = i
                    break
                walked += blocks[i].parts
                i -= 1
        read = cumulative[hit] if hit >= 0 else 0
        last = positions[-1]
        cacheable = cumulative[last] >= rates.min_cacheable_tokens
        write = cumulative[last] - read if cacheable else 0
        stored = [p for p in positions if cumulative[p] >= rates.min_cacheable_tokens]
        if hit >= 0:
            stored.append(hit)  # a read refreshes the entry it read
        return read, write, stored
