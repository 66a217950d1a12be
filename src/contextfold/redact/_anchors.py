"""Where a case-sensitive regex over the lower-cased text can match: at the literal strings every match starts with.

A pattern's ``locate`` (and a ``needs``) is searched for in every text holding its triggers, and Python's engine
tries such a regex at nearly every position when it does not open with one literal: ``["']?(?:name|key|…)`` or
``(?:api[_-]?key|secret…|client[_-]?secret|…)`` read at 50-60 ns a character, most of scanning a tool output for
secrets (issue 22). Every match of such a regex starts with one of a few literal strings (its *heads*: ``"name``,
``key``, ``api_key``, ``client-secret`` …), which the automaton of :mod:`._triggers` finds in the same pass as the
triggers; the regex is then tried only where a head starts, with the same matches as searching the whole text
(:func:`search_at` emulates ``finditer``'s non-overlapping left-to-right search over those places; a property
test compares them, ``tests/redact/test_anchors.py``).

The heads are read from the regex's own parse (the standard library's ``re._parser``, the same on 3.11-3.13); a
regex whose opening this does not understand, or whose heads are too short to be selective, has none and is
searched as before.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

__all__ = ["MIN_HEAD_CHARS", "heads", "lowered_heads", "openings", "repetitive", "search_at"]

# The Python versions whose private regex parser (``re._parser``) this reads was checked on: the heads are the same
# on each, and sound over 20,000 random regexes (tests/redteam/test_redteam8_scan_reference.py and its hunt).
_PARSER_CHECKED = frozenset({(3, 11), (3, 12), (3, 13)})
# Heads shorter than this would start at too many places to pay for themselves (``;``, ``:``, ``p``).
MIN_HEAD_CHARS = 3
# More heads than this: the opening is too varied to spell out; it stops growing there.
_MAX_HEADS = 256
# A character class of at most this many characters is spelled out (``[_-]``, ``["']``), a larger one ends a head.
_MAX_CLASS_CHARS = 4


@lru_cache(maxsize=256)
def heads(regex: re.Pattern[str]) -> tuple[str, ...] | None:
    """Strings one of which starts every match of ``regex`` (case-sensitive, no flags that change case), or None.

    Sound by construction: each string is what every path through the regex's opening must read, up to the first
    element spelled out no further (a repeat, a large class, a case change), where it stops.
    """
    found = _openings(regex)
    if not found or min(map(len, found)) < MIN_HEAD_CHARS or any(map(repetitive, found)):
        return None
    # (A head that extends another starts where that one does: the shorter finds every such place.)
    return tuple(h for h in sorted(found) if not any(o != h and h.startswith(o) for o in found))


@lru_cache(maxsize=256)
def openings(regex: re.Pattern[str]) -> tuple[str, ...] | None:
    """Strings one of which every match of ``regex`` starts with, however short (``SK``, ``<``), or None.

    What :func:`heads` reads, without its bounds on length and repetition: the bulk prefilter looks for these with
    ``in`` in the text itself (case-sensitive), to tell that a pattern cannot match there (issue 22). None when a
    match may start with anything (a repeat, a large class, a case change first).
    """
    found = _openings(regex)
    if not found or min(map(len, found)) < 1:
        return None
    return tuple(h for h in sorted(found) if not any(o != h and h.startswith(o) for o in found))


def _openings(regex: re.Pattern[str]) -> frozenset[str] | None:
    """The strings every path through ``regex``'s opening must read (see :func:`heads`), or None."""
    if not isinstance(regex, re.Pattern) or regex.flags & re.IGNORECASE:
        return None
    parse = parsed_pattern(regex)
    if parse is None:
        return None
    parsed, c = parse
    found, _ = _expand(list(parsed), frozenset({""}), c)
    return found


