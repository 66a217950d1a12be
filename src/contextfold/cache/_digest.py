"""A compact digest of a tool output: the names, ids and numbers most likely to be needed again.

A masked output is replaced by a placeholder with its ref; without more, every name and number in it leaves the
view until the model pages it back. The digest keeps, within a small token budget, what an agent most often reuses
by exact spelling: definitions with their line numbers (what it pages to next), paths, errors, tests, ids and codes,
identifiers, dates and amounts. Items are ranked by kind and by how often the output mentions them; what the
output's own call already names (the file path it read, the pattern it searched) is left out, since the call stays
in view beside the placeholder.

Pure and deterministic: the same text, budget and counter give the same digest.
"""

from __future__ import annotations

import bisect
import itertools
import re
import string
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import NamedTuple

from .._memo import TextMemo, size_of_strings, text_key
from ..redact._key_words import KEY_NAME_WORDS
from ..summarize.entities import bare_numbers, entity_kinds
from ..tokens import TokenCounter
from ..tokens.counting import EstimatingCounter, TiktokenCounter

__all__ = ["DIGEST_SEPARATOR", "Material", "digest_items", "digest_material", "digest_source", "output_digest",
           "ref_material", "remember_ref_material"]

# Items are joined by this: short, and never part of a name, a path or a number.
DIGEST_SEPARATOR = ", "
# Of a long output, only its two ends are read (whole lines): the digest is a few dozen tokens, extraction costs
# ~100-300 ns a character, and the whole output stays readable by its ref (issue 22: reading whole cut outputs, up
# to 70K characters in the recorded SWE-agent sessions, was most of the read-ahead; 6,000 + 2,000 characters were
# still most of its digest material, ~2/3 of it in outputs longer than 3,000). The head weighs more: listings,
# search results and logs put what was asked for first; the tail holds the outcome (a test summary, an error).
# A 40-token digest lists about a dozen items: the lm32b replay at 16K recalls 4 of 10,197 needed facts fewer with
# 2,000 + 1,000 than with 6,000 + 2,000 (and as few with 1,500 + 500 or 1,000 + 500).
DIGEST_HEAD_CHARS = 2_000
DIGEST_TAIL_CHARS = 1_000
# Items that do not fit are skipped for shorter ones further down, up to this many (a bound on the counting).
MAX_MISSES = 8
# How much one mention weighs, by kind: what an agent needs again by exact spelling weighs most. Definitions carry
# a line number the agent pages to (``view_range [769, 786]``); ids and codes (reservation ids, flight numbers)
# are copied into the next call; bare numbers of three digits or more (amounts, counts) weigh like identifiers.
KIND_WEIGHTS: dict[str, float] = {
    "definition": 3.0, "path": 2.0, "error": 2.0, "test": 1.5, "id": 1.5, "email": 1.5, "url": 1.2,
    "number": 1.2, "identifier": 1.0, "flag": 0.8,
}
# A definition line of a numbered listing (``cat -n``, SWE-agent's file viewer): line number, then def/class NAME.
_DEFINITION = re.compile(
    r"^\s*(\d+)[\t ]+\s*(?:async\s+)?(?:def|class|function|func|fn|struct|interface)\s+([A-Za-z_]\w*)",
    re.MULTILINE,
)
# Too generic to be worth a slot whatever their count: every Python file says them.
_COMMON = frozenset({"self", "None", "True", "False", "__init__", "return", "import", "kwargs", "args"})


# One of these is in every definition line ("func" in "function"), after a whitespace character.
_DEFINITION_WORDS = ("def", "class", "fn", "func", "struct", "interface")
# A definition from its keyword on (the part of _DEFINITION after the whitespace before the keyword).
_DEFINED = re.compile(r"(?:def|class|function|func|fn|struct|interface)\s+([A-Za-z_]\w*)")


