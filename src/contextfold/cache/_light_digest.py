"""A light digest of a tool output: its entities by kind, first seen first, checked for secrets at once.

The full digest (:mod:`._digest`) ranks every candidate by kind x whole-word mentions, adds definitions with their
line numbers and bare numbers, and checks each item it weighs for secrets: ~620 us of the read-ahead's CPU per
output built ahead in the lm32b loop, most of the read-ahead (issue 22). This one lists the entities of the same
text (the summary's reading extracts them, remembered by text: most are read when the output is added) kind by kind
in the order of :data:`~._digest.KIND_WEIGHTS`, each kind in order of first appearance, walked as the full digest
walks its ranking (each item's count plus a separator's within the budget). It asks the session's secrets once
about the items it chose, each on a line of its own (what a rule finds in an item alone it finds there, and a piece
of a remembered secret in any of them is a piece in the whole); only when the answer is yes is each candidate asked
alone, as the full digest asks. The same recall at equal tokens on the shared sessions (DESIGN.md, issue 22,
sixteenth session).

Pure and deterministic: the same text, budget, counter and secrets' answers give the same digest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from ..summarize.entities import entity_kinds
from ..tokens import TokenCounter
from ._digest import _COMMON, DIGEST_SEPARATOR, KIND_WEIGHTS, digest_items, digest_source

__all__ = ["LIGHT_HEAD_CHARS", "LIGHT_TAIL_CHARS", "LightDigest", "light_digest"]

# The kinds a light digest lists, most needed first (the full digest's weights). Definitions (a line-number scan of
# their own) and bare numbers (another pass) are left out: the entities alone recall as much at equal tokens.
_KIND_ORDER: tuple[str, ...] = tuple(kind for kind in sorted(KIND_WEIGHTS, key=lambda k: -KIND_WEIGHTS[k])
                                     if kind not in ("definition", "number"))
# Of an output over DIGEST_HEAD_CHARS + DIGEST_TAIL_CHARS characters, the light digest reads these two ends (whole
# lines): such windows are read by nothing else (their entities are never remembered), and extracting them cold was
# 80% of the light digests' entity extraction in the lm32b loop (~480 us a window, against ~3 us to look up the
# entities of a whole short output, read when it was added). The lm32b and tau replays recall as much with these.
LIGHT_HEAD_CHARS = 1_000
LIGHT_TAIL_CHARS = 500


class LightDigest(NamedTuple):
    """A light digest, whether it was read from the output's two ends only, and the words asked about secrets."""

    text: str
    partial: bool
    asked: tuple[str, ...]


def light_digest(text: str, *, budget_tokens: int, counter: TokenCounter, known: str = "",
                 mentions_secret: Callable[[str], bool] | None = None) -> LightDigest:
    """The light digest of ``text`` (with the session's secrets blanked already), at most ``budget_tokens`` tokens.

    ``known``: text that stays in view beside the placeholder (the call's arguments): items it contains are left
    out. ``mentions_secret``: the session's answer to "does this hold a secret or a piece of one"; asked once of
    the items chosen, joined by line ends, then of each candidate alone when it says yes.
    """
    source, partial = digest_source(text, LIGHT_HEAD_CHARS, LIGHT_TAIL_CHARS)
    if budget_tokens <= 0 or not source:
        return LightDigest("", partial, ())
    by_kind = entity_kinds(source)
    items = digest_items(_candidates(by_kind), budget_tokens, counter, known)
    if not items or mentions_secret is None:
        return LightDigest(DIGEST_SEPARATOR.join(items), partial, ())
    if not mentions_secret("\n".join(items)):
        return LightDigest(DIGEST_SEPARATOR.join(items), partial, tuple(items))
    asked: list[str] = []

    def allow(item: str) -> bool:
        asked.append(item)
        return not mentions_secret(item)

    items = digest_items(_candidates(by_kind), budget_tokens, counter, known, allow)
    return LightDigest(DIGEST_SEPARATOR.join(items), partial, tuple(asked))


def _candidates(by_kind: tuple[tuple[str, tuple[str, ...]], ...]) -> Iterator[str]:
    """The entities of ``by_kind`` in :data:`_KIND_ORDER`, each as first seen, once; words every file says never."""
    kinds = dict(by_kind)
    seen = set(_COMMON)
    for kind in _KIND_ORDER:
        for value in kinds.get(kind, ()):
            if value not in seen:
                seen.add(value)
                yield value
