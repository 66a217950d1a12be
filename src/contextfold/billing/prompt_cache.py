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
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..messages import Message
from .rates import CacheRates

__all__ = ["Block", "Breakpoints", "PromptCache", "RequestBill", "blocks_of"]

Breakpoints: TypeAlias = Literal["pinned_and_last", "last", "marked"]
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
        breakpoint: The request marks this block with ``cache_control`` (read by ``breakpoints="marked"``).
    """

    key: str
    tokens: int
    parts: int = 1
    pinned: bool = False
    breakpoint: bool = False


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


def blocks_of(messages: Sequence[Message], count: Callable[[Message], int], *, marks: Collection[int] = (),
              memo: dict[int, tuple[Message, str, int, int]] | None = None) -> list[Block]:
    """The blocks of a request made of ``messages``, counted with ``count`` (a ``MessageCounter.count_message``).

    The leading system and developer messages are the pinned head; the messages at ``marks`` carry a breakpoint
    (``breakpoints.breakpoint_indices``). A mark is not part of a block's key: Anthropic matches prefixes by their
    content, wherever the marks are. ``memo`` (by message identity, the message kept with its figures) spares a
    caller that bills the same message objects call after call their fingerprints and counts; the caller prunes it.
    """
    blocks: list[Block] = []
    head = True
    marks = set(marks)
    for i, m in enumerate(messages):
        head = head and m.role in ("system", "developer")
        known = memo.get(id(m)) if memo is not None else None
        if known is not None and known[0] is m:
            _, key, tokens, parts = known
        else:
            parts = max(1, (len(m.content) if isinstance(m.content, tuple) else int(bool(m.content)))
                        + len(m.tool_calls))
            key, tokens = m.fingerprint(), count(m)
            if memo is not None:
                memo[id(m)] = (m, key, tokens, parts)
        blocks.append(Block(key, tokens, parts, head, i in marks))
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

    :meth:`extend` bills a request that is the previous one plus some blocks (a history that only grows) in time
    proportional to the blocks added, with the same figures :meth:`bill` gives for the whole request.
    """

    def __init__(self, rates: CacheRates, *, breakpoints: Breakpoints = "pinned_and_last") -> None:
        if breakpoints not in ("pinned_and_last", "last", "marked"):
            raise ValueError(f"breakpoints: expected 'pinned_and_last', 'last' or 'marked', got {breakpoints!r}")
        self.rates = rates
        self.breakpoints = breakpoints
        self._entries: dict[bytes, float] = {}  # prefix hash -> time it expires
        # The previous request: its blocks, prefix hashes, running token totals, last pinned and marked blocks.
        self._request_of = _Request()
        # Automatic caching stores every prefix of every request: rather than one entry per prefix per request, the
        # previous request's prefixes are one run that lives until this time (older requests' are in _entries).
        self._run_expires = float("-inf")

    def bill(self, blocks: Sequence[Block], at: float) -> RequestBill:
        """Bill the request ``blocks`` sent at time ``at`` (seconds, non-decreasing) and update the cache."""
        request, shared = self._request_of.followed_by(blocks)
        return self._bill(request, shared, at, commit=True)

    def preview(self, blocks: Sequence[Block], at: float) -> RequestBill:
        """What :meth:`bill` would charge, without changing the cache."""
        request, shared = self._request_of.followed_by(blocks)
        return self._bill(request, shared, at, commit=False)

    def extend(self, added: Sequence[Block], at: float) -> RequestBill:
        """Bill the previous request followed by ``added`` (like :meth:`bill`), in O(len(added)) time."""
        request = self._request_of
        shared = len(request.blocks)
        request.append(added)
        return self._bill(request, shared, at, commit=True)

    def _alive(self, key: bytes, at: float) -> bool:
        expires = self._entries.get(key)
        return expires is not None and expires >= at

    def _bill(self, request: _Request, shared: int, at: float, *, commit: bool) -> RequestBill:
        rates = self.rates
        total = request.cumulative[-1] if request.cumulative else 0
        read = write = 0
        stored: list[int] = []
        if rates.scheme == "automatic" and request.blocks:
            read = self._automatic(request, shared, at)
        elif rates.scheme == "breakpoints" and request.blocks:
            read, write, stored = self._breakpoints(request, at)
        if commit:
            self._commit(request, shared, at, stored)
        fresh = total - read - write
        return RequestBill(total, read, write, fresh, rates.units(fresh, read, write), rates.usd(fresh, read, write))

    def _commit(self, request: _Request, shared: int, at: float, stored: list[int]) -> None:
        """Make ``request`` the previous one: store its entries (all its prefixes, or those ``stored``)."""
        rates = self.rates
        expires = at + rates.lifetime_s
        previous = self._request_of
        if rates.scheme == "automatic":
            dropped = previous.hashes[shared:] if previous is not request else ()
            if self._run_expires >= at:  # the previous request's prefixes this one does not have stay alive
                for h in dropped:
                    self._entries[h] = max(self._entries.get(h, self._run_expires), self._run_expires)
            if request.blocks:
                self._run_expires = expires
        else:
            for i in stored:
                self._entries[request.hashes[i]] = expires
        if len(self._entries) > _SWEEP_AT:
            self._entries = {k: t for k, t in self._entries.items() if t >= at}
        self._request_of = request

    def _automatic(self, request: _Request, shared: int, at: float) -> int:
        """OpenAI: the longest live prefix is read (rounded down to the increment); every prefix becomes an entry."""
        rates = self.rates
        # Every stored prefix was stored with all its shorter prefixes and refreshed with them, so the live ones of
        # this request are a leading run: the prefixes shared with the previous request live as long as its run
        # (every other entry expires no later), then older entries may go on.
        hit, start = (shared - 1, shared) if shared and self._run_expires >= at else (-1, 0)
        for i in range(start, len(request.hashes)):
            if not self._alive(request.hashes[i], at):
                break
            hit = i
        read = 0
        cumulative = request.cumulative
        if hit >= 0 and cumulative[hit] >= rates.min_cacheable_tokens:
            over = cumulative[hit] - rates.min_cacheable_tokens
            read = rates.min_cacheable_tokens + over - over % rates.increment_tokens
        return read

    def _breakpoint_positions(self, request: _Request) -> list[int]:
        last = len(request.blocks) - 1
        if self.breakpoints == "marked":
            return list(request.marked)
        positions = [last]
        if self.breakpoints == "pinned_and_last" and 0 <= request.pinned_last != last:
            positions.insert(0, request.pinned_last)
        return positions

    def _breakpoints(self, request: _Request, at: float) -> tuple[int, int, list[int]]:
        """Anthropic: read the longest entry within the lookback of a breakpoint, write up to the last breakpoint."""
        rates = self.rates
        positions = self._breakpoint_positions(request)
        if not positions:  # no cache_control anywhere: nothing is read or written
            return 0, 0, []
        blocks, hashes, cumulative = request.blocks, request.hashes, request.cumulative
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
        write = max(0, cumulative[last] - read) if cacheable else 0
        stored = [p for p in positions if cumulative[p] >= rates.min_cacheable_tokens]
        if hit >= 0:
            stored.append(hit)  # a read refreshes the entry it read
        return read, write, stored