def _definitions(text: str) -> list[str]:
    """``name:line`` of each match of :data:`_DEFINITION`, in order, found from the keywords (what ``findall`` gives).

    The pattern is tried at every line start (~30 ns a character, issue 22); its keywords are found with str.find
    (~1 ns), and the rest of the match is checked backwards from each: only whitespace, an optional ``async``, the
    line number (a space or a tab right after it) and whitespace back to a line start may come before the keyword.
    Matches cannot overlap (what comes before a keyword holds no word but ``async`` and the number), so they are
    those of ``findall``. tests/cache/test_digest_mentions_fast.py compares the two.
    """
    hits: set[int] = set()
    for word in _DEFINITION_WORDS:
        at = text.find(word)
        while at >= 0:
            hits.add(at)
            at = text.find(word, at + 1)
    out: list[str] = []
    for at in sorted(hits):
        if at == 0 or not text[at - 1].isspace():
            continue
        defined = _DEFINED.match(text, at)
        if defined is None:
            continue
        start = at
        while start > 0 and text[start - 1].isspace():
            start -= 1
        if text.endswith("async", 0, start) and start > 5 and text[start - 6].isspace():
            start -= 5
            while start > 0 and text[start - 1].isspace():
                start -= 1
        number_end = start
        while start > 0 and text[start - 1].isdecimal():  # (str.isdecimal is \d: Unicode category Nd)
            start -= 1
        if start == number_end or text[number_end] not in "\t ":
            continue
        line_start = start
        while line_start > 0 and text[line_start - 1].isspace():
            line_start -= 1
        if line_start == 0 or "\n" in text[line_start:start]:
            out.append(f"{defined.group(1)}:{text[start:number_end]}")
    return out


# Splits an output into the words entities are made of (dotted names, paths, amounts stay whole).
_WORD_SPLIT = re.compile(r"[^\w.$/-]+")
# The same split for an ASCII text, where \w is [A-Za-z0-9_]: every other character becomes a space, and str.split
# cuts at the spaces (half the time of the pattern; issue 22). Only the empty word differs, which names no item.
_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.$/-")
_NON_WORD_TO_SPACE = str.maketrans({chr(c): " " for c in range(128) if chr(c) not in _WORD_CHARS})


def _mention_counts(text: str) -> Counter[str]:
    """How often each whole word occurs (``total_1`` is not counted inside ``total_10``), a sentence's dot left out."""
    # (Counted in C; then each distinct word ending in dots is merged into the word without them: a word and the same
    # word ending a sentence are one count. Fewer distinct words than words: half the time of stripping each word.)
    words = text.translate(_NON_WORD_TO_SPACE).split() if text.isascii() else _WORD_SPLIT.split(text)
    counts = Counter(words)
    for dotted in [word for word in counts if word[-1:] == "."]:
        counts[dotted.rstrip(".")] += counts.pop(dotted)
    return counts


class Material(NamedTuple):
    """A digest's candidates, best first, and whether they come from the output's two ends only."""

    items: tuple[str, ...]
    partial: bool = False


# Digest material by output (its ref, or its text's hash; see contextfold._memo), least recently used dropped first.
_MATERIAL_MEMO_BYTES = 32 * 1024 * 1024
_materials: TextMemo[Material] = TextMemo(_MATERIAL_MEMO_BYTES)


def _size(material: Material) -> int:
    return size_of_strings(material.items)


def digest_material(text: str) -> Material:
    """The digest's candidates of ``text``, best first (remembered by text): what :func:`output_digest` picks from.

    Ranked by kind × whole-word mentions, then by first appearance; the output's own call is not known yet, so
    nothing is left out here. A text over :data:`DIGEST_HEAD_CHARS` + :data:`DIGEST_TAIL_CHARS` characters is read
    at its two ends (``partial``).
    """
    return _materials.get_or_compute(text_key(text), lambda: _rank(text), _size)


def ref_material(ref_id: str, load: Callable[[], str], blank: Callable[[str], str] | None = None, *,
                 state: Hashable = None) -> Material:
    """:func:`digest_material` of the output stored under ``ref_id`` (``load()`` reads it only when not remembered).

    ``blank``: the session's secret blanking, applied to the whole stored text before it is read, as an output in
    hand is (issue 21 §1): a window of the text holds pieces of a secret no rule recognises alone (a PEM body's
    lines split at ``+`` and ``/``), which an item filter cannot tell without the session's memory. Remembered
    apart from the plain material of the same ref, and by ``state``: what the blanking answers by (the guard's
    ``digest_state()``). Refs are content hashes shared by every session of the process, and a secret is learned
    later: material blanked with another session's secrets, or before one was learned, is not this blanking's.
    """
    if blank is None:
        return _materials.get_or_compute(("ref", ref_id), lambda: _rank(load()), _size)
    return _materials.get_or_compute(("ref-blanked", ref_id, _weak(state)), lambda: _rank(blank(load())), _size)


