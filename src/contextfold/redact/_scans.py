"""What a redactor remembers of its scans: the findings of each text, and the messages found clean.

A :class:`Finding` and the :func:`marker` it is replaced with live here, below every module that redacts.

The findings of a text depend on the text and the patterns only (what was learned is applied after), so redactors
with the same patterns share them: a transcript archived at compaction is redacted whole, and its messages were
mostly scanned already, by an earlier transcript or on the background thread while the agent waited for its model.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..messages import Message

if TYPE_CHECKING:
    from .rules import SecretPattern

__all__ = ["MARKER_RE", "Finding", "ScanCache", "marker", "message_chars", "scan_cache"]


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    """A secret found at ``text[start:end]``."""

    start: int
    end: int
    name: str


def marker(name: str) -> str:
    """The text a secret of kind ``name`` is replaced with."""
    return f"[REDACTED:{name}]"


# A marker (of any kind). A finding that is exactly one is a secret redacted earlier: renaming it (`api_key =
# "[REDACTED:openai_key]"` seen again by the api_key pattern) would make redaction depend on how many times it ran
# (the manager redacts a transcript and the archive redacts it again).
MARKER_RE = re.compile(r"\[REDACTED:[^\]\n]*\]")


# Scans remembered by text (issue 15): a transcript archived at compaction is redacted whole, and its messages were
# mostly scanned already, by an earlier transcript or on the background thread while the agent waited for its model.
# The findings of a text depend on the text and the patterns only (what was learned is applied after), so they
# are kept, up to this many texts and characters: more than a window holds, bounded for huge outputs.
_SCAN_CACHE_ENTRIES = 16_384
_SCAN_CACHE_CHARS = 32_000_000


class ScanCache:
    """Findings by text, and messages found clean, least recently used dropped first.

    Shared by threads, and by a redactor with its warming shadow. A clean message is one :meth:`Redactor.redact_message`
    returned unchanged while nothing was learned and with no callback: under the same conditions it is unchanged
    again (its findings are none, the patterns are the redactor's), so it is not walked again.
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[str, tuple[Finding, ...]] = OrderedDict()
        self._chars = 0
        # id -> the message (kept, so the id stays its own) and its characters: bounded by characters as the
        # findings are (a count alone let 1,500 dropped 117 KB outputs keep 175 MB alive in a long-lived worker).
        self._clean: OrderedDict[int, tuple[Message, int]] = OrderedDict()
        self._clean_chars = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> tuple[Finding, ...] | None:
        with self._lock:
            found = self._entries.get(text)
            if found is not None:
                self._entries.move_to_end(text)
            return found

    def put(self, text: str, found: tuple[Finding, ...]) -> None:
        with self._lock:
            if text in self._entries:
                return
            self._entries[text] = found
            self._chars += len(text)
            while len(self._entries) > _SCAN_CACHE_ENTRIES or self._chars > _SCAN_CACHE_CHARS:
                self._chars -= len(self._entries.popitem(last=False)[0])

    def is_clean(self, m: Message) -> bool:
        with self._lock:
            found = self._clean.get(id(m))
            return found is not None and found[0] is m

    def mark_clean(self, m: Message) -> None:
        size = message_chars(m)
        if size > _SCAN_CACHE_CHARS:
            return  # (kept, it would push out everything else and still be over the bound)
        with self._lock:
            old = self._clean.pop(id(m), None)
            if old is not None:
                self._clean_chars -= old[1]
            self._clean[id(m)] = (m, size)
            self._clean_chars += size
            while len(self._clean) > _SCAN_CACHE_ENTRIES or self._clean_chars > _SCAN_CACHE_CHARS:
                self._clean_chars -= self._clean.popitem(last=False)[1][1]


def message_chars(m: Message) -> int:
    """About what keeping ``m`` keeps alive: its texts (and a part's inline data or URL), its calls' arguments."""
    content = m.content
    if type(content) is str:
        size = len(content)
    else:
        size = 0
        for part in content:
            for field in ("text", "url", "data"):
                value = getattr(part, field, None)
                if type(value) is str:
                    size += len(value)
    for call in m.tool_calls:
        size += len(call.arguments)
    return size


# Redactors with the same patterns share their scans (each manager of a fleet worker's turn builds its own redactor,
# with the built-in patterns); a few distinct pattern sets are kept, further ones get a cache of their own.
_SHARED_SCAN_CACHES = 8
_scan_caches: dict[tuple[SecretPattern, ...], ScanCache] = {}
_scan_caches_lock = threading.Lock()


def scan_cache(patterns: tuple[SecretPattern, ...]) -> ScanCache:
    try:
        with _scan_caches_lock:
            cache = _scan_caches.get(patterns)
            if cache is None:
                cache = ScanCache()
                if len(_scan_caches) < _SHARED_SCAN_CACHES:
                    _scan_caches[patterns] = cache
            return cache
    except TypeError:  # a user pattern that cannot be hashed (an unhashable accept callable)
        return ScanCache()