def parsed_pattern(regex: re.Pattern[str]) -> tuple[Any, Any] | None:
    """``regex`` parsed by the standard library's (private) parser, with that parser's constants module.

    None where the parse cannot be relied on: a bytes pattern, a Python the parser was not checked on, a pattern the
    stand-alone parse refuses. Callers then search as if nothing were known of the regex, never unsoundly.
    """
    if not isinstance(regex.pattern, str) or sys.version_info[:2] not in _PARSER_CHECKED:
        return None
    try:
        from re import _constants as c  # type: ignore[attr-defined]
        from re import _parser  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover (a Python without the standard parser's modules)
        return None
    try:
        parsed = _parser.parse(regex.pattern, regex.flags)
    except Exception:  # (a pattern the stand-alone parse refuses)
        return None
    return parsed, c


def _class_chars(items: list[tuple[Any, Any]], c: Any) -> list[str] | None:
    """The characters of a character class's items, when it is a few literals (else None)."""
    chars: list[str] = []
    for op, av in items:
        if op is c.LITERAL:
            chars.append(chr(av))
        elif op is c.RANGE:
            low, high = av
            if high - low >= _MAX_CLASS_CHARS:
                return None
            chars.extend(map(chr, range(low, high + 1)))
        else:  # (NEGATE, CATEGORY: not a few literals)
            return None
        if len(chars) > _MAX_CLASS_CHARS:
            return None
    return chars


def _expand(items: Iterable[tuple[Any, Any]], prefixes: frozenset[str],
            c: Any) -> tuple[frozenset[str], bool]:
    """``prefixes`` each extended by what ``items`` must read; whether all of ``items`` was spelled out.

    When it stops early, the strings returned are still read by every match (each is a prefix of its path's).
    """
    for op, av in items:
        if op in (c.AT, c.ASSERT, c.ASSERT_NOT):
            continue  # (reads nothing: only narrows where it matches)
        if op is c.LITERAL:
            grown = frozenset(p + chr(av) for p in prefixes)
        elif op is c.IN:
            chars = _class_chars(av, c)
            if chars is None:
                return prefixes, False
            grown = frozenset(p + ch for p in prefixes for ch in chars)
        elif op is c.SUBPATTERN:
            _, add_flags, del_flags, body = av
            if add_flags or del_flags:
                return prefixes, False  # (a case change inside: not spelled out)
            inner, done = _expand(body, prefixes, c)
            if not done:
                return inner, False
            grown = inner
        elif op is c.BRANCH:
            _, alternatives = av
            union: set[str] = set()
            all_done = True
            for alternative in alternatives:
                inner, done = _expand(alternative, prefixes, c)
                union |= inner
                all_done = all_done and done
            if len(union) > _MAX_HEADS:
                return prefixes, False
            if not all_done:
                return frozenset(union), False
            grown = frozenset(union)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[0] == 0 and av[1] == 1:
            inner, done = _expand(av[2], prefixes, c)
            grown = prefixes | inner
            if len(grown) > _MAX_HEADS:
                return prefixes, False
            if not done:
                return grown, False
        else:  # (a repeat, any character, a back reference …: the heads end here)
            return prefixes, False
        if len(grown) > _MAX_HEADS:
            return prefixes, False
        prefixes = grown
    return prefixes, True


@lru_cache(maxsize=256)
def lowered_heads(regex: re.Pattern[str]) -> tuple[str, ...] | None:
    """:func:`heads` of a case-sensitive regex run over a text, lower-cased: where they start in the lower-cased text.

    Where a match reads ``head`` in the text, the lower-cased text (when each character lowers to one) reads
    ``head.lower()``. ASCII heads only (a non-ASCII one may lower to another length).
    """
    found = heads(regex)
    if found is None or not all(h.isascii() for h in found):
        return None
    lowered = tuple(dict.fromkeys(h.lower() for h in found))
    return None if any(map(repetitive, lowered)) else lowered


def repetitive(word: str) -> bool:
    """Whether ``word`` repeats itself: it has a period of at most half its length (``aaaa``, ``abab``).

    Such a word occurs at nearly every position of a text that repeats it (``'A' * 1_000_000``, base64 of zeros),
    so an automaton hands back a match per character (~2M for that text, each looked at in Python: issue 22). Any
    other word's occurrences are more than half its length apart. Repetitive heads are not used (the regex
    searches the whole text instead), and repetitive triggers are looked for with ``in`` (see ._triggers).
    """
    return any(word[period:] == word[:-period] for period in range(1, len(word) // 2 + 1))


def search_at(regex: re.Pattern[str], text: str, starts: Iterable[int]) -> Iterator[re.Match[str]]:
    """``regex.finditer(text)``, trying only ``starts`` (ascending): every place a match of ``regex`` can start.

    ``finditer`` takes, from the end of its last match on, the first place where the regex matches; any other
    place cannot match, so the first of ``starts`` from there that matches is the same match. (A match is never
    empty: every one reads a head of at least :data:`MIN_HEAD_CHARS` characters.)
    """
    match = regex.match
    last_end = 0
    for at in starts:
        if at < last_end:
            continue
        m = match(text, at)
        if m is not None:
            last_end = m.end()
            yield m