def _weak(state: Hashable) -> Hashable:
    """``state`` as a process-wide memo key that keeps nothing of a session alive: its objects by weak reference.

    (A session's secret memory in a key would outlive the session; a weak reference to a dead one equals nothing.)
    """
    if isinstance(state, tuple):
        return tuple(_weak(item) for item in state)
    if state is None or isinstance(state, bool | int | float | str | bytes):
        return state
    try:
        return weakref.ref(state)
    except TypeError:
        return state


def remember_ref_material(ref_id: str, text: str) -> None:
    """Read the digest material of ``text``, the whole output stored under ``ref_id`` (done when it is added)."""
    ref_material(ref_id, lambda: text)


# Where a window may end inside a line: between words, never inside one (issue 21 §1: a token cut there left a piece
# no rule recognises, listed by the digest). ':', '=', '/', '@' and '.' are not among them: they are inside URLs,
# key=value pairs and paths.
_WINDOW_EDGE = re.compile(r"[\s\"'`,;{}\[\]()<>|]")


def digest_source(text: str, head_chars: int = DIGEST_HEAD_CHARS,
                  tail_chars: int = DIGEST_TAIL_CHARS) -> tuple[str, bool]:
    """What a digest reads of ``text``: all of it, or its first and last whole lines within the two windows.

    A text over :data:`DIGEST_HEAD_CHARS` + :data:`DIGEST_TAIL_CHARS` characters is read in two windows of
    ``head_chars`` and ``tail_chars`` (those by default). A window with no line end in it ends between words instead
    (minified JSON, a log of one line); one without even that reads nothing at that end.
    """
    if len(text) <= DIGEST_HEAD_CHARS + DIGEST_TAIL_CHARS:
        return text, False
    head_end = text.rfind("\n", 0, head_chars)
    if head_end <= 0:
        edges = [edge.start() for edge in _WINDOW_EDGE.finditer(text, 0, head_chars + 1)]
        head_end = edges[-1] if edges else 0
    tail_start = text.find("\n", len(text) - tail_chars)
    if tail_start < 0:
        found = _WINDOW_EDGE.search(text, len(text) - tail_chars - 1)
        tail_start = found.start() if found is not None else len(text) - 1
    return f"{text[:head_end]}\n{text[tail_start + 1 :]}", True


def _rank(text: str) -> Material:
    """The digest material of ``text``: its candidates ranked by kind x whole-word mentions, then first appearance.

    Candidates: definitions first (``name:line``; a defined name itself is listed only so), then entities by kind,
    then bare numbers; each value once, words every Python file says (:data:`_COMMON`) never.
    """
    source, partial = digest_source(text)
    mentions = _mention_counts(source).get
    seen = set(_COMMON)
    ranked: list[tuple[float, int, str]] = []  # (-score, place among the candidates, value)
    definitions = _definitions(source)
    weight = KIND_WEIGHTS["definition"]
    for value in definitions:
        if value not in seen:
            seen.add(value)
            ranked.append((-(weight * (mentions(value.split(":", 1)[0]) or 1)), len(ranked), value))
    seen.update(value.split(":", 1)[0] for value in definitions)  # (a defined name is listed once, with its line)
    for kind, values in (*entity_kinds(source), ("number", bare_numbers(source))):
        weight = KIND_WEIGHTS.get(kind, 1.0)
        for value in values:
            if value not in seen:
                seen.add(value)
                ranked.append((-(weight * (mentions(value) or 1)), len(ranked), value))
    ranked.sort()
    return Material(_assignments_first([value for _, _, value in ranked]), partial)