class _Request:
    """A request as the cache keeps it: blocks, the chain hash of each prefix, running token totals, breakpoints."""

    __slots__ = ("blocks", "cumulative", "hashes", "marked", "pinned_last")

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.hashes: list[bytes] = []
        self.cumulative: list[int] = []
        self.pinned_last = -1
        self.marked: list[int] = []

    def followed_by(self, blocks: Sequence[Block]) -> tuple[_Request, int]:
        """The request ``blocks`` and how many leading blocks it shares with this one (their hashes are reused)."""
        shared = 0
        for old, new in zip(self.blocks, blocks, strict=False):
            if old.key != new.key:
                break
            shared += 1
        request = _Request()
        request.hashes = self.hashes[:shared]
        request.append(blocks, hashed=shared)
        return request, shared

    def append(self, blocks: Sequence[Block], *, hashed: int = 0) -> None:
        """Add ``blocks`` at the end (the first ``hashed`` of them already have their hash in ``hashes``)."""
        running = self.cumulative[-1] if self.cumulative else 0
        previous = self.hashes[-1] if self.hashes else b""
        for offset, b in enumerate(blocks):
            index = len(self.blocks)
            self.blocks.append(b)
            running += b.tokens
            self.cumulative.append(running)
            if offset >= hashed:
                previous = _chain(previous, b.key)
                self.hashes.append(previous)
            else:
                previous = self.hashes[index]
            if b.pinned:
                self.pinned_last = index
            if b.breakpoint:
                self.marked.append(index)
