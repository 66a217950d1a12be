"""A light digest of a tool output: its entities by kind, first seen first, checked for secrets at once.

The full digest (:mod:`._digest`) ranks every candidate by kind x whole-word mentions, adds definitions with their
line numbers and bare numbers, and checks each item it weighs for secrets: ~620 us of the read-ahead's CPU per
output built ahead in the lm32b loop, most of the read-ahead (issue 22). This one lists the entities of the same
text (the summary's reading extracts them, remembered by text: most are read when the output is added) kind by kind
in the order of :data:`~._digest.KIND_WEIGHTS`, each kind in order of first appearance, walked as the full digest
walks its ranking (each item's count plus a separator's within the budget), an item assigning a secret a value
(``password=X``, a URL's ``?api_key=X`` or ``user:X@``) moved ahead of that value as the full digest moves it. It
asks the session's secrets once about the candidates it walked, those chosen and those skipped for the budget, each
on a line of its own (what a rule finds in an item alone it finds there, and a piece of a remembered secret in any
of them is a piece in the whole); only when the answer is yes is each candidate asked alone, as the full digest
asks. Asking only the items chosen let a bare ``X`` through when its ``password=X`` was too long to fit: the check
that would have taught the session ``X`` never saw it (review of the seventeenth session). An output over
:data:`LIGHT_MAX_CHARS` lists nothing: its entities are read by nothing else, and reading two windows of it cold
was a third of the light digests' cost for no recall measured (DESIGN.md, issue 22, sixteenth and seventeenth sessions).

Pure and deterministic: the same text, budget, counter and secrets' answers give the same digest.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import NamedTuple

from ..summarize.entities import entity_kinds
from ..tokens import TokenCounter
from ._digest import (
    _COMMON,
    DIGEST_HEAD_CHARS,
    DIGEST_SEPARATOR,
    DIGEST_TAIL_CHARS,
    KIND_WEIGHTS,
    _assignments_first,
    digest_items,
)

__all__ = ["LIGHT_MAX_CHARS", "LightDigest", "light_digest"]

# The kinds a light digest lists, most needed first (the full digest's weights). Definitions (a line-number scan of
# their own) and bare numbers (another pass) are left out: the entities alone recall as much at equal tokens.
_KIND_ORDER: tuple[str, ...] = tuple(kind for kind in sorted(KIND_WEIGHTS, key=lambda k: -KIND_WEIGHTS[k])
                                     if kind not in ("definition", "number"))
# A light digest reads an output of up to this many characters whole (the full digest's own bound for reading one
# whole); a longer one lists nothing. Lane A's light digest read such an output's first 1,000 and last 500
# characters instead: windows nothing else reads, their cold extraction ~330 us each in the lm32b loop (a third of
# the light digests' CPU, whatever the windows' size: half the window, 80% of the cost), and without them recall at
# equal tokens against the full digest is -0.04 pt [-0.11, +0.02] on lm32b (with them +0.00), +0.02 on tau, 0 on
# claude (issue 22, seventeenth session).
LIGHT_MAX_CHARS = DIGEST_HEAD_CHARS + DIGEST_TAIL_CHARS


class LightDigest(NamedTuple):
    """A light digest, whether its output was too long to read (nothing listed), and the words asked about secrets."""

    text: str
    partial: bool
    asked: tuple[str, ...]


def light_digest(text: str, *, budget_tokens: int, counter: TokenCounter, known: str = "",
                 mentions_secret: Callable[[str], bool] | None = None,
                 blank: Callable[[str], str] | None = None,
                 learn: Callable[[str], None] | None = None) -> LightDigest:
    """The light digest of ``text``, at most ``budget_tokens`` tokens; "" for an output over :data:`LIGHT_MAX_CHARS`.

    ``known``: text that stays in view beside the placeholder (the call's arguments): items it contains are left
    out. ``mentions_secret``: the session's answer to "does this hold a secret or a piece of one"; asked once of
    the candidates walked (chosen or skipped for the budget), joined by line ends, then of each candidate alone when
    it says yes. ``blank``: the session's
    secrets blanked out of ``text`` before it is read; an output too long to read is not read, but still handed
    to it: blanking teaches the session the secrets it finds, and a later short output's digest may hold one bare.
    ``learn``: the session's learning of the secrets a text holds (``Redactor.learn_text``), all that blanking an
    output too long to read is for; given, such an output is handed to it instead of ``blank``.
    """
    if budget_tokens <= 0 or not text:
        return LightDigest("", False, ())
    if len(text) > LIGHT_MAX_CHARS:
        # Its secrets learned (see above; a scan add() or the read-ahead made is looked up). Blanking learns the
        # same and then searches the whole text for every remembered string and copies it, for a result no one
        # reads (issue 22, eighteenth session: ~77 us an output in the lm32b loop, 222 outputs).
        if learn is not None:
            learn(text)
        elif blank is not None:
            blank(text)
        return LightDigest("", True, ())
    read = blank(text) if blank is not None else text
    candidates = _candidates(entity_kinds(read))
    if "=" in read or "@" in read:  # (else no candidate assigns a value: the order stands)
        joined = "\n".join(candidates)  # (one search of the candidates: few outputs list one with either)
        if "=" in joined or "@" in joined:
            candidates = list(_assignments_first(candidates))
    walk = iter(candidates)
    items = digest_items(walk, budget_tokens, counter, known)
    if not items or mentions_secret is None:
        return LightDigest(DIGEST_SEPARATOR.join(items), False, ())
    # The candidates the walk took from ``walk``: those a check of each alone would have been asked about (the
    # full digest asks before it counts), ``password=X`` too when it did not fit. (A list's iterator tells how many
    # it has left; the last one taken may have only ended the walk: asking about one more changes no answer.)
    walked = candidates[:len(candidates) - operator.length_hint(walk)]
    if not mentions_secret("\n".join(walked)):
        return LightDigest(DIGEST_SEPARATOR.join(items), False, tuple(walked))
    asked: list[str] = []

    def allow(item: str) -> bool:
        asked.append(item)
        return not mentions_secret(item)

    items = digest_items(candidates, budget_tokens, counter, known, allow)
    return LightDigest(DIGEST_SEPARATOR.join(items), False, tuple(asked))


def _candidates(by_kind: tuple[tuple[str, tuple[str, ...]], ...]) -> list[str]:
    """The entities of ``by_kind`` in :data:`_KIND_ORDER`, each as first seen, once; words every file says never."""
    kinds = dict(by_kind)
    seen = set(_COMMON)
    out: list[str] = []
    for kind in _KIND_ORDER:
        for value in kinds.get(kind, ()):
            if value not in seen:
                seen.add(value)
                out.append(value)
    return out
