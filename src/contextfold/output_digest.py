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

import re
from collections.abc import Iterable

from .summarize.entities import extract_entities_by_kind
from .tokens import TokenCounter

__all__ = ["DIGEST_SEPARATOR", "bare_numbers", "output_digest"]

# Items are joined by this: short, and never part of a name, a path or a number.
DIGEST_SEPARATOR = ", "
# Only the start of a huge output is read: the digest is a few dozen tokens, and extraction costs ~1 µs a character.
MAX_DIGEST_SOURCE_CHARS = 200_000
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
# Bare numbers of three digits or more (amounts, counts, ids), whole words; line numbers of listings excluded.
_BARE_NUMBER = re.compile(r"(?<![\w.$-])\d{3,}(?:\.\d+)?(?![\w]|[.,]\d)")
_LISTING_PREFIX = re.compile(r"^\s*\d+[\t ]", re.MULTILINE)
# Too generic to be worth a slot whatever their count: every Python file says them.
_COMMON = frozenset({"self", "None", "True", "False", "__init__", "return", "import", "kwargs", "args"})


def _definitions(text: str) -> list[str]:
    return [f"{name}:{line}" for line, name in _DEFINITION.findall(text)]


def bare_numbers(text: str) -> list[str]:
    """Bare numbers of three digits or more in ``text``, in order; the line numbers of a numbered listing are not."""
    body = _LISTING_PREFIX.sub(" ", text)  # the line numbers of a listing are not values of the output
    return _BARE_NUMBER.findall(body)


def _candidates(text: str) -> dict[str, tuple[str, int]]:
    """Value -> (kind, first position); definitions first, then entities by kind, then bare numbers."""
    found: dict[str, tuple[str, int]] = {}

    def add(kind: str, values: Iterable[str]) -> None:
        for value in values:
            if value not in found and value not in _COMMON:
                found[value] = (kind, len(found))

    add("definition", _definitions(text))
    for kind, values in extract_entities_by_kind(text).items():
        add(kind, values)
    add("number", bare_numbers(text))
    return found


def _mentions(text: str, value: str) -> int:
    return max(1, text.count(value))


def output_digest(text: str, *, budget_tokens: int, counter: TokenCounter, known: str = "") -> str:
    """The digest of ``text``: ranked items joined by :data:`DIGEST_SEPARATOR`, at most ``budget_tokens`` tokens.

    ``known`` is text that stays in view beside the placeholder (the call's arguments): items it contains are
    left out. Returns "" for a zero budget or an output with nothing worth keeping.
    """
    if budget_tokens <= 0 or not text:
        return ""
    source = text[:MAX_DIGEST_SOURCE_CHARS]
    ranked = []
    for value, (kind, order) in _candidates(source).items():
        if known and value in known:
            continue
        name = value.split(":", 1)[0] if kind == "definition" else value
        score = KIND_WEIGHTS.get(kind, 1.0) * _mentions(source, name)
        ranked.append((-score, order, value))
    ranked.sort()
    items: list[str] = []
    spent = 0
    separator_tokens = counter.count(DIGEST_SEPARATOR)
    misses = 0
    for _, _, value in ranked:
        cost = counter.count(value) + (separator_tokens if items else 0)
        if spent + cost > budget_tokens:
            misses += 1
            if misses >= MAX_MISSES:
                break
            continue  # a shorter item further down may still fit
        items.append(value)
        spent += cost
    return DIGEST_SEPARATOR.join(items)
