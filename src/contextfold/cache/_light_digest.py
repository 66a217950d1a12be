"""A light digest of a tool output: its entities by kind, first seen first, counted and checked for secrets at once.

The full digest (:mod:`._digest`) ranks every candidate by kind x whole-word mentions, adds definitions with their
line numbers and bare numbers, then weighs, counts and checks each item for secrets in turn: ~620 us of the
read-ahead's CPU per output built ahead in the lm32b loop, most of the read-ahead (issue 22). This one lists the
entities of the same text (the summary's reading extracts them, remembered by text: most are read already) kind by
kind in the order of :data:`~._digest.KIND_WEIGHTS`, each kind in order of first appearance. It fills the budget by
characters, counts the digest once (dropping its last items while it is over) and asks the session's secrets once
about all its items, each on a line of its own (what a rule finds in an item alone it finds there; only when the
answer is yes is each item asked alone, as the full digest asks). Same recall at equal tokens on the shared sessions
(DESIGN.md, issue 22, sixteenth session).

Pure and deterministic: the same text, budget, counter and secrets' state give the same digest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..summarize.entities import entity_kinds
from ..tokens import TokenCounter
from ._digest import _COMMON, DIGEST_SEPARATOR, KIND_WEIGHTS, digest_source

__all__ = ["LIGHT_CHARS_PER_TOKEN", "LightDigest", "light_digest"]

# The kinds a light digest lists, most needed first (the full digest's weights). Definitions (a line-number scan of
# their own) and bare numbers (another pass) are left out: the entities alone recall as much at equal tokens.
_KIND_ORDER: tuple[str, ...] = tuple(kind for kind in sorted(KIND_WEIGHTS, key=lambda k: -KIND_WEIGHTS[k])
                                     if kind not in ("definition", "number"))
# The budget is filled by characters first (the names, paths and ids a digest lists take 3-4 characters a token in
# o200k and cl100k), then the digest is counted once and its last items dropped while it is over.
LIGHT_CHARS_PER_TOKEN = 4
# Of an output over DIGEST_HEAD_CHARS + DIGEST_TAIL_CHARS characters, the light digest reads these two ends (whole
# lines): such windows are read by nothing else (their entities are never remembered), and extracting them cold was
# 80% of the light digests' entity extraction in the lm32b loop (477 us a window; a whole short output is read when
# added, 3 us a look-up then).
LIGHT_HEAD_CHARS = 1_000
LIGHT_TAIL_CHARS = 500


class LightDigest(NamedTuple):
    """A light digest, whether it was read from the output's two ends only, and the items asked about secrets."""

    text: str
    partial: bool
    asked: tuple[str, ...]


def light_digest(text: str, *, budget_tokens: int, counter: TokenCounter, known: str = "",
                 mentions_secret: Callable[[str], bool] | None = None) -> LightDigest:
    """The light digest of ``text`` (with the session's secrets blanked already), at most ``budget_tokens`` tokens.

    ``known``: text that stays in view beside the placeholder (the call's arguments): items it contains are left
    out. ``mentions_secret``: the session's answer to "does this hold a secret or a piece of one"; asked once of
    the items chosen, joined by line ends, then of each alone when it says yes.
    """
    source, partial = digest_source(text, LIGHT_HEAD_CHARS, LIGHT_TAIL_CHARS)
    if budget_tokens <= 0 or not source:
        return LightDigest("", partial, ())
    room = budget_tokens * LIGHT_CHARS_PER_TOKEN
    separator = len(DIGEST_SEPARATOR)
    by_kind = dict(entity_kinds(source))
    seen = set(_COMMON)
    items: list[str] = []
    spent = -separator
    for kind in _KIND_ORDER:
        for value in by_kind.get(kind, ()):
            if value in seen or (known and value in known):
                continue
            seen.add(value)
            if spent + separator + len(value) > room:
                continue  # (a shorter one further on may still fit)
            items.append(value)
            spent += separator + len(value)
    asked: tuple[str, ...] = ()
    if items and mentions_secret is not None:
        asked = tuple(items)
        if mentions_secret("\n".join(items)):
            items = [item for item in items if not mentions_secret(item)]
    digest = DIGEST_SEPARATOR.join(items)
    while items and counter.count(digest) > budget_tokens:
        items.pop()
        digest = DIGEST_SEPARATOR.join(items)
    return LightDigest(digest, partial, asked)
