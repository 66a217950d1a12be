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
from collections import Counter
from collections.abc import Iterable

from ..summarize.entities import bare_numbers, extract_entities_by_kind
from ..tokens import TokenCounter

__all__ = ["DIGEST_SEPARATOR", "output_digest"]

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
# Too generic to be worth a slot whatever their count: every Python file says them.
_COMMON = frozenset({"self", "None", "True", "False", "__init__", "return", "import", "kwargs", "args"})


def _definitions(text: str) -> list[str]:
    return [f"{name}:{line}" for line, name in _DEFINITION.findall(text)]


def _candidates(text: str) -> dict[str, tuple[str, int]]:
    """Value -> (kind, first position): definitions first, then entities by kind, then bare numbers.

    A defined name itself has position -1: it is listed once, as ``name:line``.
    """
    found: dict[str, tuple[str, int]] = {}

    def add(kind: str, values: Iterable[str]) -> None:
        for value in values:
            if value not in found and value not in _COMMON:
                found[value] = (kind, len(found))

    definitions = _definitions(text)
    add("definition", definitions)
    # A defined name is listed once, with its line number.
    found.update({d.split(":", 1)[0]: ("definition", -1) for d in definitions})
    for kind, values in extract_entities_by_kind(text).items():
        add(kind, values)
    add("number", bare_numbers(text))
    return found


# Splits an output into the words entities are made of (dotted names, paths, amounts stay whole).
_WORD_SPLIT = re.compile(r"[^\w.$/-]+")


def _mention_counts(text: str) -> Counter[str]:
    """How often each whole word occurs (``total_1`` is not counted inside ``total_10``)."""
    return Counter(word.rstrip(".") for word in _WORD_SPLIT.split(text) if word)


def output_digest(text: str, *, budget_tokens: int, counter: TokenCounter, known: str = "") -> str:
    """The digest of ``text``: ranked items joined by :data:`DIGEST_SEPARATOR`, at most ``budget_tokens`` tokens.

    ``known`` is text that stays in view beside the placeholder (the call's arguments): items it contains are
    left out. Returns "" for a zero budget or an output with nothing worth keeping.
    """
    if budget_tokens <= 0 or not text:
        return ""
    source = text[:MAX_DIGEST_SOURCE_CHARS]
    ranked = []
    mentions = _mention_counts(source)
    for value, (kind, order) in _candidates(source).items():
        if order < 0 or (known and value in known):
            continue
        name = value.split(":", 1)[0] if kind == "definition" else value
        score = KIND_WEIGHTS.get(kind, 1.0) * max(1, mentions.get(name, 0))
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
