"""Runs of characters of one ASCII class (``[a-z0-9+/]{24,}``), found at the speed of ``bytes.translate``.

A base64 run is what the ``encoded_secret`` rule looks for, and its need (``[a-z0-9+/]{24,}`` in the lower-cased
text) is what the bulk prefilter searches every message for. Python's regex engine reads such a class run at about
30 ns a character (it tries a run from every position), a third of scanning a text for secrets (issue 22). Here the
text is encoded once, every character mapped to "in the class" or "not" by one ``bytes.translate``, and the runs
found with ``bytes.find`` of the minimal run: a few ns a character, with the same answers (``tests/redact/
test_class_runs.py`` compares them with the regex on the corpora and on generated text).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["ClassRuns", "class_runs"]

_IN, _OUT = b"a", b" "
_REPLACED = ord("?")  # (what Latin-1 encoding with "replace" makes of every other character)
# [class]{n,}, the class of plain ASCII characters and ranges (no escapes, no negation).
_RUN_SOURCE = re.compile(r"\[(?P<cls>[^\]\\^\[][^\]\\\[]*)\]\{(?P<min>[1-9][0-9]*),\}")


def _members(cls: str) -> frozenset[int] | None:
    """The byte values of a regex character class's body (``a-z0-9+/``), or None when it is not plain ASCII."""
    if not cls.isascii() or not cls.isprintable():
        return None
    out: set[int] = set()
    i = 0
    while i < len(cls):
        if i + 2 < len(cls) and cls[i + 1] == "-":
            low, high = ord(cls[i]), ord(cls[i + 2])
            if low > high:
                return None
            out.update(range(low, high + 1))
            i += 3
        else:
            out.add(ord(cls[i]))
            i += 1
    return frozenset(out)


class ClassRuns:
    """Maximal runs of at least ``min_chars`` characters of an ASCII class.

    Args:
        members: The byte values of the class (ASCII only: a non-ASCII character is never in it).
        min_chars: The shortest run wanted.
        passed_over: Runs :meth:`runs` leaves out: ``(first, lengths)``, a run opening with one of the byte values
            ``first`` and not ``lengths`` long (what a rule turns down by its opening and length alone: the
            ``encoded_secret`` rule's paths, issue 22: 94% of the runs of the stored outputs, ~2 us each).
    """

    __slots__ = ("_needle", "_passed_first", "_passed_lengths", "_table", "min_chars")

    def __init__(self, members: frozenset[int], min_chars: int,
                 passed_over: tuple[frozenset[int], frozenset[int]] | None = None) -> None:
        if min_chars < 1 or any(b > 127 for b in members):
            raise ValueError("ClassRuns: an ASCII class and a run of at least one character")
        self.min_chars = min_chars
        self._table = bytes(_IN[0] if b in members else _OUT[0] for b in range(256))
        self._needle = _IN * min_chars
        nothing: frozenset[int] = frozenset()
        self._passed_first, self._passed_lengths = passed_over if passed_over is not None else (nothing, nothing)

    @classmethod
    def of_chars(cls, chars: str, min_chars: int,
                 passed_over: tuple[frozenset[int], frozenset[int]] | None = None) -> ClassRuns:
        """From a class body as a regex writes it (``"A-Za-z0-9+/"``)."""
        members = _members(chars)
        if members is None:
            raise ValueError(f"ClassRuns: not a plain ASCII class: {chars!r}")
        return cls(members, min_chars, passed_over)

    def _marked(self, text: str) -> bytes:
        # UTF-8 keeps ASCII characters one byte each and makes every other character bytes >= 0x80, which are not
        # in the class: the runs of the class are the same in the bytes as in the text.
        raw = text.encode("ascii") if text.isascii() else text.encode("utf-8", "surrogatepass")
        return raw.translate(self._table)

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds a run of at least ``min_chars`` characters of the class."""
        return len(text) >= self.min_chars and self._needle in self._marked(text)

    def starts(self, text: str) -> list[int]:
        """Where each maximal run of at least ``min_chars`` characters starts, in order (those not passed over)."""
        return [start for start, _ in self.runs(text)]

    def runs(self, text: str) -> list[tuple[int, int]]:
        """Each maximal run of at least ``min_chars`` characters, ``(start, end)``, in order (not passed over)."""
        if len(text) < self.min_chars:
            return []
        # One byte per character, so that a byte offset is a character offset: Latin-1, every other character
        # (a lone surrogate too) made "?" (neither is in the class, as no non-ASCII character is). A non-ASCII text
        # was left to the regex engine, at 10-20 times the cost (issue 22: a fifth of the tool outputs hold one).
        if text.isascii():
            raw = text.encode("ascii")
        elif self._table[_REPLACED] == _OUT[0]:
            raw = text.encode("latin-1", "replace")
        else:  # (a class holding "?" itself: each character is marked on its own)
            raw = bytes(ord(c) if ord(c) < 128 else 0x80 for c in text)
        marked = raw.translate(self._table)
        needle, size, find = self._needle, self.min_chars, marked.find
        first, lengths = self._passed_first, self._passed_lengths
        out: list[tuple[int, int]] = []
        # Searching from 0 or from just past a run, the first needle found starts a run (what lies before it holds
        # only runs shorter than the needle).
        at = find(needle)
        while at >= 0:
            end = find(_OUT, at + size)
            if end < 0:
                end = len(marked)
            if raw[at] not in first or end - at in lengths:
                out.append((at, end))
            at = find(needle, end) if end < len(marked) else -1
        return out


@lru_cache(maxsize=64)
def class_runs(regex: re.Pattern[str]) -> ClassRuns | None:
    """The :class:`ClassRuns` that finds what ``regex`` finds, when it is exactly ``[class]{n,}`` (else None)."""
    if regex.flags & ~(re.UNICODE) or not isinstance(regex.pattern, str):
        return None
    m = _RUN_SOURCE.fullmatch(regex.pattern)
    if m is None:
        return None
    members = _members(m.group("cls"))
    if members is None:
        return None
    return ClassRuns(members, int(m.group("min")))