# An assignment to a key ending in one of the key rule's words (``password=X`` in a backtick item, ``?api_key=X`` in a
# URL) and a URL's password (``://user:X@``): what an item's own secret check learns. Each regex is led by a literal
# (the engine skips from one to the next in C): the first reads the items' text lower-cased and reversed, where such
# a key starts right after its ``=`` (the value is then read forward). R2's one alternation tried at every character
# of each item made ``_rank`` 2.7x as slow on a URL-heavy output; a case-insensitive regex of the words was slower.
_SECRET_KEY_REVERSED = re.compile("=(?:" + "|".join(re.escape(word[::-1]) for word in KEY_NAME_WORDS) + ")")
_ASSIGNED_VALUE = re.compile(r"[^=&;,@/\s\"'`)\]}]+")
_URL_PASSWORD = re.compile(r"://[^/:@\s]*:([^/@\s]+)@")
# A-Z to a-z, nothing else: a lower-cased text of the same length (str.lower() may lengthen a non-ASCII text).
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _assignments_first(items: list[str]) -> tuple[str, ...]:
    """``items`` with each item that assigns a secret a value another item lists ahead of that value's first place.

    A digest's items are checked for secrets one by one in this order, and the check of ``password=X`` teaches the
    session that ``X`` is a secret: ranked below a bare ``X``, it came too late to keep ``X`` out (only where the
    whole-text scan missed the secret). Only an assignment whose key ends in one of the key rule's words
    (:data:`~contextfold.redact._key_words.KEY_NAME_WORDS`: what the check learns from) and a URL's ``user:X@`` move,
    just ahead of the value, in their own order; a search's ``?q=ValueError`` keeps its rank.
    """
    joined = "\n".join(items)  # (the values stop at a space: no match runs from one item into the next)
    assigned: list[tuple[int, str]] = []  # (where in ``joined``, the value assigned)
    if "=" in joined:
        lowered = joined.lower()
        if len(lowered) != len(joined):
            lowered = joined.translate(_ASCII_LOWER)
        last = len(joined) - 1
        for found in _SECRET_KEY_REVERSED.finditer(lowered[::-1]):
            equals = last - found.start()
            assigned_value = _ASSIGNED_VALUE.match(joined, equals + 1)
            if assigned_value is not None:
                assigned.append((equals, assigned_value.group()))
    if "@" in joined:
        assigned.extend((found.start(), found.group(1)) for found in _URL_PASSWORD.finditer(joined))
    if not assigned:
        return tuple(items)
    place = {item: at for at, item in enumerate(items)}
    starts = list(itertools.accumulate([len(item) + 1 for item in items[:-1]], initial=0))
    first: dict[int, int] = {}  # item -> the first place of a value it assigns, when that is above it
    for offset, value in assigned:
        at = bisect.bisect_right(starts, offset) - 1
        value_at = place.get(value, at)
        if value_at < first.get(at, at):
            first[at] = value_at
    if not first:
        return tuple(items)
    keys = [(first.get(at, at), 0 if at in first else 1, at) for at in range(len(items))]
    return tuple(items[at] for _, _, at in sorted(keys))


# Counters whose count of a non-empty text is at least 1 (what ends a digest's walk early; see output_digest).
_COUNTS_ONE_AT_LEAST: frozenset[type] = frozenset({TiktokenCounter, EstimatingCounter})


def output_digest(text: str, *, budget_tokens: int, counter: TokenCounter, known: str = "",
                  material: Sequence[str] | None = None, allow: Callable[[str], bool] | None = None) -> str:
    """The digest of ``text``: ranked items joined by :data:`DIGEST_SEPARATOR`, at most ``budget_tokens`` tokens.

    ``known`` is text that stays in view beside the placeholder (the call's arguments): items it contains are
    left out. ``material``: ``digest_material(text)``, when the caller has it (``text`` is not read then). Returns
    "" for a zero budget or an output with nothing worth keeping.
    """
    if budget_tokens <= 0 or (material is None and not text):
        return ""
    ranked = digest_material(text).items if material is None else material
    return DIGEST_SEPARATOR.join(digest_items(ranked, budget_tokens, counter, known, allow))


def digest_items(ranked: Iterable[str], budget_tokens: int, counter: TokenCounter, known: str = "",
                 allow: Callable[[str], bool] | None = None) -> list[str]:
    """The items of ``ranked`` a digest of ``budget_tokens`` lists, in order (see :func:`output_digest`).

    Each item costs its own count plus a separator's after the first: their sum stays within the budget. Items that
    do not fit are skipped for shorter ones further down, up to :data:`MAX_MISSES`.
    """
    items: list[str] = []
    spent = 0
    separator_tokens = counter.count(DIGEST_SEPARATOR)
    misses = 0
    # Once not even a one-token item fits, every item left is skipped or missed: the walk ends there instead of
    # asking and counting up to MAX_MISSES more (issue 22: 31% of the items the read-ahead weighed in the lm32b loop).
    # Only with a counter known to count any item (a non-empty text) as one token at least.
    ends_when_full = type(counter) in _COUNTS_ONE_AT_LEAST
    for value in ranked:
        if ends_when_full and spent + (separator_tokens if items else 0) >= budget_tokens:
            break
        if known and value in known:
            continue
        if allow is not None and not allow(value):
            continue
        cost = counter.count(value) + (separator_tokens if items else 0)
        if spent + cost > budget_tokens:
            misses += 1
            if misses >= MAX_MISSES:
                break
            continue  # a shorter item further down may still fit
        items.append(value)
        spent += cost
    return items
