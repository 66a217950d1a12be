"""Structure-aware cuts for outputs that line-based views cannot cut: minified JSON, one-line API responses, blobs.

A view that keeps whole lines keeps nothing of a 3,000-token output written on one line. Such outputs are cut by
their structure instead: JSON keeps its shape (every key, ids and short scalars whole, long strings shortened,
long arrays reduced to their first and last items with a count of what was dropped), and anything else keeps its
head and tail by characters with a marker stating how much of the middle went. Pure functions over text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ..tokens import TokenCounter
from ._text import CutGuard, _fit_length

__all__ = ["FEW_LINES", "cut_by_chars", "is_few_long_lines", "shape_json"]

# An output with at most this many lines whose mean length is over LONG_LINE_MEAN is "few long lines".
FEW_LINES = 20
LONG_LINE_MEAN = 400
# Levels tried in turn until the JSON fits: (longest string kept, depth under which containers are kept whole).
# Array lengths are searched by bisection at each level; strings are cut before structure is.
_STRING_LIMITS = (400, 160, 80, 40, 16)
# JSON larger than this is not parsed (the parse would cost more than the cut saves); it is cut by characters.
MAX_JSON_CHARS = 2_000_000
# A cut array keeps at least this many first items besides its last: the head is where a listing starts (the first
# of six flight options, the first leg of a connection). Without a floor the search went down to no head at all, and
# tau-bench views showed an answered flight search as ["…4 more items…", ["…1 more items…", {the last flight}]].
MIN_HEAD_ITEMS = 1


def is_few_long_lines(text: str, max_line_length: int) -> bool:
    """Whether ``text`` is a few long lines (a line over ``max_line_length``, or long lines on average)."""
    lines = text.count("\n") + 1
    if lines > FEW_LINES:
        return False
    longest = max((len(line) for line in text.split("\n")), default=0)
    return longest > max_line_length or len(text) / lines > LONG_LINE_MEAN


def _dropped_items(n: int) -> str:
    return f"…{n} more items…"


def _dropped_chars(n: int) -> str:
    return f"…{n} chars…"


def _shrink(value: Any, items: int, string_limit: int, guard: CutGuard | None = None) -> Any:
    """``value`` with arrays over ``items`` + 1 items cut to their first ``items`` and the last; strings cut too.

    ``guard`` moves a string's cut that would split a secret to the secret's start.
    """
    if isinstance(value, dict):
        return {k: _shrink(v, items, string_limit, guard) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > items + 1:
            head = [_shrink(v, items, string_limit, guard) for v in value[:items]]
            tail = _shrink(value[-1], items, string_limit, guard)
            return [*head, _dropped_items(len(value) - items - 1), tail]
        return [_shrink(v, items, string_limit, guard) for v in value]
    if isinstance(value, str) and len(value) > string_limit:
        keep = max(string_limit - 12, 4)
        if guard is not None:
            keep = guard(value, keep, True)
        return value[:keep] + _dropped_chars(len(value) - keep)
    return value


def _longest_array(value: Any) -> int:
    if isinstance(value, dict):
        return max((_longest_array(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max(len(value), max((_longest_array(v) for v in value), default=0))
    return 0


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def shape_json(text: str, fits: Callable[[str], bool], guard: CutGuard | None = None) -> str | None:
    """``text`` parsed as JSON and cut by structure until ``fits`` accepts it.

    None when it is not JSON or nothing structured fits (the caller cuts by characters, keeping the head). Every
    key and every number, boolean and short string stays; long strings are shortened (``…N chars…``) and long
    arrays keep as many first items as fit (at least :data:`MIN_HEAD_ITEMS`) plus the last, with
    ``…N more items…`` in place of the rest. ``guard`` keeps a string's cut out of any secret it knows.
    """
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{" or len(stripped) > MAX_JSON_CHARS:
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    whole = _dump(value)
    if fits(whole):
        return whole
    longest = _longest_array(value)
    fallback: str | None = None
    for limit in _STRING_LIMITS:
        # Bisect the number of first items kept of each long array (fewer items never render longer).
        lo, hi = MIN_HEAD_ITEMS - 1, max(longest, MIN_HEAD_ITEMS)
        best: str | None = None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            candidate = _dump(_shrink(value, mid, limit, guard))
            if fits(candidate):
                lo, best = mid, candidate
            else:
                hi = mid - 1
        if best is not None and lo >= min(2, longest):
            return best
        fallback = fallback or best
    return fallback


def cut_by_chars(text: str, *, max_tokens: int, max_bytes: int, counter: TokenCounter,
                 head_share: float = 0.5, guard: CutGuard | None = None) -> str:
    """Head and tail of ``text`` by characters within both caps, ``…N chars truncated…`` between them.

    Only pieces about the size of the caps are measured, so a huge output is never token-counted whole. ``guard``
    moves either cut that would split a secret out of it (what is kept only shrinks).
    """
    marker_room = counter.count(f"…{len(text)} chars truncated…") + 1
    tokens = max(0, max_tokens - marker_room)
    nbytes = max(0, max_bytes - 40)

    def measure(piece: str) -> int:
        # Both caps in one measure: the token count, or past the byte cap a count that never fits.
        if len(piece.encode("utf-8", "surrogatepass")) > nbytes:
            return tokens + 1 + len(piece)
        return counter.count(piece)

    head_room = math.floor(tokens * head_share)
    head_len = _fit_length(text, head_room, measure, from_end=False)
    if guard is not None:
        head_len = guard(text, head_len, True)
    rest = text[head_len:]
    tail_room = tokens - (counter.count(text[:head_len]) if head_len else 0)
    nbytes -= len(text[:head_len].encode("utf-8", "surrogatepass"))
    tail_len = _fit_length(rest, tail_room, measure, from_end=True)
    if guard is not None and 0 < tail_len < len(rest):
        tail_len = len(rest) - guard(rest, len(rest) - tail_len, False)
    if head_len + tail_len >= len(text):
        return text
    dropped = len(text) - head_len - tail_len
    return f"{text[:head_len]}…{dropped} chars truncated…{rest[len(rest) - tail_len:]}"
